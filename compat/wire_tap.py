"""A wire tap for Fetch sessions: a TCP proxy in front of one broker that records, per client
id, the session id and epoch of every Fetch request and the session id (and error) of its answer.

The broker advertises the tap's port (advertised.listeners), so clients that bootstrap through
it come back through it. Bytes pass unchanged; the tap decodes only the request header
(api key, version, correlation id, client id), Fetch's session_id/session_epoch and the answer's
top-level error_code/session_id. Loopback only.
"""

from __future__ import annotations

import socket
import struct
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

FETCH = 1
FIRST_SESSION_VERSION = 7
FIRST_FLEXIBLE_VERSION = 12
FIRST_REPLICA_STATE_VERSION = 15  # replica_id moved into a tagged field


@dataclass(slots=True)
class FetchExchange:
    """One Fetch as the tap saw it; ``answered_*`` stay None until the answer passes."""

    client_id: str
    version: int
    session_id: int
    epoch: int
    partitions_named: int
    answered_error: int | None = None
    answered_session_id: int | None = None


@dataclass
class WireTap:
    """Listen on 127.0.0.1:``port`` and forward each connection to 127.0.0.1:``upstream_port``."""

    port: int
    upstream_port: int
    host: str = "127.0.0.1"
    exchanges: list[FetchExchange] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _server: socket.socket | None = None
    _sockets: list[socket.socket] = field(default_factory=list)
    _threads: list[threading.Thread] = field(default_factory=list)

    def start(self) -> None:
        server = socket.socket()
        server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        server.bind((self.host, self.port))
        server.listen()
        self._server = server
        self._spawn(self._accept)

    def close(self) -> None:
        """Stop listening, then forwarding, and wait for every thread to end: shutting a socket
        down (not closing it) is what wakes a thread blocked in accept or recv on Linux."""
        if self._server is not None:
            _shutdown(self._server)
        for thread in self._threads[:1]:  # the accept loop: no connection is added after it ends
            thread.join()
        for sock in self._sockets:
            _shutdown(sock)
        for thread in self._threads:
            thread.join()
        for sock in [*self._sockets, *(s for s in (self._server,) if s is not None)]:
            sock.close()

    def _spawn(self, target: Callable[..., None], *args: object) -> None:
        thread = threading.Thread(target=target, args=args, daemon=True)
        self._threads.append(thread)
        thread.start()

    def fetches(self, client_id_prefix: str) -> list[FetchExchange]:
        with self._lock:
            return [e for e in self.exchanges if e.client_id.startswith(client_id_prefix)]

    def _accept(self) -> None:
        assert self._server is not None
        while True:
            try:
                client, _ = self._server.accept()
            except OSError:
                return  # closed
            try:
                upstream = socket.create_connection((self.host, self.upstream_port))
            except OSError:
                client.close()
                continue
            self._sockets += [client, upstream]
            pending: dict[int, FetchExchange] = {}
            self._spawn(self._pump, client, upstream, pending, True)
            self._spawn(self._pump, upstream, client, pending, False)

    def _pump(self, source: socket.socket, sink: socket.socket, pending: dict[int, FetchExchange],
              requests: bool) -> None:
        """Copy frames from ``source`` to ``sink``, noting Fetch requests (or their answers)."""
        try:
            while True:
                head = _read_exact(source, 4)
                if head is None:
                    break
                frame = _read_exact(source, struct.unpack(">i", head)[0])
                if frame is None:
                    break
                if requests:
                    self._note_request(frame, pending)
                else:
                    self._note_answer(frame, pending)
                sink.sendall(head + frame)
        except OSError:
            pass
        finally:
            for sock in (source, sink):
                _shutdown(sock)

    def _note_request(self, frame: bytes, pending: dict[int, FetchExchange]) -> None:
        api_key, version, correlation_id, client_len = struct.unpack_from(">hhih", frame)
        if api_key != FETCH:
            return
        client_id = frame[10:10 + max(client_len, 0)].decode(errors="replace")
        pos = 10 + max(client_len, 0)
        if version >= FIRST_FLEXIBLE_VERSION:
            pos = _skip_tagged_fields(frame, pos)
        if version < FIRST_REPLICA_STATE_VERSION:
            pos += 4  # replica_id
        pos += 4 + 4  # max_wait_ms, min_bytes
        if version >= 3:
            pos += 4  # max_bytes
        if version >= 4:
            pos += 1  # isolation_level
        session_id, epoch = struct.unpack_from(">ii", frame, pos) if version >= FIRST_SESSION_VERSION else (0, -1)
        pos += 8 if version >= FIRST_SESSION_VERSION else 0
        exchange = FetchExchange(client_id, version, session_id, epoch, _partitions_named(frame, pos, version))
        with self._lock:
            self.exchanges.append(exchange)
            pending[correlation_id] = exchange

    def _note_answer(self, frame: bytes, pending: dict[int, FetchExchange]) -> None:
        (correlation_id,) = struct.unpack_from(">i", frame)
        with self._lock:
            exchange = pending.pop(correlation_id, None)
        if exchange is None or exchange.version < FIRST_SESSION_VERSION:
            return
        pos = 4 + (1 if exchange.version >= FIRST_FLEXIBLE_VERSION else 0)  # response header v1: tags
        _throttle, error, session_id = struct.unpack_from(">ihi", frame, pos)
        exchange.answered_error, exchange.answered_session_id = error, session_id


def _partitions_named(frame: bytes, pos: int, version: int) -> int:
    """How many partitions the request names (its topics array)."""
    flexible = version >= FIRST_FLEXIBLE_VERSION
    topics, pos = _array_length(frame, pos, flexible)
    named = 0
    for _ in range(topics):
        if version >= 13:
            pos += 16  # topic id
        elif flexible:
            length, pos = _uvarint(frame, pos)
            pos += length - 1
        else:
            (length,) = struct.unpack_from(">h", frame, pos)
            pos += 2 + length
        partitions, pos = _array_length(frame, pos, flexible)
        named += partitions
        # Per partition: partition, current_leader_epoch (v9+), fetch_offset, last_fetched_epoch (v12+),
        # log_start_offset (v5+), partition_max_bytes, then tagged fields when flexible.
        size = 4 + (4 if version >= 9 else 0) + 8 + (4 if version >= 12 else 0) + (8 if version >= 5 else 0) + 4
        for _ in range(partitions):
            pos += size
            if flexible:
                pos = _skip_tagged_fields(frame, pos)
        if flexible:
            pos = _skip_tagged_fields(frame, pos)
    return named


def _array_length(frame: bytes, pos: int, flexible: bool) -> tuple[int, int]:
    if flexible:
        length, pos = _uvarint(frame, pos)
        return max(length - 1, 0), pos
    (length,) = struct.unpack_from(">i", frame, pos)
    return max(length, 0), pos + 4


def _skip_tagged_fields(frame: bytes, pos: int) -> int:
    count, pos = _uvarint(frame, pos)
    for _ in range(count):
        _tag, pos = _uvarint(frame, pos)
        size, pos = _uvarint(frame, pos)
        pos += size
    return pos


def _uvarint(frame: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = frame[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, pos
        shift += 7


def _shutdown(sock: socket.socket) -> None:
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass  # not connected (any more)


def _read_exact(sock: socket.socket, n: int) -> bytes | None:
    out = bytearray()
    while len(out) < n:
        chunk = sock.recv(n - len(out))
        if not chunk:
            return None
        out += chunk
    return bytes(out)


def session_pattern(exchanges: list[FetchExchange]) -> list[str]:
    """A client's fetches as the session steps they are, runs collapsed: "sessionless" (id 0,
    epoch -1), "full+open" (id 0, epoch 0; "-> id" when the answer names a session, "-> none"
    when it does not), "close" (id N, epoch -1), "full+reopen" (id N, epoch 0), "incremental
    1,2,3..." (epochs consecutive from the last full fetch) or "incremental (epoch gap)"; an
    answered session error is named."""
    steps: list[str] = []
    expected_epoch = None
    for e in exchanges:
        if e.answered_error not in (None, 0):
            step = f"error {e.answered_error}"
        elif e.epoch == -1:
            step = "sessionless" if e.session_id == 0 else "close"
        elif e.epoch == 0:
            opened = e.answered_session_id not in (None, 0)
            step = ("full+open" if e.session_id == 0 else "full+reopen") + (" -> id" if opened else " -> none")
            expected_epoch = 1 if opened else None
        else:
            step = "incremental" if expected_epoch == e.epoch else "incremental (epoch gap)"
            expected_epoch = e.epoch + 1
        if not steps or steps[-1] != step:
            steps.append(step)
    return steps
