"""KafkaConnection: one client socket — framing, in-order processing, writing responses.

Reads go into a growing buffer (``BufferedProtocol``); each complete frame is copied out as a
writable ``bytearray`` (Produce patches offsets into it in place) and queued. One task per
connection processes frames strictly in order, as Kafka does, so responses leave in request
order. A size prefix that is negative or above ``socket.request.max.bytes`` closes only this
connection. Fetch responses send segment bytes with ``loop.sendfile`` (zero copy) when large.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import os
import struct
from typing import TYPE_CHECKING

from kbroker.context import EncodedResponse
from kbroker.storage.log import FetchSlice

if TYPE_CHECKING:
    from kbroker.dispatcher import Dispatcher

log = logging.getLogger(__name__)

_SIZE = struct.Struct(">i")
_INITIAL_BUFFER = 64 * 1024
# A buffer grown for large produce requests is kept up to this size: regrowing it for every
# 1 MiB request cost more than the produce itself. Larger ones shrink once drained.
_RETAINED_BUFFER = 8 * 1024 * 1024
SENDFILE_THRESHOLD = 64 * 1024


class KafkaConnection(asyncio.BufferedProtocol):
    def __init__(self, dispatcher: Dispatcher, max_request_bytes: int) -> None:
        self.dispatcher = dispatcher
        self.max_request_bytes = max_request_bytes
        self.buffer = bytearray(_INITIAL_BUFFER)
        self.filled = 0
        self.frame_end = 0  # buffer length the incomplete frame at position 0 needs
        self.frames: collections.deque[bytearray] = collections.deque()
        self.frame_ready = asyncio.Event()
        self.transport: asyncio.Transport | None = None
        self.peer = "?"
        self.task: asyncio.Task[None] | None = None
        self.closed = False
        self.draining = False  # shutting down: finish the request in hand, start no new one

    # --- asyncio protocol callbacks -------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]  # uvloop's are not asyncio.Transport
        peer = transport.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if peer else "?"
        self.task = asyncio.get_running_loop().create_task(self._process())
        self.dispatcher.connections.add(self)

    def get_buffer(self, sizehint: int) -> memoryview:
        # The buffer is resized only here: the transport holds the view returned below until
        # buffer_updated() returns, and a bytearray with a live view cannot change size.
        needed = max(sizehint, 4096, self.frame_end - self.filled)
        if len(self.buffer) - self.filled < needed:
            # Room for the whole pending frame, so the next read can complete it.
            self.buffer.extend(bytes(max(len(self.buffer), needed)))
        elif len(self.buffer) > _RETAINED_BUFFER and self.filled + needed <= _INITIAL_BUFFER:
            del self.buffer[_INITIAL_BUFFER:]
        return memoryview(self.buffer)[self.filled :]

    def buffer_updated(self, nbytes: int) -> None:
        self.filled += nbytes
        start = 0
        frame_end = 0
        buf = self.buffer
        while self.filled - start >= 4:
            (size,) = _SIZE.unpack_from(buf, start)
            if size < 0 or size > self.max_request_bytes:
                log.warning(
                    "closing connection from %s: request size %d is outside 0..%d "
                    "(socket.request.max.bytes)", self.peer, size, self.max_request_bytes,
                )
                self.close()
                return
            if self.filled - start - 4 < size:
                frame_end = size + 4  # where the pending frame ends once compacted to 0
                break
            self.frames.append(buf[start + 4 : start + 4 + size])
            start += 4 + size
        self.frame_end = frame_end
        if start:
            self._compact(start)
        if self.frames:
            self.frame_ready.set()

    def _compact(self, start: int) -> None:
        remaining = self.filled - start
        self.buffer[:remaining] = self.buffer[start : self.filled]
        self.filled = remaining

    def eof_received(self) -> bool | None:
        return None  # close our side too

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self.frame_ready.set()
        self.dispatcher.connections.discard(self)

    def start_draining(self) -> None:
        """Shutdown: the request being processed still gets its response; queued ones don't."""
        self.draining = True
        self.frame_ready.set()

    def close(self) -> None:
        self.closed = True
        self.frame_ready.set()
        if self.transport is not None:
            self.transport.close()

    # --- processing -----------------------------------------------------------------------

    async def _process(self) -> None:
        assert self.transport is not None
        client_host = self.peer.rsplit(":", 1)[0]
        while True:
            while not self.frames:
                if self.closed or self.draining:
                    return
                self.frame_ready.clear()
                await self.frame_ready.wait()
            if self.closed or self.draining:
                return
            frame = self.frames.popleft()
            response = await self.dispatcher.dispatch(frame, client_host, self.peer)
            if response is None:
                self.close()
                return
            if self.transport.is_closing():
                return
            await self._send(response)

    async def _send(self, response: bytes | EncodedResponse | None) -> None:
        assert self.transport is not None
        if isinstance(response, bytes):
            self.transport.write(response)
            return
        if not isinstance(response, EncodedResponse):
            return  # acks=0 produce: nothing to send
        pending: list[bytes] = []
        for chunk in response.chunks:
            if isinstance(chunk, FetchSlice) and chunk.length >= SENDFILE_THRESHOLD:
                if pending:
                    self.transport.write(b"".join(pending))
                    pending = []
                await self._sendfile(chunk)
            elif isinstance(chunk, FetchSlice):
                pending.append(chunk.segment.read_bytes(chunk.position, chunk.length))
            else:
                pending.append(chunk)
        if pending:
            self.transport.write(b"".join(pending))

    async def _sendfile(self, chunk: FetchSlice) -> None:
        """Zero-copy send of a segment range; a dup'd fd survives segment deletion."""
        assert self.transport is not None
        fd = os.dup(chunk.segment.fd)
        with os.fdopen(fd, "rb", buffering=0) as fh:
            sent = await asyncio.get_running_loop().sendfile(self.transport, fh, chunk.position, chunk.length)
        if sent < chunk.length:
            # The file shrank (truncation) under us: the frame size is now wrong; give up.
            self.close()
