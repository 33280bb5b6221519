"""InterBrokerClient: one outbound Kafka-protocol connection from this node to another node.

Brokers talk to the controller (registration, heartbeats, metadata, AlterPartition) and to
partition leaders (follower Fetch) with Kafka's own wire protocol and kio's message types.
The socket is bound to this node's own listener address, so a test can cut the link between
two 127.0.0.x addresses. Requests are pipelined by correlation id; a failed link fails every
pending request with ConnectionError and the next request reconnects.
"""

from __future__ import annotations

import asyncio
import logging
import struct
from typing import Any

from kbroker.protocol.codec import decode_response, encode_request

log = logging.getLogger(__name__)

_INT32 = struct.Struct(">i")
CONNECT_TIMEOUT_S = 5.0


class InterBrokerClient:
    def __init__(self, host: str, port: int, source_host: str | None, client_id: str) -> None:
        self.host = host
        self.port = port
        self.source_host = source_host
        self.client_id = client_id
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._connecting: asyncio.Lock = asyncio.Lock()
        self._pending: dict[int, tuple[int, int, asyncio.Future[Any]]] = {}
        self._next_correlation = 1
        self._read_task: asyncio.Task[None] | None = None

    def __repr__(self) -> str:
        return f"InterBrokerClient({self.host}:{self.port})"

    async def request(self, api_key: int, api_version: int, body: Any, timeout_s: float = 30.0) -> Any:
        """Send one request and return its decoded response entity."""
        await self._ensure_connected()
        assert self._writer is not None
        correlation_id = self._next_correlation
        self._next_correlation = (self._next_correlation + 1) & 0x7FFFFFFF or 1
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._pending[correlation_id] = (api_key, api_version, future)
        try:
            self._writer.write(encode_request(api_key, api_version, correlation_id, self.client_id, body))
            return await asyncio.wait_for(future, timeout_s)
        except TimeoutError:
            # A late answer would desynchronise nothing (correlation ids), but a peer that stopped
            # answering is treated as a failed link so callers reconnect or move on.
            self._fail(TimeoutError(f"{self!r}: no response in {timeout_s:.1f} s"))
            raise
        finally:
            self._pending.pop(correlation_id, None)

    async def _ensure_connected(self) -> None:
        if self._writer is not None and not self._writer.is_closing():
            return
        async with self._connecting:
            if self._writer is not None and not self._writer.is_closing():
                return
            local = (self.source_host, 0) if self.source_host else None
            try:
                reader, writer = await asyncio.wait_for(
                    asyncio.open_connection(self.host, self.port, local_addr=local), CONNECT_TIMEOUT_S
                )
            except (OSError, TimeoutError) as exc:
                raise ConnectionError(f"cannot connect to {self.host}:{self.port}: {exc}") from exc
            self._reader, self._writer = reader, writer
            self._read_task = asyncio.get_running_loop().create_task(self._read_loop(reader))

    async def _read_loop(self, reader: asyncio.StreamReader) -> None:
        try:
            while True:
                head = await reader.readexactly(4)
                frame = await reader.readexactly(_INT32.unpack(head)[0])
                (correlation_id,) = _INT32.unpack_from(frame, 0)
                entry = self._pending.get(correlation_id)
                if entry is None:
                    continue  # the caller timed out and left
                api_key, api_version, future = entry
                if not future.done():
                    try:
                        future.set_result(decode_response(api_key, api_version, frame)[1])
                    except Exception as exc:  # an undecodable answer fails that request only
                        future.set_exception(ConnectionError(f"{self!r}: bad response: {exc}"))
        except (OSError, asyncio.IncompleteReadError) as exc:
            self._fail(ConnectionError(f"{self!r}: connection lost: {exc}"))
        except asyncio.CancelledError:
            pass

    def _fail(self, exc: BaseException) -> None:
        writer, self._writer = self._writer, None
        if writer is not None:
            writer.close()
        if self._read_task is not None and self._read_task is not asyncio.current_task():
            self._read_task.cancel()
        self._read_task = None
        pending, self._pending = self._pending, {}
        for _key, _version, future in pending.values():
            if not future.done():
                future.set_exception(exc if isinstance(exc, ConnectionError) else ConnectionError(str(exc)))

    def close(self) -> None:
        self._fail(ConnectionError(f"{self!r}: closed"))
