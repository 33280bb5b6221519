"""GetTelemetrySubscriptions (key 71), v0 (KIP-714).

A client asks which of its metrics to push and how often; the answer comes from the
CLIENT_METRICS config resources that match it (kbroker/metrics/client_telemetry.py: Kafka's
ClientMetricsManager rules, including THROTTLING_QUOTA_EXCEEDED for a request sooner than the
push interval). A client sending the zero instance id gets a new one. Kafka answers this only
with a metrics receiver plugin installed; kbroker's receiver is built in (the pushed metrics
appear on /metrics), so it always does.
"""

from __future__ import annotations

import datetime
from typing import Protocol

from kio.static.primitive import i32Timedelta

from kbroker.config.config_resources import RESOURCE_CLIENT_METRICS
from kbroker.handlers.services import HasCatalogue, HasClock
from kbroker.metrics.client_telemetry import (
    ACCEPTED_COMPRESSION_TYPES,
    CLIENT_TELEMETRY,
    ClientIdentity,
    Subscription,
    parse_subscription,
)
from kbroker.network.context import RequestContext
from kbroker.protocol.codec import NO_THROTTLE, ZERO_UUID, build, response_module
from kbroker.protocol.errors import ErrorCode, KafkaError

API_KEY = 71
MIN_VERSION = 0
MAX_VERSION = 0


class Services(HasCatalogue, HasClock, Protocol): ...


def subscriptions(ctx: RequestContext[Services]) -> list[Subscription]:
    """Every CLIENT_METRICS resource as a subscription (as the metadata log holds them)."""
    catalogue = ctx.services.catalogue
    return [parse_subscription(catalogue.resource_configs(RESOURCE_CLIENT_METRICS, name))
            for name in catalogue.resource_names(RESOURCE_CLIENT_METRICS)]


def identity(ctx: RequestContext[Services]) -> ClientIdentity:
    """The client as subscriptions match it: client id, the software it named in ApiVersions
    v3+ on this connection, and its address."""
    software = CLIENT_TELEMETRY.software(ctx.connection or "")
    port = (ctx.connection or "").rpartition(":")[2]
    return ClientIdentity(ctx.header.client_id or "", software[0], software[1], ctx.client_host, port)


async def handle(ctx: RequestContext[Services], request: object) -> object:
    m = response_module(API_KEY, ctx.api_version)
    try:
        instance = CLIENT_TELEMETRY.get_subscriptions(getattr(request, "client_instance_id", None), identity(ctx),
                                                      subscriptions(ctx), ctx.services.clock.wall_ms())
    except KafkaError as exc:
        return build(m.GetTelemetrySubscriptionsResponse, throttle_time=NO_THROTTLE, error_code=exc.code,
                     client_instance_id=ZERO_UUID, subscription_id=0, accepted_compression_types=(),
                     push_interval=_ms(0), telemetry_max_bytes=0, delta_temporality=False, requested_metrics=())
    return build(
        m.GetTelemetrySubscriptionsResponse,
        throttle_time=NO_THROTTLE,
        error_code=ErrorCode.none,
        client_instance_id=instance.instance_id,
        subscription_id=instance.subscription_id,
        accepted_compression_types=ACCEPTED_COMPRESSION_TYPES,
        push_interval=_ms(instance.interval_ms),
        telemetry_max_bytes=CLIENT_TELEMETRY.max_bytes,
        delta_temporality=True,
        requested_metrics=instance.metrics,  # ["*"] for all, as Kafka sends it
    )


def _ms(value: int) -> i32Timedelta:
    return i32Timedelta.parse(datetime.timedelta(milliseconds=value))
