"""CreateDelegationToken (key 38), v1–3: ``kafka-delegation-tokens --create``.

On a PLAINTEXT connection Kafka answers DELEGATION_TOKEN_REQUEST_NOT_ALLOWED with the owner
(the request's, else the requester ANONYMOUS), the requester, -1 timestamps and an empty
token (handlers/delegation_tokens.py); so does kbroker.
"""

from __future__ import annotations

from kbroker.network.context import RequestContext
from kbroker.protocol.codec import NO_THROTTLE, build, response_module

from .delegation_tokens import ANONYMOUS, NO_TIMESTAMP, NOT_ALLOWED

API_KEY = 38
MIN_VERSION = 1
MAX_VERSION = 3


async def handle(ctx: RequestContext[object], request: object) -> object:
    m = response_module(API_KEY, ctx.api_version)
    owner_name = getattr(request, "owner_principal_name", None)
    owner = (request.owner_principal_type or ANONYMOUS[0], owner_name) if owner_name else ANONYMOUS
    return build(m.CreateDelegationTokenResponse, error_code=NOT_ALLOWED, principal_type=owner[0],
                 principal_name=owner[1], token_requester_principal_type=ANONYMOUS[0],
                 token_requester_principal_name=ANONYMOUS[1], issue_timestamp=NO_TIMESTAMP,
                 expiry_timestamp=NO_TIMESTAMP, max_timestamp=NO_TIMESTAMP, token_id="", hmac=b"",
                 throttle_time=NO_THROTTLE)
