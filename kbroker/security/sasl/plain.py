"""SASL/PLAIN (RFC 4616): ``[authzid] NUL authcid NUL passwd`` checked against the PLAIN login
module's ``user_<name>="<password>"`` options, with Kafka's failure messages.

PLAIN sends the password itself: Kafka (and kbroker) expect it over SASL_SSL outside a test bed.
"""

from __future__ import annotations

import hmac
from collections.abc import Mapping

from kbroker.security.sasl.jaas import JaasLoginModule
from kbroker.security.sasl.mechanism import PLAIN, SaslAuthenticationError, invalid_credentials

USER_PREFIX = "user_"


class PlainServer:
    """One PLAIN exchange: a single response, answered with an empty challenge."""

    mechanism = PLAIN

    def __init__(self, users: Mapping[str, str]) -> None:
        self._users = users
        self._authorization_id: str | None = None

    @classmethod
    def from_jaas(cls, module: JaasLoginModule) -> PlainServer:
        users = {k[len(USER_PREFIX):]: v for k, v in module.options.items() if k.startswith(USER_PREFIX)}
        return cls(users)

    def evaluate_response(self, response: bytes) -> bytes:
        if self._authorization_id is not None:
            raise invalid_credentials(PLAIN)
        try:
            text = response.decode("utf-8")
        except UnicodeDecodeError:
            raise invalid_credentials(PLAIN) from None
        # Kafka splits into at most three parts: a NUL in the password stays part of it.
        parts = text.split("\0", 2)
        if len(parts) != 3 or not parts[1] or not parts[2]:
            raise invalid_credentials(PLAIN)  # Kafka's SaslException: its generic message
        authzid, username, password = parts
        expected = self._users.get(username)
        # Compared in constant time; an unknown user is compared too, so both cost the same.
        matches = hmac.compare_digest((expected or "").encode(), password.encode())
        if expected is None or not matches:
            raise SaslAuthenticationError("Authentication failed: Invalid username or password")
        if authzid and authzid != username:
            raise SaslAuthenticationError(
                "Authentication failed: Client requested an authorization id that is different from username")
        self._authorization_id = username
        return b""

    @property
    def is_complete(self) -> bool:
        return self._authorization_id is not None

    @property
    def authorization_id(self) -> str:
        if self._authorization_id is None:
            raise RuntimeError("Authentication exchange has not completed")
        return self._authorization_id

    @property
    def session_lifetime_ms(self) -> int | None:
        return None  # a password does not expire


class PlainClient:
    """The broker's own PLAIN login (the inter-broker listener's ``username`` / ``password``)."""

    mechanism = PLAIN

    def __init__(self, username: str, password: str) -> None:
        self._username = username
        self._password = password
        self._complete = False

    @classmethod
    def from_jaas(cls, module: JaasLoginModule) -> PlainClient:
        return cls(module.options.get("username", ""), module.options.get("password", ""))

    def initial_response(self) -> bytes:
        return f"\0{self._username}\0{self._password}".encode()

    def evaluate_challenge(self, challenge: bytes) -> bytes | None:
        self._complete = True
        return None

    @property
    def is_complete(self) -> bool:
        return self._complete
