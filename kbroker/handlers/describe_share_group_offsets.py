"""DescribeShareGroupOffsets (key 90), v0–1.

kbroker has no share groups (KIP-932): share.version is supported at level 0 only
(replication/quorum/feature_control.py), and a Kafka broker whose share.version is 0 answers
UNSUPPORTED_VERSION for each group asked about; so does kbroker.
"""

from __future__ import annotations

from kbroker.network.context import RequestContext
from kbroker.protocol.codec import NO_THROTTLE, build, response_module
from kbroker.protocol.errors import ErrorCode

API_KEY = 90
MIN_VERSION = 0
MAX_VERSION = 1


async def handle(ctx: RequestContext[object], request: object) -> object:
    m = response_module(API_KEY, ctx.api_version)
    return build(m.DescribeShareGroupOffsetsResponse, throttle_time=NO_THROTTLE, groups=tuple(
        build(m.DescribeShareGroupOffsetsResponseGroup, group_id=g.group_id, topics=(),
              error_code=ErrorCode.unsupported_version, error_message=None)
        for g in request.groups))
