"""SaslAuthenticate (key 36), v0–2.

SaslAuthenticate during authentication on a SASL listener is answered by the connection's
SaslServerAuthenticator (kbroker/network/sasl_authenticator.py). What reaches this handler comes on
a PLAINTEXT or SSL listener, or after a SASL connection has authenticated: a Kafka broker treats
the connection as authenticated and answers ILLEGAL_SASL_STATE "SaslAuthenticate request received
after successful authentication", keeping the connection open; so does kbroker.
"""

from __future__ import annotations

import datetime

from kbroker.network.context import RequestContext
from kbroker.protocol.codec import build, response_module
from kbroker.protocol.errors import ErrorCode

API_KEY = 36
MIN_VERSION = 0
MAX_VERSION = 2
ALREADY_AUTHENTICATED = "SaslAuthenticate request received after successful authentication"


async def handle(ctx: RequestContext[object], request: object) -> object:
    m = response_module(API_KEY, ctx.api_version)
    return build(m.SaslAuthenticateResponse, error_code=ErrorCode.illegal_sasl_state,
                 error_message=ALREADY_AUTHENTICATED, auth_bytes=b"", session_lifetime=datetime.timedelta(0))
