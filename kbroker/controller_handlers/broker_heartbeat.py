"""BrokerHeartbeat (key 63), v0–2: keeps a broker's session alive; unfences and fences it.

A registered broker starts fenced; it is unfenced by the first heartbeat that does not ask to
stay fenced once it has replayed the metadata log up to its own registration. ``want_shut_down``
is a controlled shutdown: leadership moves off the broker and it is fenced before it exits.
A heartbeat with an old broker epoch gets STALE_BROKER_EPOCH (the broker re-registers).
The connection it came on is remembered: if the broker's side closes it, the broker is fenced
soon after unless it is heard from again (``kbroker.broker.disconnect.fence.ms``,
replication/quorum/broker_sessions.py).
"""

from __future__ import annotations

from typing import Protocol

from kbroker.controller_handlers.services import HasClock, HasQuorumController
from kbroker.network.context import RequestContext
from kbroker.protocol.codec import NO_THROTTLE, build, response_module
from kbroker.protocol.errors import ErrorCode, KafkaError

API_KEY = 63
MIN_VERSION = 0
MAX_VERSION = 2


class Services(HasQuorumController, HasClock, Protocol): ...


async def handle(ctx: RequestContext[Services], request: object) -> object:
    services = ctx.services
    m = response_module(API_KEY, ctx.api_version)
    try:
        caught_up, fenced, shut_down = services.controller.heartbeat(
            request.broker_id, request.broker_epoch, request.current_metadata_offset, request.want_fence,
            request.want_shut_down, services.clock.wall_ms(), connection=ctx.connection,
        )
        await services.committed()
    except KafkaError as exc:
        return build(m.BrokerHeartbeatResponse, throttle_time=NO_THROTTLE, error_code=exc.code,
                     is_caught_up=False, is_fenced=True, should_shut_down=False)
    return build(m.BrokerHeartbeatResponse, throttle_time=NO_THROTTLE, error_code=ErrorCode.none,
                 is_caught_up=caught_up, is_fenced=fenced, should_shut_down=shut_down)
