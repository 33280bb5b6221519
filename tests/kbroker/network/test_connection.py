"""KafkaConnection's framing, driven as asyncio's transport drives it (get_buffer, then
buffer_updated, in one callback): memory follows the bytes that arrived, frames survive any
split, one request is handled at a time, and reading stops while the MemoryPool is exhausted or
the client does not read its responses. End-to-end checks over real sockets are in
tests/end_to_end/test_connection_limits.py and test_connection_resources.py."""

from __future__ import annotations

import asyncio
import socket
import struct
import tracemalloc
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import pytest

from kbroker.network.connected_clients import ConnectedClients
from kbroker.network.connection import KafkaConnection
from kbroker.network.socket_server import SocketServer, SocketServerSettings

MAX_REQUEST = 100 * 1024 * 1024


class FakeDispatcher:
    """Answers each frame with its own bytes, once ``release`` allows (all at once by default)."""

    def __init__(self) -> None:
        self.frames: list[bytes] = []
        self.release: asyncio.Event | None = None
        self.clients = ConnectedClients()  # the SocketServer forgets each closed connection there

    async def dispatch(self, frame: bytearray, client_host: str, peer: str, principal: object = None,
                       listener: str = "") -> bytes:
        self.frames.append(bytes(frame))
        if self.release is not None:
            await self.release.wait()
            self.release.clear()
        return struct.pack(">i", len(frame)) + bytes(frame)


class FakeTransport:
    """What KafkaConnection uses of a transport; the socket is real so FIONREAD works."""

    def __init__(self, protocol: KafkaConnection, sock: socket.socket) -> None:
        self.protocol = protocol
        self.sock = sock
        self.reading = True
        self.closing = False
        self.written: list[bytes] = []
        self.client: socket.socket | None = None  # the client's end of the socket

    def get_extra_info(self, name: str) -> Any:
        return self.sock if name == "socket" else None

    def pause_reading(self) -> None:
        self.reading = False

    def resume_reading(self) -> None:
        self.reading = True

    def write(self, data: bytes) -> None:
        self.written.append(bytes(data))

    def is_closing(self) -> bool:
        return self.closing

    def close(self) -> None:
        if not self.closing:
            self.closing = True
            asyncio.get_running_loop().call_soon(self.protocol.connection_lost, None)


def frame(body: bytes) -> bytes:
    return struct.pack(">i", len(body)) + body


def feed(connection: KafkaConnection, transport: FakeTransport, data: bytes, chunk: int = 1 << 30) -> bytes:
    """Deliver ``data`` in reads of at most ``chunk`` bytes while the transport reads; returns
    what it could not deliver because reading was paused."""
    while data and transport.reading and not transport.closing:
        buffer = connection.get_buffer(-1)
        n = min(len(buffer), len(data), chunk)
        buffer[:n] = data[:n]
        del buffer
        connection.buffer_updated(n)
        data = data[n:]
    return data


Scenario = Callable[[KafkaConnection, FakeTransport, FakeDispatcher], Awaitable[None]]
Run = Callable[..., None]


@pytest.fixture
def run() -> Iterator[Run]:
    """Run a scenario on a fresh loop with one connection of a SocketServer with ``settings``."""
    pair = socket.socketpair()
    pair[0].setblocking(False)  # as every transport's socket is (the connection may read it directly)

    def runner(scenario: Scenario, settings: SocketServerSettings | None = None) -> None:
        async def main() -> None:
            dispatcher = FakeDispatcher()
            server = SocketServer(dispatcher, settings or SocketServerSettings(socket_request_max_bytes=MAX_REQUEST),
                                  [])  # type: ignore[arg-type]  # the fake answers what dispatch() must
            assert server.quotas.inc("127.0.0.1")
            connection = KafkaConnection(server, "PLAINTEXT", "127.0.0.1", "127.0.0.1:1")
            transport = FakeTransport(connection, pair[0])
            transport.client = pair[1]
            connection.connection_made(transport)  # type: ignore[arg-type]
            await scenario(connection, transport, dispatcher)
        asyncio.run(main())

    yield runner
    for sock in pair:
        sock.close()


async def settle() -> None:
    """Let the request tasks run until they wait again."""
    for _ in range(10):
        await asyncio.sleep(0)


def test_a_declared_size_costs_only_what_arrived(run: Run) -> None:
    async def scenario(connection: KafkaConnection, transport: FakeTransport, dispatcher: FakeDispatcher) -> None:
        tracemalloc.start()
        try:
            before, _peak = tracemalloc.get_traced_memory()
            feed(connection, transport, struct.pack(">i", MAX_REQUEST))
            feed(connection, transport, b"x" * 1000)  # a later read: where a buffer gets sized
            after, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        assert after - before < 256 * 1024 and peak - before < 256 * 1024  # not 100 MiB
        assert dispatcher.frames == [] and transport.reading

    run(scenario)


def test_frames_split_anywhere_arrive_whole_and_in_order(run: Run) -> None:
    bodies = [b"first" * 3, b"", b"x" * 200_000, b"last"]  # the large one outgrows its first buffer
    stream = b"".join(frame(body) for body in bodies)

    async def scenario(connection: KafkaConnection, transport: FakeTransport, dispatcher: FakeDispatcher) -> None:
        for chunk in (3, 4096, 70_000):  # 3: size prefixes are cut too
            rest = stream
            while rest:
                rest = feed(connection, transport, rest, chunk)
                await settle()
        assert dispatcher.frames == bodies * 3
        assert b"".join(transport.written) == stream * 3

    run(scenario)


def test_one_request_at_a_time_and_reading_paused_while_pipelined_ones_wait(run: Run) -> None:
    async def scenario(connection: KafkaConnection, transport: FakeTransport, dispatcher: FakeDispatcher) -> None:
        dispatcher.release = asyncio.Event()
        assert feed(connection, transport, frame(b"one") + frame(b"two") + frame(b"three")) == b""
        await settle()
        assert dispatcher.frames == [b"one"] and not transport.reading
        dispatcher.release.set()
        await settle()
        assert dispatcher.frames == [b"one", b"two"] and transport.written == [frame(b"one")]
        dispatcher.release.set()
        await settle()
        dispatcher.release.set()
        await settle()
        assert transport.written == [frame(b"one"), frame(b"two"), frame(b"three")] and transport.reading

    run(scenario)


def test_responses_to_requests_handled_in_one_turn_leave_in_one_write_in_order(run: Run) -> None:
    async def scenario(connection: KafkaConnection, transport: FakeTransport, dispatcher: FakeDispatcher) -> None:
        assert feed(connection, transport, frame(b"one") + frame(b"two") + frame(b"three")) == b""
        await settle()
        assert transport.written == [frame(b"one") + frame(b"two") + frame(b"three")] and transport.reading

    run(scenario)


def test_pipelined_requests_the_kernel_holds_are_read_by_the_request_task(run: Run) -> None:
    big = b"b" * 150_000
    in_kernel = frame(b"two") + frame(big)[:70_000]  # the next request whole, the one after it in part

    async def scenario(connection: KafkaConnection, transport: FakeTransport, dispatcher: FakeDispatcher) -> None:
        assert transport.client is not None
        transport.client.sendall(in_kernel)
        assert feed(connection, transport, frame(b"one")) == b""
        await settle()
        assert dispatcher.frames == [b"one", b"two"]  # "two" straight from the socket, in the same task
        assert transport.reading  # the rest of the large one comes through the transport
        assert feed(connection, transport, frame(big)[70_000:]) == b""
        await settle()
        assert dispatcher.frames == [b"one", b"two", big]
        assert b"".join(transport.written) == frame(b"one") + frame(b"two") + frame(big)

    run(scenario)


def test_an_exhausted_pool_mutes_the_connection_until_memory_is_released(run: Run) -> None:
    settings = SocketServerSettings(socket_request_max_bytes=1000, queued_max_request_bytes=1000)

    async def scenario(connection: KafkaConnection, transport: FakeTransport, dispatcher: FakeDispatcher) -> None:
        pool = connection.server.pool
        assert pool is not None and pool.try_allocate(1000)  # another connection holds it all
        feed(connection, transport, frame(b"waits"))
        await settle()
        assert dispatcher.frames == [] and not transport.reading
        pool.release(1000)
        await settle()
        assert dispatcher.frames == [b"waits"] and transport.written == [frame(b"waits")]
        assert pool.available == 1000 and transport.reading

    run(scenario, settings)


def test_a_client_that_does_not_read_its_responses_is_not_read(run: Run) -> None:
    async def scenario(connection: KafkaConnection, transport: FakeTransport, dispatcher: FakeDispatcher) -> None:
        connection.pause_writing()  # the transport's buffer is above its high-water mark
        feed(connection, transport, frame(b"one") + frame(b"two"))
        await settle()
        assert dispatcher.frames == [b"one"] and not transport.reading
        connection.resume_writing()
        await settle()
        assert dispatcher.frames == [b"one", b"two"] and transport.reading

    run(scenario)


def test_an_oversized_size_prefix_closes_the_connection(run: Run) -> None:
    async def scenario(connection: KafkaConnection, transport: FakeTransport, dispatcher: FakeDispatcher) -> None:
        feed(connection, transport, struct.pack(">i", MAX_REQUEST + 1) + b"x" * 10)
        await settle()
        assert transport.closing and connection.closed and dispatcher.frames == []

    run(scenario)
