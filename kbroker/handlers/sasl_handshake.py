"""SaslHandshake (key 17), v0–1.

The handshake that starts authentication on a SASL_PLAINTEXT / SASL_SSL listener, and a
re-authentication (KIP-368), never reach this handler: the connection's SaslServerAuthenticator
(kbroker/network/sasl_authenticator.py) answers them. What reaches it is a handshake on a PLAINTEXT
or SSL listener, or on an authenticated SASL connection that may not re-authenticate now; a Kafka
broker answers those with ILLEGAL_SASL_STATE and no mechanisms and keeps the connection open (its
requests go on being served); so does kbroker.
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
