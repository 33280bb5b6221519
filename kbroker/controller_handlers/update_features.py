"""UpdateFeatures (key 57), v0–2, on the controller: finalize new feature levels.

Sent by ``kafka-features --bootstrap-controller`` or forwarded by a broker. The updates are
checked in order with Kafka's rules (replication/quorum/feature_control.py); the first one
refused fails the whole request with INVALID_UPDATE_VERSION and a top-level message that, as
Kafka's, starts "The update failed for all features since the following feature had an error:".
``validate_only`` (``--dry-run``) checks and writes nothing. Otherwise the FeatureLevelRecords
are committed before the answer. v0 has ``allow_downgrade`` where v1 has the upgrade type (a
safe downgrade when allowed). v0–1 answer one row per feature on success; v2 has no rows.
"""

from __future__ import annotations

from typing import Protocol

from kbroker.controller_handlers.services import HasClock, HasQuorumController
from kbroker.network.context import RequestContext
from kbroker.protocol.codec import NO_THROTTLE, build, response_module
from kbroker.protocol.errors import ErrorCode, KafkaError
from kbroker.replication.quorum.feature_control import SAFE_DOWNGRADE, UPGRADE, FeatureUpdate

API_KEY = 57
MIN_VERSION = 0
MAX_VERSION = 2
FIRST_WITHOUT_RESULTS = 2
ALL_FAILED = "The update failed for all features since the following feature had an error: "


class Services(HasQuorumController, HasClock, Protocol): ...


def error_response(api_version: int, error: ErrorCode, message: str | None = None) -> object:
    m = response_module(API_KEY, api_version)
    extra = {} if api_version >= FIRST_WITHOUT_RESULTS else {"results": ()}
    return build(m.UpdateFeaturesResponse, throttle_time=NO_THROTTLE, error_code=error, error_message=message,
                 **extra)


async def handle(ctx: RequestContext[Services], request: object) -> object:
    services = ctx.services
    version = ctx.api_version
    updates = [
        FeatureUpdate(u.feature, u.max_version_level,
                      u.upgrade_type if version >= 1 else (SAFE_DOWNGRADE if u.allow_downgrade else UPGRADE))
        for u in request.feature_updates
    ]
    try:
        services.controller.update_features(updates, getattr(request, "validate_only", False),
                                            services.clock.wall_ms())
        await services.committed()
    except KafkaError as exc:
        if exc.code == ErrorCode.invalid_update_version:
            return error_response(version, exc.code, ALL_FAILED + (exc.message or ""))
        return error_response(version, exc.code, exc.message)
    if version >= FIRST_WITHOUT_RESULTS:
        return error_response(version, ErrorCode.none)
    m = response_module(API_KEY, version)
    return build(m.UpdateFeaturesResponse, throttle_time=NO_THROTTLE, error_code=ErrorCode.none, error_message=None,
                 results=tuple(build(m.UpdatableFeatureResult, feature=u.name, error_code=ErrorCode.none,
                                     error_message=None) for u in updates))
