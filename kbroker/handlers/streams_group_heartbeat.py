"""StreamsGroupHeartbeat (key 88), v0–0.

kbroker has no streams groups (KIP-1071): streams.version is supported at level 0 only
(replication/quorum/feature_control.py), and a Kafka broker whose streams.version is 0 answers
UNSUPPORTED_VERSION; so does kbroker.
"""

from __future__ import annotations

from kbroker.network.context import RequestContext
from kbroker.protocol.codec import NO_THROTTLE, build, response_module
from kbroker.protocol.errors import ErrorCode

API_KEY = 88
MIN_VERSION = 0
MAX_VERSION = 0


async def handle(ctx: RequestContext[object], request: object) -> object:
    m = response_module(API_KEY, ctx.api_version)
    return build(m.StreamsGroupHeartbeatResponse, throttle_time=NO_THROTTLE, error_code=ErrorCode.unsupported_version,
                 error_message=None, member_id="", member_epoch=0, heartbeat_interval=NO_THROTTLE,
                 acceptable_recovery_lag=0, task_offset_interval=NO_THROTTLE, status=(), active_tasks=None,
                 standby_tasks=None, warmup_tasks=None, endpoint_information_epoch=0,
                 partitions_by_user_endpoint=None)
