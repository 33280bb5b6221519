"""ShareAcknowledge (key 79), v1–2.

kbroker has no share groups (KIP-932): share.version is supported at level 0 only
(replication/quorum/feature_control.py), and a Kafka broker whose share.version is 0 answers
UNSUPPORTED_VERSION for the whole request; so does kbroker.
"""

from __future__ import annotations

from kbroker.network.context import RequestContext
from kbroker.protocol.codec import NO_THROTTLE, build, response_module
from kbroker.protocol.errors import ErrorCode

API_KEY = 79
MIN_VERSION = 1
MAX_VERSION = 2


async def handle(ctx: RequestContext[object], request: object) -> object:
    m = response_module(API_KEY, ctx.api_version)
    return build(m.ShareAcknowledgeResponse, throttle_time=NO_THROTTLE, error_code=ErrorCode.unsupported_version,
                 error_message=None, acquisition_lock_timeout=NO_THROTTLE, responses=(), node_endpoints=())
