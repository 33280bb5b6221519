"""StreamsGroupDescribe (key 89), v0–0.

kbroker has no streams groups (KIP-1071): streams.version is supported at level 0 only
(replication/quorum/feature_control.py), and a Kafka broker whose streams.version is 0 answers
UNSUPPORTED_VERSION for each group asked about; so does kbroker.
"""

from __future__ import annotations

from kbroker.network.context import RequestContext
from kbroker.protocol.codec import NO_THROTTLE, build, response_module
from kbroker.protocol.errors import ErrorCode

API_KEY = 89
MIN_VERSION = 0
MAX_VERSION = 0
AUTHORIZED_OPERATIONS_OMITTED = -(2**31)


async def handle(ctx: RequestContext[object], request: object) -> object:
    m = response_module(API_KEY, ctx.api_version)
    return build(m.StreamsGroupDescribeResponse, throttle_time=NO_THROTTLE, groups=tuple(
        build(m.DescribedGroup, error_code=ErrorCode.unsupported_version, error_message=None, group_id=group,
              group_state="", group_epoch=0, assignment_epoch=0, topology=None, members=(),
              authorized_operations=AUTHORIZED_OPERATIONS_OMITTED)
        for group in request.group_ids))
