"""DescribeDelegationToken (key 41), v1–3: ``kafka-delegation-tokens --describe``.

On a PLAINTEXT connection Kafka answers DELEGATION_TOKEN_REQUEST_NOT_ALLOWED and no tokens
(handlers/delegation_tokens.py); so does kbroker.
"""

from __future__ import annotations

from kbroker.network.context import RequestContext
from kbroker.protocol.codec import NO_THROTTLE, build, response_module

from .delegation_tokens import NOT_ALLOWED

API_KEY = 41
MIN_VERSION = 1
MAX_VERSION = 3


async def handle(ctx: RequestContext[object], request: object) -> object:
    m = response_module(API_KEY, ctx.api_version)
    return build(m.DescribeDelegationTokenResponse, error_code=NOT_ALLOWED, tokens=(), throttle_time=NO_THROTTLE)
