"""KafkaPrincipal: who a connection is, as Kafka's ACLs and quotas name it (``User:alice``).

A PLAINTEXT connection, and an SSL one without a client certificate, is ``User:ANONYMOUS``; an SSL
connection with a certificate is the principal ``ssl.principal.mapping.rules`` makes of its
subject; a SASL connection is ``User:<authorization id>`` once it has authenticated.
"""

from __future__ import annotations

from dataclasses import dataclass

USER_TYPE = "User"


@dataclass(frozen=True, slots=True)
class KafkaPrincipal:
    principal_type: str
    name: str

    def __str__(self) -> str:
        return f"{self.principal_type}:{self.name}"

    @classmethod
    def parse(cls, text: str) -> KafkaPrincipal:
        """``Type:name`` as in ACLs and ``super.users`` (ValueError without the colon)."""
        kind, sep, name = text.partition(":")
        if not sep or not kind:
            raise ValueError(f"expected a principal of the form Type:name, got {text!r}")
        return cls(kind, name)


ANONYMOUS = KafkaPrincipal(USER_TYPE, "ANONYMOUS")
