"""KafkaConnection: one client socket — framing, one request at a time, writing responses.

As in Kafka, a connection handles one request at a time: the next one is taken once the
previous one's response has been written (and the transport's buffer has drained below its
high-water mark), so responses leave in request order. Reading stops while a request is in
hand and more arrives (after a probe of at most ``_READ_WHILE_IN_FLIGHT`` bytes), so a client
that pipelines requests, or stops reading responses, holds at most one request in the broker's
memory; the rest waits in the kernel. Once a request is answered its task reads the next one
straight from the socket when the kernel already holds it whole (``_read_ahead``), so a
pipelined stream of requests is handled by one task without a loop turn per request. Nothing
is kept per connection while it is idle: no buffer and no task (a task runs only while
requests are being handled).

Memory follows the bytes that arrived, never a declared size:

- A connection with no partial frame reads into its SocketServer's shared receive buffer
  (``get_buffer`` and ``buffer_updated`` run back to back in one event-loop callback). A
  complete frame is copied out as a writable ``bytearray`` (Produce patches offsets into it in
  place); only the bytes that must outlive the callback are kept.
- The body of a frame that is still arriving gets a buffer of its own, sized from the bytes
  received so far (those read plus those the kernel already holds for the socket, FIONREAD),
  grown geometrically up to the declared size as more arrive; the socket is then read straight
  into it, and once full it is the frame (no copy). A pipelining producer's 1 MiB requests
  are mostly in the kernel already, so their buffer is sized once; a client that declares
  100 MiB and stalls costs what it sent.
- A size prefix that is negative or above ``socket.request.max.bytes`` closes only this
  connection. With ``queued.max.request.bytes`` the declared size is taken from the MemoryPool
  once the prefix is read and given back after the request is handled; while the pool is
  exhausted the connection is not read (muted) until memory is released.

Responses are coalesced per event-loop turn: a response is queued, and the queue is written
with one ``transport.write`` when the turn ends (a ``call_soon`` callback), when the request task
finishes, or once ``COALESCE_BYTES`` are queued. A client that pipelines many small requests
(librdkafka keeps up to max.in.flight = 1,000,000 per connection) gets the answers to every
request handled in one turn in one ``send``, not one system call (and one wake-up of the
client's broker thread) per response; a response is never held past the turn it was made in.

Fetch responses send segment bytes zero copy when large: ``os.sendfile`` straight to the socket
while it takes them (on loopback a 1 MiB fetch usually goes in one call, with no future, no
writer registration and no pause of reading), then ``loop.sendfile`` for what the socket did not
take. Over TLS the bytes must be encrypted, so the segment range is read and written through the
TLS transport.

Security (``ListenerSecurity``, from the listener's protocol): on SSL the client certificate
names the connection's principal once the handshake is done (the transport exists only then); on
SASL_* every frame goes to the connection's SaslServerAuthenticator until it has authenticated,
and afterwards a re-authentication or an expired session does. Each request's RequestContext
carries the connection's principal and listener name.
"""

from __future__ import annotations

import asyncio
import fcntl
import logging
import os
import struct
import termios
from typing import Protocol

from kbroker.network.context import EncodedResponse, ThrottledResponse
from kbroker.network.listener_security import PLAINTEXT_LISTENER, ListenerSecurity
from kbroker.network.memory_pool import MemoryPool
from kbroker.network.rate_limited_log import RateLimitedLogger
from kbroker.network.sasl_authenticator import SaslServerAuthenticator
from kbroker.replication.stage_trace import DEBUG, TRACE, stage
from kbroker.security.principal import ANONYMOUS, KafkaPrincipal
from kbroker.security.ssl_principal import principal_of_certificate
from kbroker.security.ssl_principal_mapper import NoMatchingRule
from kbroker.storage.log import FetchSlice

log = logging.getLogger(__name__)
_limited = RateLimitedLogger(log)

_SIZE = struct.Struct(">i")
_INT = struct.Struct("i")
# Smallest buffer for a partial frame body: fewer regrowths for slow senders of mid-size frames.
_MIN_PARTIAL = 64 * 1024
# While a request is in flight a read is only a probe: the client pipelines, so the socket is
# paused after keeping this much, and the rest waits in the kernel (outside our memory).
_READ_WHILE_IN_FLIGHT = 4096
SENDFILE_THRESHOLD = 64 * 1024
# Queued responses are written at once past this size, so coalescing never holds much memory.
COALESCE_BYTES = 256 * 1024
# The first bytes of a TLS handshake record (content type 22, version 3.x), read as a size prefix.
_TLS_RECORD_START = b"\x16\x03"


class RequestDispatcher(Protocol):
    async def dispatch(self, frame: bytearray, client_host: str, peer: str, principal: KafkaPrincipal = ANONYMOUS,
                       listener: str = "") -> bytes | EncodedResponse | object | None:
        """The encoded response, NO_RESPONSE (acks=0), or None to close the connection."""
        ...


class ConnectionOwner(Protocol):
    """What a connection uses of the SocketServer that accepted it (declared here because the
    server imports this module, not the reverse)."""

    max_request_bytes: int
    pool: MemoryPool | None  # queued.max.request.bytes, when bounded
    receive_buffer: bytearray  # shared by the server's connections that hold no partial frame
    loop: asyncio.AbstractEventLoop

    @property
    def dispatcher(self) -> RequestDispatcher: ...

    def connection_made(self, connection: KafkaConnection) -> None: ...

    def connection_lost(self, connection: KafkaConnection) -> None: ...

    def touch(self, connection: KafkaConnection) -> None:
        """The connection was active (connections.max.idle.ms counts from here)."""
        ...


class KafkaConnection(asyncio.BufferedProtocol):
    __slots__ = (
        "_drained", "_fd", "_filled", "_flush_handle", "_frame_size", "_muted", "_out", "_out_bytes", "_partial",
        "_pending", "_reserved", "_throttled",
        "authenticator",
        "client_host", "closed", "closed_by_peer", "draining", "in_flight", "last_active", "listener", "peer",
        "principal", "security", "server", "transport",
    )

    def __init__(self, server: ConnectionOwner, listener: str, client_host: str, peer: str,
                 security: ListenerSecurity = PLAINTEXT_LISTENER) -> None:
        self.server = server
        self.listener = listener
        self.client_host = client_host
        self.peer = peer
        self.security = security
        self.principal = ANONYMOUS  # until a client certificate or SASL names another
        self.authenticator: SaslServerAuthenticator | None = None  # SASL listeners
        self.transport: asyncio.Transport | None = None
        self.last_active = 0.0  # loop time of the last read or response, for connections.max.idle.ms
        self.in_flight: asyncio.Task[None] | None = None  # the request being handled
        self.draining = False  # shutting down: finish the request in hand, start no new one
        self.closed = False
        self.closed_by_peer = False  # the peer ended it (end of file or reset), not this side
        self._fd = -1
        self._frame_size = -1  # declared size of the frame being received, once its prefix is read
        self._partial: bytearray | None = None  # that frame's body while it arrives
        self._filled = 0
        self._pending: memoryview | None = None  # received, not yet parsed: a view of bytes we own
        self._reserved = 0  # bytes this connection holds from the MemoryPool
        self._muted = False  # waiting for the MemoryPool
        self._throttled = False  # over a client quota: not read until its throttle time has passed
        self._drained: asyncio.Future[None] | None = None  # set while the transport's buffer is full
        self._out: list[bytes] = []  # responses queued this loop turn, written by _flush
        self._out_bytes = 0
        self._flush_handle: asyncio.Handle | None = None  # the end-of-turn _flush, once scheduled

    # --- asyncio protocol callbacks -------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]  # uvloop's are not asyncio.Transport
        self._fd = transport.get_extra_info("socket").fileno()
        self.server.connection_made(self)
        security = self.security
        if security.principal_mapper is not None:
            ssl_object = transport.get_extra_info("ssl_object")
            certificate = ssl_object.getpeercert(binary_form=True) if ssl_object is not None else None
            try:
                self.principal = principal_of_certificate(certificate, security.principal_mapper)
            except NoMatchingRule as exc:
                _limited.info("closing %s on %s: %s (ssl.principal.mapping.rules)", self.peer, self.listener, exc)
                self.close()
        if security.sasl is not None:
            self.authenticator = SaslServerAuthenticator(security.sasl, self._dispatch_unauthenticated, self.peer)

    def get_buffer(self, sizehint: int) -> memoryview:
        partial = self._partial
        if partial is not None:
            # The transport releases the returned view before buffer_updated() returns, so the
            # bytearray can be resized here (never while a view of it is alive).
            if self._filled == len(partial):
                partial.extend(bytes(self._partial_capacity(self._filled) - self._filled))
            return memoryview(partial)[self._filled :]
        shared = self.server.receive_buffer
        start = 0
        if self._pending:  # a size prefix cut short by the previous read (reading is on: < 4 bytes)
            start = len(self._pending)
            shared[:start] = self._pending
        end = start + _READ_WHILE_IN_FLIGHT if self.in_flight is not None else len(shared)
        return memoryview(shared)[start:end]

    def buffer_updated(self, nbytes: int) -> None:
        self.server.touch(self)
        partial = self._partial
        if partial is not None:
            self._filled += nbytes
            if self._filled == self._frame_size:  # the buffer never outgrows the frame
                self._partial = None
                self._frame_size = -1
                self._start(partial)
            return
        start = len(self._pending) if self._pending else 0
        self._pending = None
        data = memoryview(self.server.receive_buffer)[: start + nbytes]
        if self.in_flight is not None or self._muted or self._throttled or self.draining:
            self._wait_with(data, shared=True)  # one request at a time
            return
        frame = self._parse(data, shared=True)
        if frame is not None:
            self._start(frame)

    def pause_writing(self) -> None:
        self._drained = asyncio.get_running_loop().create_future()

    def resume_writing(self) -> None:
        self._wake_writer()

    def eof_received(self) -> bool | None:
        return None  # close our side too

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed_by_peer = not self.closed  # close() marks it closed before the transport goes
        self.closed = True
        self._partial = None
        self._pending = None
        self._drop_queued()
        pool = self.server.pool
        if self._muted and pool is not None:
            pool.cancel_wait(self)
        if self.in_flight is None:
            self._release_memory()  # else the request's task gives it back when handled
        self._wake_writer()
        self.server.connection_lost(self)

    def start_draining(self) -> None:
        """Shutdown: the request being handled still gets its response; no new one starts."""
        self.draining = True

    def close(self) -> None:
        self._flush()  # responses already made go out first, as the transport writes what it holds
        self.closed = True
        if self.transport is not None:
            self.transport.close()

    # --- framing --------------------------------------------------------------------------

    def _parse(self, data: memoryview, shared: bool) -> bytearray | None:
        """The first complete frame in ``data`` (bytes read into the shared buffer, or kept in
        ``_pending``), if there is one. A partial body gets a buffer of its own; bytes that
        must wait (after that frame, or a cut size prefix) stay in ``_pending`` — a copy if they
        are in the shared buffer, else a view (pipelined requests are not copied again for each
        one taken off the front)."""
        pos, end = 0, len(data)
        size = self._frame_size
        if size < 0:
            if end < 4:
                self._keep(data, shared)
                return None
            (size,) = _SIZE.unpack_from(data, 0)
            limit, key = self.server.max_request_bytes, "socket.request.max.bytes"
            if self.authenticator is not None and self.authenticator.max_frame_size is not None:
                limit, key = min(limit, self.authenticator.max_frame_size), "sasl.server.max.receive.size"
            if size < 0 or size > limit:
                hint = " (a TLS handshake on a listener without TLS?)" if data[:2] == _TLS_RECORD_START else ""
                _limited.warning("closing connection from %s on %s: request size %d is outside 0..%d (%s)%s",
                                 self.peer, self.listener, size, limit, key, hint)
                self.close()
                return None
            if not self._reserve_memory(size):
                self._wait_with(data, shared)
                return None
            pos = 4
            self._frame_size = size
        received = end - pos
        if received < size:
            if received:
                partial = self._partial = bytearray(self._partial_capacity(received))
                partial[:received] = data[pos:]
                self._filled = received
            return None
        self._frame_size = -1
        if pos + size < end:
            self._wait_with(data[pos + size :], shared)  # pipelined: the next waits its turn
        return bytearray(data[pos : pos + size])

    def _partial_capacity(self, received: int) -> int:
        """Room for a frame body of which ``received`` bytes are here: at least twice that (so
        growth is geometric), or all the kernel already holds, never more than declared."""
        try:
            unread = _INT.unpack(fcntl.ioctl(self._fd, termios.FIONREAD, b"\0\0\0\0"))[0]
        except OSError:
            unread = 0
        return min(self._frame_size, max(_MIN_PARTIAL, 2 * received, received + unread))

    def _keep(self, rest: memoryview, shared: bool) -> None:
        self._pending = memoryview(bytes(rest)) if shared else rest

    def _wait_with(self, rest: memoryview, shared: bool) -> None:
        """Keep ``rest`` for later and stop reading: something must finish first."""
        self._keep(rest, shared)
        if self.transport is not None:
            self.transport.pause_reading()

    def _reserve_memory(self, size: int) -> bool:
        pool = self.server.pool
        if pool is None or size == 0:
            return True
        if pool.try_allocate(size):
            self._reserved = size
            return True
        self._muted = True
        pool.wait(self)
        return False

    def _release_memory(self) -> None:
        if self._reserved:
            assert self.server.pool is not None
            self.server.pool.release(self._reserved)
            self._reserved = 0

    def _throttle(self, seconds: float) -> None:
        """Read nothing from this client for ``seconds``: a timer resumes it, no task waits (so a
        shutdown does not wait for a throttled client either)."""
        self._throttled = True
        if self.transport is not None:
            self.transport.pause_reading()
        self.server.loop.call_later(seconds, self._end_throttle)

    def _end_throttle(self) -> None:
        self._throttled = False
        frame = self._next_frame()
        if frame is not None:
            self._start(frame)

    def memory_available(self) -> None:
        """The MemoryPool has memory again: retry the request that waited for it."""
        self._muted = False
        frame = self._next_frame()
        if frame is not None:
            self._start(frame)

    def _next_frame(self) -> bytearray | None:
        """The next request if it is already here; else read the socket again (unless closing,
        draining or waiting for memory)."""
        if self.closed or self.draining:
            return None
        pending, self._pending = self._pending, None
        frame = self._parse(pending, shared=False) if pending else None
        if frame is None and not self._muted and not self.closed:
            frame = self._read_ahead()
        if frame is None and not self._muted and not self.closed:
            assert self.transport is not None
            self.transport.resume_reading()
        return frame

    def _read_ahead(self) -> bytearray | None:
        """The next request read straight from the socket, if the kernel already holds all of it.

        A pipelining client's next request is usually there by the time the previous one is
        answered; reading it here keeps it in this task (no loop turn, reading resumed and paused,
        and task per request). The bytes read are what a transport read would have taken: at most
        the rest of the frame in hand, or one shared buffer's worth (parsed as ``buffer_updated``
        does). Over TLS the socket's bytes are ciphertext, so the transport reads them.
        """
        if self.security.ssl_context is not None or self._pending is not None:
            return None  # TLS, or a size prefix cut short: left to the transport
        try:
            if self._partial is None:
                shared = self.server.receive_buffer
                received = os.readv(self._fd, [shared])
                if not received:
                    return None  # end of file: the transport sees it too
                frame = self._parse(memoryview(shared)[:received], shared=True)
                if frame is not None or self._partial is None:
                    return frame
            partial = self._partial
            while self._filled < self._frame_size:
                if self._filled == len(partial):
                    partial.extend(bytes(self._partial_capacity(self._filled) - self._filled))
                received = os.readv(self._fd, [memoryview(partial)[self._filled :]])
                if not received:
                    return None
                self._filled += received
        except (BlockingIOError, InterruptedError):
            return None  # the rest has not arrived: the transport reads it
        except OSError:
            return None  # a reset: the transport reports it
        self._partial = None
        self._frame_size = -1
        return partial

    # --- handling -------------------------------------------------------------------------

    def _start(self, frame: bytearray) -> None:
        if self.draining:
            self._release_memory()
            return
        self.in_flight = self.server.loop.create_task(self._handle(frame))

    async def _handle(self, frame: bytearray | None) -> None:
        """Handle ``frame``, then each request already received after it, one at a time (in
        this task: no event-loop round trip per pipelined request)."""
        try:
            while frame is not None:
                close_after = False
                try:
                    authenticator = self.authenticator
                    if authenticator is not None and authenticator.takes(frame):
                        step = await authenticator.handle(frame)
                        response, close_after = step.response, step.close
                        if authenticator.principal is not None:
                            self.principal = authenticator.principal
                    else:
                        response = await self.server.dispatcher.dispatch(frame, self.client_host, self.peer,
                                                                         self.principal, self.listener)
                finally:
                    frame = None  # handled: its bytes may go, and their share of the MemoryPool
                    self._release_memory()
                if response is None:
                    self.close()
                    return
                mute_s = 0.0
                if isinstance(response, ThrottledResponse):  # a client over its quota
                    response, mute_s = response.response, response.throttle_ms / 1000
                assert self.transport is not None
                if self.closed or self.transport.is_closing():
                    return
                await self._send(response)
                if close_after:
                    self.close()  # the transport writes what it holds first
                    return
                if self._drained is not None:
                    await self._drained  # the client is not reading its responses: read no more from it
                if mute_s:  # KIP-219's muted channel: nothing is read from the client meanwhile
                    self._throttle(mute_s)
                    return
                if self.closed:
                    return
                self.server.touch(self)
                frame = self._next_frame()
        except OSError as exc:
            _limited.warning("closing connection from %s: sending a response failed: %s", self.peer, exc)
            self.close()
        except Exception:  # a bug outside the handlers (the dispatcher logs theirs): close, don't hang
            _limited.log(logging.ERROR, "closing connection from %s: unexpected error", self.peer, exc_info=True)
            self.close()
        finally:
            self._flush()  # nothing more to coalesce with: the pipelined requests here are all answered
            self.in_flight = None

    async def _dispatch_unauthenticated(self, frame: bytearray) -> bytes | EncodedResponse | object | None:
        """A request the authenticator lets through before authentication (ApiVersions)."""
        return await self.server.dispatcher.dispatch(frame, self.client_host, self.peer, ANONYMOUS, self.listener)

    def _wake_writer(self) -> None:
        drained, self._drained = self._drained, None
        if drained is not None and not drained.done():
            drained.set_result(None)

    # --- writing --------------------------------------------------------------------------

    def _queue(self, data: bytes) -> None:
        """Queue response bytes for this loop turn's write (at once if ``COALESCE_BYTES`` are queued)."""
        self._out.append(data)
        self._out_bytes += len(data)
        if self._out_bytes >= COALESCE_BYTES:
            self._flush()
        elif self._flush_handle is None:
            self._flush_handle = self.server.loop.call_soon(self._flush)

    def _flush(self) -> None:
        """Write the queued responses with one ``transport.write`` (in request order)."""
        handle, self._flush_handle = self._flush_handle, None
        if handle is not None:
            handle.cancel()
        if not self._out:
            return
        out = self._out
        self._out, self._out_bytes = [], 0
        if self.transport is not None and not self.closed and not self.transport.is_closing():
            self.transport.write(out[0] if len(out) == 1 else b"".join(out))
            if TRACE.isEnabledFor(DEBUG):
                stage("responses_written", peer=self.peer, responses=len(out))

    def _drop_queued(self) -> None:
        """The connection is gone: queued responses have nowhere to go."""
        if self._flush_handle is not None:
            self._flush_handle.cancel()
            self._flush_handle = None
        self._out, self._out_bytes = [], 0

    async def _send(self, response: bytes | EncodedResponse | object) -> None:
        if isinstance(response, bytes):
            self._queue(response)
            return
        if not isinstance(response, EncodedResponse):
            return  # acks=0 produce: nothing to send
        tls = self.security.ssl_context is not None  # no zero copy: the bytes must be encrypted
        for chunk in response.chunks:
            if isinstance(chunk, FetchSlice) and chunk.length >= SENDFILE_THRESHOLD and not tls:
                self._flush()  # what precedes the segment bytes goes first
                assert self.transport is not None
                if self.transport.is_closing():
                    return  # the client went away during an earlier chunk
                await self._sendfile(chunk)
            elif isinstance(chunk, FetchSlice):
                self._queue(chunk.segment.read_bytes(chunk.position, chunk.length))
            else:
                self._queue(chunk)

    async def _sendfile(self, chunk: FetchSlice) -> None:
        """Zero-copy send of a segment range: straight to the socket while the transport holds
        nothing and the socket takes bytes (no other task runs meanwhile, so the segment's fd is
        open), then ``loop.sendfile`` from a dup'd fd (which survives segment deletion) for the rest."""
        assert self.transport is not None
        position, remaining = chunk.position, chunk.length
        if self.transport.get_write_buffer_size() == 0:
            while remaining:
                try:
                    sent = os.sendfile(self._fd, chunk.segment.fd, position, remaining)
                except (BlockingIOError, InterruptedError):
                    break  # the socket is full: wait for it below
                if sent == 0:
                    self.close()  # the file shrank (truncation) under us: the frame size is now wrong
                    return
                position += sent
                remaining -= sent
            if not remaining:
                return
        fd = os.dup(chunk.segment.fd)
        with os.fdopen(fd, "rb", buffering=0) as fh:
            sent = await asyncio.get_running_loop().sendfile(self.transport, fh, position, remaining)
        if sent < remaining:
            # The file shrank (truncation) under us: the frame size is now wrong; give up.
            self.close()
