"""ListPartitionReassignments (key 46), v0: ``kafka-reassign-partitions --list`` / ``--verify``.

In a cluster the request goes to the active controller unchanged and its answer comes back. A
single node never has a reassignment in progress: the answer lists none.
"""

from __future__ import annotations

from kbroker.context import RequestContext
from kbroker.protocol.codec import NO_THROTTLE, build, response_module
from kbroker.protocol.errors import ErrorCode

API_KEY = 46
MIN_VERSION = 0
MAX_VERSION = 0


async def handle(ctx: RequestContext, request: object) -> object:
    broker = ctx.broker
    m = response_module(API_KEY, ctx.api_version)
    if broker.lifecycle is not None:
        answer = await broker.lifecycle.forward(API_KEY, ctx.api_version, request)
        timed_out = ErrorCode.request_timed_out
        return answer or build(m.ListPartitionReassignmentsResponse, throttle_time=NO_THROTTLE, error_code=timed_out,
                               error_message=None, topics=())
    return build(m.ListPartitionReassignmentsResponse, throttle_time=NO_THROTTLE, error_code=ErrorCode.none,
                 error_message=None, topics=())
