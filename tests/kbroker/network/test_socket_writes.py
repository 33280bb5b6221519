"""What a client receives from the SocketServer over real loopback sockets: a fetch response's
segment bytes, sent zero copy while a pipelined request waits behind it, arrive whole and
before the next response."""

from __future__ import annotations

import asyncio
import os
import struct
from collections.abc import Callable
from pathlib import Path

from kbroker.storage.log import FetchSlice

from kbroker.network.connected_clients import ConnectedClients
from kbroker.network.connection import SENDFILE_THRESHOLD
from kbroker.network.context import EncodedResponse
from kbroker.network.socket_server import SocketServer, SocketServerSettings

DEADLINE_S = 10.0


class Dispatcher:
    """Answers every frame with ``answer(frame)``."""

    def __init__(self, answer: Callable[[bytes], bytes | EncodedResponse]) -> None:
        self.answer = answer
        self.clients = ConnectedClients()

    async def dispatch(self, frame: bytearray, client_host: str, peer: str, principal: object = None,
                       listener: str = "") -> bytes | EncodedResponse:
        return self.answer(bytes(frame))

    def peer_closed(self, peer: str) -> None:
        pass


class SegmentFile:
    """What a FetchSlice's segment lends the connection: a descriptor, and reads of small ranges."""

    def __init__(self, path: Path) -> None:
        self.fd = os.open(path, os.O_RDONLY)

    def read_bytes(self, position: int, length: int) -> bytes:
        return os.pread(self.fd, length, position)


def frame(body: bytes) -> bytes:
    return struct.pack(">i", len(body)) + body


async def serve(answer: Callable[[bytes], bytes | EncodedResponse], settings: SocketServerSettings) -> SocketServer:
    server = SocketServer(Dispatcher(answer), settings, [("PLAINTEXT", "127.0.0.1", 0)])  # type: ignore[arg-type]
    server.start()
    return server


def test_segment_bytes_sent_zero_copy_arrive_whole_and_before_the_next_response(tmp_path: Path) -> None:
    # More than the kernel buffers between the two ends at most (net.ipv4.tcp_wmem + tcp_rmem
    # maxima), and the client reads on the same event loop: the first os.sendfile fills the
    # socket, and loop.sendfile sends the rest as the client reads.
    segment_bytes = os.urandom(16 * 1024 * 1024 + 17)
    (tmp_path / "segment").write_bytes(segment_bytes)
    segment = SegmentFile(tmp_path / "segment")
    position, length = 1000, len(segment_bytes) - 2000
    assert length >= SENDFILE_THRESHOLD
    header, trailer = b"header", b"trailer"
    fetch_response = frame(header + segment_bytes[position:position + length] + trailer)

    def answer(body: bytes) -> bytes | EncodedResponse:
        if body == b"fetch":
            size = struct.pack(">i", len(header) + length + len(trailer))
            return EncodedResponse([size + header, FetchSlice(segment, position, length), trailer])  # type: ignore[arg-type]
        return frame(b"after " + body)

    async def main() -> None:
        server = await serve(answer, SocketServerSettings())
        port = server.acceptors[0].sock.getsockname()[1]
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(frame(b"fetch") + frame(b"one") + frame(b"two"))  # pipelined
        await writer.drain()
        expected = fetch_response + frame(b"after one") + frame(b"after two")
        received = await asyncio.wait_for(reader.readexactly(len(expected)), DEADLINE_S)
        assert received == expected
        writer.close()
        server.close()

    try:
        asyncio.run(main())
    finally:
        os.close(segment.fd)
