"""ShareGroupHeartbeat (key 76), v1–1.

kbroker has no share groups (KIP-932): share.version is supported at level 0 only
(replication/quorum/feature_control.py), and a Kafka broker whose share.version is 0 answers
UNSUPPORTED_VERSION; so does kbroker.
"""

from __future__ import annotations

from kbroker.network.context import RequestContext
from kbroker.protocol.codec import NO_THROTTLE, build, response_module
from kbroker.protocol.errors import ErrorCode

API_KEY = 76
MIN_VERSION = 1
MAX_VERSION = 1


async def handle(ctx: RequestContext[object], request: object) -> object:
    m = response_module(API_KEY, ctx.api_version)
    return build(m.ShareGroupHeartbeatResponse, throttle_time=NO_THROTTLE, error_code=ErrorCode.unsupported_version,
                 error_message=None, member_id=None, member_epoch=0, heartbeat_interval=NO_THROTTLE,
                 assignment=None)
