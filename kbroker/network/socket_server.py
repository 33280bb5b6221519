"""SocketServer: a node's listeners and the connections they accept, with Kafka's limits.

One ``SocketServer`` serves a set of listeners with one Dispatcher (a node has one for its
broker listeners and one for its controller listeners, as Kafka's broker and controller have
a socket server each). It owns what all its connections share:

- ``Acceptor``: one listening socket. It accepts while ``max.connections`` allows (else it
  stops until a connection closes) and applies ``max.connections.per.ip`` (ConnectionQuotas).
  When accepting fails — the process is out of descriptors (EMFILE), the system is (ENFILE),
  or memory is short — it stops watching that socket and retries after a back-off that doubles
  up to ``ACCEPT_BACKOFF_MAX_S``, with a rate-limited warning; existing connections are served
  meanwhile. (asyncio's own accept loop keeps calling accept() after EMFILE for the rest of its
  batch of ``backlog`` attempts, logging each and scheduling one more retry timer each: with a
  backlog of 1024 that was the 1.2 million log lines of issue 13.)
- ``connections.max.idle.ms``: connections in order of last activity (a read or a response
  written); one timer closes those idle longer, as Kafka's selector does. -1 never closes.
- ``queued.max.request.bytes``: the MemoryPool of request bytes, if positive.
- Socket buffer sizes are the kernel's (autotuned): ``socket.send.buffer.bytes`` and
  ``socket.receive.buffer.bytes`` are accepted, not acted on. Measured with Kafka's 100 KiB
  defaults applied as Kafka's Acceptor applies them: SO_RCVBUF made each 1 MB produce request
  five reads and regrowths of its frame buffer (+25% broker CPU per GB, LZ4 produce with
  librdkafka), and SO_SNDBUF doubled the broker's CPU per GB for the Java consumer's catch-up
  read (its 64 KiB receive buffer drains a 200 KiB send buffer in many small sendfile rounds)
  while saving librdkafka's a little.
- The receive buffer that connections with no partial frame read into (see connection.py): a
  read and its processing run back to back in one event-loop callback, so one buffer serves
  them all and an idle connection holds no buffer of its own.
- Each listener's ``ListenerSecurity``: on SSL and SASL_SSL listeners an accepted socket gets
  its TLS handshake (``accept_tls``) before it is a connection; a handshake that fails (plaintext
  on a TLS port, a client certificate from another CA) sends the client its TLS alert and closes
  that socket only, with one rate-limited line in the log.
"""

from __future__ import annotations

import asyncio
import collections
import errno
import ipaddress
import logging
import socket
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from kbroker.network.connection import KafkaConnection
from kbroker.network.connection_quotas import ConnectionQuotas, resolve_per_ip_overrides
from kbroker.network.listener_security import PLAINTEXT_LISTENER, SSL_HANDSHAKE_TIMEOUT_S, ListenerSecurity
from kbroker.network.memory_pool import MemoryPool
from kbroker.network.rate_limited_log import RateLimitedLogger
from kbroker.network.tls_accept import accept_tls

if TYPE_CHECKING:
    from kbroker.network.dispatcher import Dispatcher

log = logging.getLogger(__name__)
_limited = RateLimitedLogger(log)

# Big enough that a request of up to this size usually arrives in one read; one per server.
RECEIVE_BUFFER_BYTES = 256 * 1024
LISTEN_BACKLOG = 1024
# Accepts per readiness callback: enough for bursts, small enough to let reads interleave.
ACCEPTS_PER_WAKEUP = 128
ACCEPT_BACKOFF_MIN_S = 0.1
ACCEPT_BACKOFF_MAX_S = 2.0
_RESOURCE_ERRORS = {errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM}


@dataclass(frozen=True, slots=True)
class SocketServerSettings:
    """The socket server's keys (Kafka's names and defaults), read once by the composition root
    (``kbroker.config.settings.socket_server_settings``)."""

    socket_request_max_bytes: int = 104_857_600
    max_connections: int = 2**31 - 1
    max_connections_per_ip: int = 2**31 - 1
    max_connections_per_ip_overrides: dict[str, int] = field(default_factory=dict)
    connections_max_idle_ms: int = 600_000
    queued_max_request_bytes: int = -1
    inter_broker_listener: str | None = None


class SocketServer:
    def __init__(self, dispatcher: Dispatcher, settings: SocketServerSettings,
                 listeners: Iterable[tuple[str, str, int]],
                 security: Mapping[str, ListenerSecurity] | None = None) -> None:
        self.dispatcher = dispatcher
        self.settings = settings
        self.listeners = list(listeners)
        self.security = dict(security or {})  # by listener name; PLAINTEXT when absent
        self.max_request_bytes = settings.socket_request_max_bytes
        queued = settings.queued_max_request_bytes
        self.pool = MemoryPool(queued) if queued > 0 else None
        self.quotas = ConnectionQuotas(
            settings.max_connections, settings.max_connections_per_ip,
            resolve_per_ip_overrides(settings.max_connections_per_ip_overrides),
            [name for name, _host, _port in self.listeners], settings.inter_broker_listener,
        )
        self.receive_buffer = bytearray(RECEIVE_BUFFER_BYTES)
        # Open connections, least recently active first (reads and written responses count).
        self.connections: collections.OrderedDict[KafkaConnection, None] = collections.OrderedDict()
        self.acceptors: list[Acceptor] = []
        self.loop = asyncio.get_running_loop()
        idle_ms = settings.connections_max_idle_ms
        self._max_idle_s = idle_ms / 1000 if idle_ms >= 0 else None
        self._expiry: asyncio.TimerHandle | None = None
        self._connecting: set[asyncio.Task[None]] = set()

    def start(self) -> list[tuple[str, str, int]]:
        """Listen on every (name, host, port); returns them with the ports actually bound."""
        bound = []
        for name, host, port in self.listeners:
            sockets = _listen(host, port)
            self.acceptors += [Acceptor(self, name, sock) for sock in sockets]
            bound.append((name, host, sockets[0].getsockname()[1]))
        for acceptor in self.acceptors:
            acceptor.resume()
        return bound

    def close(self) -> None:
        """Stop accepting; open connections stay until their owner closes them."""
        for acceptor in self.acceptors:
            acceptor.close()
        if self._expiry is not None:
            self._expiry.cancel()
            self._expiry = None

    # --- from the acceptors -------------------------------------------------------------

    def accepted(self, acceptor: Acceptor, sock: socket.socket, address: tuple) -> None:
        ip = _client_ip(address[0])
        if not self.quotas.inc(ip):
            _limited.info(
                "rejected connection from %s on %s: it already has the maximum of %d connections "
                "(max.connections.per.ip)", ip, acceptor.listener, self.quotas.limit_for(ip),
            )
            sock.close()
            return
        if self.quotas.exceeded() and acceptor.listener == self.quotas.protected_listener:
            self._close_least_recently_active(exempt=acceptor.listener)
        security = self.security.get(acceptor.listener, PLAINTEXT_LISTENER)
        connection = KafkaConnection(self, acceptor.listener, ip, f"{address[0]}:{address[1]}", security)
        task = self.loop.create_task(self._connect(connection, sock))
        self._connecting.add(task)
        task.add_done_callback(self._connecting.discard)

    async def _connect(self, connection: KafkaConnection, sock: socket.socket) -> None:
        context = connection.security.ssl_context
        try:
            if context is None:
                await self.loop.connect_accepted_socket(lambda: connection, sock)
            else:
                await accept_tls(self.loop, sock, connection, context, SSL_HANDSHAKE_TIMEOUT_S)
        except OSError as exc:  # ssl.SSLError and a handshake timeout included
            if connection.transport is None:  # connection_made never ran: nothing else counts it down
                sock.close()
                self._forget(connection)
            what = "TLS handshake" if context is not None else "connection"
            _limited.info("could not set up the %s from %s on %s: %r", what, connection.peer, connection.listener,
                          exc, key=f"setup {connection.listener}")

    def _close_least_recently_active(self, exempt: str) -> None:
        for connection in self.connections:
            if connection.listener != exempt and not connection.closed:
                _limited.info("closing %s: max.connections reached and %s is the inter-broker listener",
                              connection.peer, exempt)
                connection.close()
                return

    # --- from the connections -----------------------------------------------------------

    def connection_made(self, connection: KafkaConnection) -> None:
        connection.last_active = self.loop.time()
        self.connections[connection] = None
        if self._expiry is None and self._max_idle_s is not None:
            self._schedule_expiry()

    def connection_lost(self, connection: KafkaConnection) -> None:
        self.connections.pop(connection, None)
        self._forget(connection)
        self.dispatcher.clients.forget(connection.peer)
        if connection.closed_by_peer:
            self.dispatcher.peer_closed(connection.peer)

    def touch(self, connection: KafkaConnection) -> None:
        """The connection was active now (connections.max.idle.ms counts from here)."""
        connection.last_active = self.loop.time()
        self.connections.move_to_end(connection)

    def _forget(self, connection: KafkaConnection) -> None:
        self.quotas.dec(connection.client_host)
        for acceptor in self.acceptors:
            if acceptor.waiting_for_slot and self.quotas.slot_available(acceptor.listener):
                acceptor.resume()

    # --- connections.max.idle.ms ------------------------------------------------------------

    def _schedule_expiry(self) -> None:
        assert self._max_idle_s is not None
        if self.connections:
            oldest = next(iter(self.connections))
            self._expiry = self.loop.call_at(oldest.last_active + self._max_idle_s, self._close_idle)

    def _close_idle(self) -> None:
        assert self._max_idle_s is not None
        self._expiry = None
        idle_since = self.loop.time() - self._max_idle_s
        while self.connections:
            oldest = next(iter(self.connections))
            if oldest.last_active > idle_since:
                break
            del self.connections[oldest]  # closing: no longer a candidate
            _limited.info("closing %s: idle for more than %d ms (connections.max.idle.ms)",
                          oldest.peer, self.settings.connections_max_idle_ms)
            oldest.close()
        self._schedule_expiry()


class Acceptor:
    """Accepts the connections of one listening socket for its SocketServer."""

    def __init__(self, server: SocketServer, listener: str, sock: socket.socket) -> None:
        self.server = server
        self.listener = listener
        self.sock = sock
        self.waiting_for_slot = False  # stopped by max.connections; the server resumes it
        self._watching = False
        self._retry: asyncio.TimerHandle | None = None
        self._backoff_s = ACCEPT_BACKOFF_MIN_S
        self._closed = False

    def resume(self) -> None:
        """Watch the socket again, unless closed or waiting out an accept error."""
        self.waiting_for_slot = False
        if not self._watching and self._retry is None and not self._closed:
            self.server.loop.add_reader(self.sock.fileno(), self._accept_ready)
            self._watching = True

    def close(self) -> None:
        self._stop_watching()
        self._closed = True
        if self._retry is not None:
            self._retry.cancel()
            self._retry = None
        self.sock.close()

    def _stop_watching(self) -> None:
        if self._watching:
            self.server.loop.remove_reader(self.sock.fileno())
            self._watching = False

    def _accept_ready(self) -> None:
        for _ in range(ACCEPTS_PER_WAKEUP):
            if not self.server.quotas.slot_available(self.listener):
                self._stop_watching()
                self.waiting_for_slot = True
                return
            try:
                sock, address = self.sock.accept()
            except (BlockingIOError, InterruptedError):
                return
            except ConnectionAbortedError:
                continue  # the client gave up before we got to it
            except OSError as exc:
                self._back_off(exc)
                return
            self._backoff_s = ACCEPT_BACKOFF_MIN_S
            sock.setblocking(False)
            self.server.accepted(self, sock, address)

    def _back_off(self, exc: OSError) -> None:
        """Never a hot loop: stop watching the socket (it stays readable) and retry later."""
        self._stop_watching()
        delay = self._backoff_s
        self._backoff_s = min(delay * 2, ACCEPT_BACKOFF_MAX_S)
        reason = "out of resources" if exc.errno in _RESOURCE_ERRORS else "failed"
        _limited.warning("accepting connections on %s %s: %s; retrying in %.1f s (open connections are served)",
                         self.listener, reason, exc, delay, key="accept failed")
        self._retry = self.server.loop.call_later(delay, self._retry_accept)

    def _retry_accept(self) -> None:
        self._retry = None
        self.resume()


def _client_ip(host: str) -> str:
    """The client's address as max.connections.per.ip counts it (IPv4 seen through an IPv6
    socket as itself)."""
    if host.startswith("::ffff:"):
        mapped = ipaddress.IPv6Address(host.split("%", 1)[0]).ipv4_mapped
        if mapped is not None:
            return str(mapped)
    return host


def _listen(host: str, port: int) -> list[socket.socket]:
    """Listening sockets for every address ``host`` has (all interfaces if empty), on one port."""
    infos = socket.getaddrinfo(host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    sockets: list[socket.socket] = []
    try:
        for family, kind, proto, _name, address in dict.fromkeys(infos):
            sock = socket.socket(family, kind, proto)
            sockets.append(sock)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6:
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)  # its IPv4 twin binds separately
            if port == 0 and len(sockets) > 1:  # every address on the port the first one got
                address = (address[0], sockets[0].getsockname()[1], *address[2:])
            try:
                sock.bind(address)
            except OSError as exc:
                raise OSError(exc.errno, f"error while attempting to bind on address {address!r}: "
                                         f"{(exc.strerror or '').lower()}") from None
            sock.listen(LISTEN_BACKLOG)
            sock.setblocking(False)
    except BaseException:
        for sock in sockets:
            sock.close()
        raise
    return sockets
