"""ExpireDelegationToken (key 40), v1–2: ``kafka-delegation-tokens --expire``.

On a PLAINTEXT connection Kafka answers DELEGATION_TOKEN_REQUEST_NOT_ALLOWED with expiry -1
(handlers/delegation_tokens.py); so does kbroker.
"""

from __future__ import annotations

from kbroker.network.context import RequestContext
from kbroker.protocol.codec import NO_THROTTLE, build, response_module

from .delegation_tokens import NO_TIMESTAMP, NOT_ALLOWED

API_KEY = 40
MIN_VERSION = 1
MAX_VERSION = 2


async def handle(ctx: RequestContext[object], request: object) -> object:
    m = response_module(API_KEY, ctx.api_version)
    return build(m.ExpireDelegationTokenResponse, error_code=NOT_ALLOWED, expiry_timestamp=NO_TIMESTAMP,
                 throttle_time=NO_THROTTLE)
