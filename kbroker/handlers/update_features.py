"""UpdateFeatures (key 57), v0–2: ``kafka-features upgrade / downgrade / disable``.

Finalized feature levels are the controller's to change, so the request is forwarded unchanged
to the active controller (``FORWARD_TO_CONTROLLER``), which checks it with Kafka's rules and
writes FeatureLevelRecords (kbroker/controller_handlers/update_features.py). Brokers learn the
new levels by replaying the metadata log; ApiVersions reports them. A controller that does not
answer: REQUEST_TIMED_OUT.
With an authorizer the caller needs ALTER on the cluster (else CLUSTER_AUTHORIZATION_FAILED).
"""

from __future__ import annotations

from kbroker.handlers.security import HasSecurity, cluster_refusal
from kbroker.network.context import RequestContext
from kbroker.protocol.acl import AclOperation
from kbroker.protocol.codec import NO_THROTTLE, build, response_module
from kbroker.protocol.errors import ErrorCode

API_KEY = 57
MIN_VERSION = 0
MAX_VERSION = 2
FORWARD_TO_CONTROLLER = True


def answer_locally(ctx: RequestContext[HasSecurity], request: object) -> object | None:
    """Kafka's check before it forwards: ALTER on the cluster."""
    return cluster_refusal(ctx, AclOperation.ALTER, error_response)


def error_response(api_version: int, error: ErrorCode) -> object:
    m = response_module(API_KEY, api_version)
    extra = {} if api_version >= 2 else {"results": ()}
    return build(m.UpdateFeaturesResponse, throttle_time=NO_THROTTLE, error_code=error, error_message=None, **extra)
