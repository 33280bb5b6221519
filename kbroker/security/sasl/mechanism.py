"""What every SASL mechanism is to the connection that runs it: a server (or client) that turns
the peer's token into the next one, and the failure Kafka reports to the client.

The mechanisms are protocol logic without sockets: the connection's SaslHandshake /
SaslAuthenticate state machine (kbroker/network) feeds each SaslAuthenticate token to
``SaslServer.evaluate_response`` and sends back what it returns.
"""

from __future__ import annotations

from typing import Protocol

PLAIN = "PLAIN"
SCRAM_SHA_256 = "SCRAM-SHA-256"
SCRAM_SHA_512 = "SCRAM-SHA-512"
OAUTHBEARER = "OAUTHBEARER"
GSSAPI = "GSSAPI"
SUPPORTED_MECHANISMS = (PLAIN, SCRAM_SHA_256, SCRAM_SHA_512, OAUTHBEARER)


class SaslAuthenticationError(Exception):
    """A failed authentication; ``message`` is what Kafka puts in the SaslAuthenticate response
    (SASL_AUTHENTICATION_FAILED) and what the client reports. It never holds a password or token."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def invalid_credentials(mechanism: str) -> SaslAuthenticationError:
    """Kafka's answer to every failure a mechanism does not describe itself (its SaslException
    case): the same words for a wrong password and an unknown user, so no user is revealed."""
    return SaslAuthenticationError(
        f"Authentication failed during authentication due to invalid credentials with SASL mechanism {mechanism}")


class SaslServer(Protocol):
    """One authentication exchange on the server side (a new one per exchange, re-authentication
    included)."""

    mechanism: str

    def evaluate_response(self, response: bytes) -> bytes:
        """The next challenge for the client's ``response`` (b"" when there is none); raises
        SaslAuthenticationError when the exchange fails."""
        ...

    @property
    def is_complete(self) -> bool: ...

    @property
    def authorization_id(self) -> str:
        """The authenticated user (``User:<authorization id>``); only once complete."""
        ...

    @property
    def session_lifetime_ms(self) -> int | None:
        """When the credential itself expires, epoch ms (an OAUTHBEARER token's ``exp``), else
        None (PLAIN, SCRAM). The connection's KIP-368 session ends at the earlier of this and
        ``connections.max.reauth.ms`` after authentication; only once complete."""
        ...


class SaslClient(Protocol):
    """One authentication exchange on the client side (the broker's inter-broker connections)."""

    mechanism: str

    def initial_response(self) -> bytes: ...

    def evaluate_challenge(self, challenge: bytes) -> bytes | None:
        """The next response to send, or None when the exchange is over for this side; raises
        SaslAuthenticationError on a challenge that shows the server is not who it claims."""
        ...

    @property
    def is_complete(self) -> bool: ...
