"""The server side of a TLS handshake on an accepted socket, with the alert a refusal owes the client.

asyncio's SSLProtocol (Python 3.11-3.13) drops the bytes OpenSSL wrote when a handshake fails:
its ``_do_handshake`` reports the error without flushing the outgoing BIO, so the TLS alert
(``unknown_ca``, ``certificate_required``, ``bad_certificate``...) never leaves, and the client
sees the connection simply end. Kafka's broker sends it, and clients report it: librdkafka
"certificate verify failed"-style errors, the Java client an SSLHandshakeException, where
without it they see end-of-file and retry until their timeout. ``AlertingSSLProtocol`` sends
those bytes before the error closes the transport (a few bytes on a socket whose send buffer is
empty: the transport writes them at once), and ``accept_tls`` builds what
``loop.connect_accepted_socket(ssl=...)`` builds, with it.
"""

from __future__ import annotations

import asyncio
import socket
import ssl
from asyncio import sslproto


class AlertingSSLProtocol(sslproto.SSLProtocol):
    """asyncio's SSLProtocol, sending OpenSSL's alert when the handshake fails."""

    def _do_handshake(self) -> None:
        try:
            self._sslobj.do_handshake()
        except sslproto.SSLAgainErrors:
            self._process_outgoing()
        except ssl.SSLError as exc:
            self._process_outgoing()  # the alert OpenSSL wrote for this failure
            self._on_handshake_complete(exc)
        else:
            self._on_handshake_complete(None)


async def accept_tls(loop: asyncio.AbstractEventLoop, sock: socket.socket, protocol: asyncio.BaseProtocol,
                     context: ssl.SSLContext, handshake_timeout_s: float) -> None:
    """Run the server side of the TLS handshake on ``sock``, then hand ``protocol`` its (TLS)
    transport; raises ``ssl.SSLError`` (or TimeoutError) when the handshake fails, after the
    client got its alert."""
    waiter = loop.create_future()
    tls = AlertingSSLProtocol(loop, protocol, context, waiter, server_side=True,
                              ssl_handshake_timeout=handshake_timeout_s)
    transport, _ = await loop.connect_accepted_socket(lambda: tls, sock)
    try:
        await waiter
    except BaseException:
        transport.close()
        raise
