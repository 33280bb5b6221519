"""ShareGroupDescribe (key 77), v1–1.

kbroker has no share groups (KIP-932): share.version is supported at level 0 only
(replication/quorum/feature_control.py), and a Kafka broker whose share.version is 0 answers
UNSUPPORTED_VERSION for each group asked about; so does kbroker.
"""

from __future__ import annotations

from kbroker.network.context import RequestContext
from kbroker.protocol.codec import NO_THROTTLE, build, response_module
from kbroker.protocol.errors import ErrorCode

API_KEY = 77
MIN_VERSION = 1
MAX_VERSION = 1
AUTHORIZED_OPERATIONS_OMITTED = -(2**31)


async def handle(ctx: RequestContext[object], request: object) -> object:
    m = response_module(API_KEY, ctx.api_version)
    return build(m.ShareGroupDescribeResponse, throttle_time=NO_THROTTLE, groups=tuple(
        build(m.DescribedGroup, error_code=ErrorCode.unsupported_version, error_message=None, group_id=group,
              group_state="", group_epoch=0, assignment_epoch=0, assignor_name="", members=(),
              authorized_operations=AUTHORIZED_OPERATIONS_OMITTED)
        for group in request.group_ids))
