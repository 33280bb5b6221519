"""FindCoordinator (key 10), v0-6.

Names this broker (node id, advertised host and port) as the coordinator of any group
(key type 0) or transactional id (key type 1), error NONE. v0-3 ask for one key, v4+ for a
list (coordinator_keys), answered one coordinator per key. Another key type (e.g. 2, share
groups): INVALID_REQUEST.
Transactional ids are coordinated here by the TransactionCoordinator (``__transaction_state``
is created at its first use), classic groups by the GroupCoordinator and KIP-848 consumer
groups by the ConsumerGroupCoordinator (``__consumer_offsets`` is created at the first commit
or group write). Deviation: share groups (key type 2) are not implemented.
"""

from __future__ import annotations

from kbroker.context import RequestContext
from kbroker.protocol.codec import NO_THROTTLE, build, response_module
from kbroker.protocol.errors import ErrorCode

API_KEY = 10
MIN_VERSION = 0
MAX_VERSION = 6

KEY_TYPE_GROUP = 0
KEY_TYPE_TRANSACTION = 1


async def handle(ctx: RequestContext, request: object) -> object:
    m = response_module(API_KEY, ctx.api_version)
    key_type = getattr(request, "key_type", KEY_TYPE_GROUP)
    node_id, (host, port) = ctx.broker.node_id, ctx.broker.advertised
    error, message = ErrorCode.none, None
    if key_type not in (KEY_TYPE_GROUP, KEY_TYPE_TRANSACTION):
        error, message = ErrorCode.invalid_request, f"Unsupported key type {key_type}"
        node_id, host, port = -1, "", -1
    if hasattr(request, "coordinator_keys"):
        coordinators = tuple(
            build(
                m.Coordinator, key=key, node_id=node_id, host=host, port=port,
                error_code=error, error_message=message,
            )
            for key in request.coordinator_keys
        )
        return build(m.FindCoordinatorResponse, throttle_time=NO_THROTTLE, coordinators=coordinators)
    return build(
        m.FindCoordinatorResponse,
        throttle_time=NO_THROTTLE,
        error_code=error,
        error_message=message,
        node_id=node_id,
        host=host,
        port=port,
    )
