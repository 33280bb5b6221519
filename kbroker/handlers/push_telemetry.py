"""PushTelemetry (key 72), v0 (KIP-714).

A client's metrics, OTLP MetricsData compressed with the codec it names, kept for /metrics
(kbroker/metrics/client_telemetry.py). Refusals are Kafka's ClientMetricsManager's: a reserved
instance id or a push after a terminating one INVALID_REQUEST, too soon THROTTLING_QUOTA_EXCEEDED,
a stale subscription id UNKNOWN_SUBSCRIPTION_ID, an unknown codec UNSUPPORTED_COMPRESSION_TYPE,
more than telemetry.max.bytes TELEMETRY_TOO_LARGE, a payload that does not decode INVALID_RECORD.
"""

from __future__ import annotations

from kbroker.handlers.get_telemetry_subscriptions import Services, identity, subscriptions
from kbroker.metrics.client_telemetry import CLIENT_TELEMETRY
from kbroker.network.context import RequestContext
from kbroker.protocol.codec import NO_THROTTLE, build, response_module
from kbroker.protocol.errors import ErrorCode, KafkaError

API_KEY = 72
MIN_VERSION = 0
MAX_VERSION = 0

__all__ = ["API_KEY", "MAX_VERSION", "MIN_VERSION", "Services", "handle"]


async def handle(ctx: RequestContext[Services], request: object) -> object:
    m = response_module(API_KEY, ctx.api_version)
    error = ErrorCode.none
    try:
        CLIENT_TELEMETRY.push(
            getattr(request, "client_instance_id", None), identity(ctx), subscriptions(ctx),
            int(getattr(request, "subscription_id", 0)), bool(getattr(request, "terminating", False)),
            int(getattr(request, "compression_type", 0)), bytes(getattr(request, "metrics", b"") or b""),
            ctx.services.clock.wall_ms())
    except KafkaError as exc:
        error = exc.code
    return build(m.PushTelemetryResponse, throttle_time=NO_THROTTLE, error_code=error)
