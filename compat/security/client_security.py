"""How a compat client connects to a secured listener, independent of the client library.

Each adapter in ``compat/clients`` turns a ``ClientSecurity`` into its own library's settings
(``Client.security_config``): librdkafka's ``security.protocol`` / ``ssl.ca.location`` /
``sasl.username``, the Java client's ``ssl.truststore.type=PEM`` / ``sasl.jaas.config``,
kafka-python's ``ssl_cafile`` / ``sasl_plain_username``, aiokafka's ``ssl_context``.
"""

from __future__ import annotations

import base64
import json
import time
from dataclasses import dataclass
from pathlib import Path

from compat.security.certificates import KeyPair

LOGIN_MODULES = {
    "PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
    "SCRAM-SHA-256": "org.apache.kafka.common.security.scram.ScramLoginModule",
    "SCRAM-SHA-512": "org.apache.kafka.common.security.scram.ScramLoginModule",
    "OAUTHBEARER": "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule",
}


@dataclass(frozen=True)
class ClientSecurity:
    """How a client connects: ``protocol`` (Kafka's ``security.protocol``), the SASL
    ``mechanism`` with ``username``/``password`` (for OAUTHBEARER, ``username`` is the
    unsecured token's subject), the CA it trusts (``ca``) and the key pair it presents
    (``certificate``, mTLS)."""

    protocol: str
    mechanism: str | None = None
    username: str | None = None
    password: str | None = None
    ca: Path | None = None
    certificate: KeyPair | None = None

    @property
    def tls(self) -> bool:
        return self.protocol in ("SSL", "SASL_SSL")

    def client_jaas(self) -> str:
        """A Java client's ``sasl.jaas.config`` for this mechanism and user."""
        assert self.mechanism is not None
        module = LOGIN_MODULES[self.mechanism]
        if self.mechanism == "OAUTHBEARER":
            return f'{module} required unsecuredLoginStringClaim_sub="{self.username}";'
        return f'{module} required username="{self.username}" password="{self.password}";'

    def unsecured_token(self, lifetime_s: int = 3600) -> str:
        """An unsecured JWS (``alg: none``) naming ``username`` as its subject: what Kafka's
        default OAUTHBEARER login makes for development, for clients that take a token instead."""
        now = int(time.time())
        header = {"alg": "none"}
        claims = {"sub": self.username, "iat": now, "exp": now + lifetime_s}
        return f"{_b64url(header)}.{_b64url(claims)}."


def _b64url(value: dict[str, object]) -> str:
    return base64.urlsafe_b64encode(json.dumps(value).encode()).rstrip(b"=").decode()
