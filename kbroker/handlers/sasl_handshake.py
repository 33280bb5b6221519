"""SaslHandshake (key 17), v0–1.

kbroker's listeners are PLAINTEXT, where a Kafka broker answers a handshake with
ILLEGAL_SASL_STATE and no mechanisms, and keeps the connection open (its requests go on being
served); so does kbroker. SASL listeners come with the security issue (#18).
"""

from __future__ import annotations

from kbroker.network.context import RequestContext
from kbroker.protocol.codec import build, response_module
from kbroker.protocol.errors import ErrorCode

API_KEY = 17
MIN_VERSION = 0
MAX_VERSION = 1


async def handle(ctx: RequestContext[object], request: object) -> object:
    m = response_module(API_KEY, ctx.api_version)
    return build(m.SaslHandshakeResponse, error_code=ErrorCode.illegal_sasl_state, mechanisms=())
