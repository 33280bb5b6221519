"""ListenerSecurity: what a listener's security protocol makes of its connections.

``listener.security.protocol.map`` gives each listener one of Kafka's four protocols:
PLAINTEXT (no TLS, every connection ``User:ANONYMOUS``), SSL (TLS; a client certificate's subject,
mapped by ``ssl.principal.mapping.rules``, is the principal), SASL_PLAINTEXT and SASL_SSL (the
principal is who authenticated with SASL, over plain TCP or TLS). The composition root builds one
per listener from the configuration (``kbroker.config.listener_settings``); the SocketServer
hands it to each connection the listener accepts.
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass

from kbroker.network.sasl_authenticator import SaslListener
from kbroker.security.ssl_principal_mapper import SslPrincipalMapper

PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL = "PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"
SECURITY_PROTOCOLS = (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL)
# A client that opens a connection and never finishes the TLS handshake holds it this long.
SSL_HANDSHAKE_TIMEOUT_S = 10.0


@dataclass(frozen=True, slots=True)
class ListenerSecurity:
    protocol: str = PLAINTEXT
    ssl_context: ssl.SSLContext | None = None  # SSL and SASL_SSL
    principal_mapper: SslPrincipalMapper | None = None  # SSL: client certificates name the principal
    sasl: SaslListener | None = None  # SASL_PLAINTEXT and SASL_SSL


PLAINTEXT_LISTENER = ListenerSecurity()
