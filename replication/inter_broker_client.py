"""InterBrokerClient: one outbound Kafka-protocol connection from this node to another node.

Brokers talk to the controller (registration, heartbeats, metadata, AlterPartition) and to
partition leaders (follower Fetch) with Kafka's own wire protocol and kio's message types.
The socket is bound to this node's own listener address, so a test can cut the link between
two 127.0.0.x addresses. Requests are pipelined by correlation id; a failed link fails every
pending request with ConnectionError and the next request reconnects.

Over a secured listener (``LinkSecurity``) the connection is TLS (the listener's truststore and
keystore; the server's name checked when ``ssl.endpoint.identification.algorithm=https``) and/or
authenticates with SASL before its first request: SaslHandshake v1 naming the mechanism, then
SaslAuthenticate v2 rounds until the mechanism's client is done. A failed authentication fails
the request with ConnectionError (the caller retries, as on a lost link). When the broker gives
the session a lifetime (KIP-368), the link reconnects, and so authenticates again, before it ends.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
import struct
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from kbroker.protocol.codec import decode_response, encode_request
from kio.schema.sasl_authenticate.v2.request import SaslAuthenticateRequest
from kio.schema.sasl_handshake.v1.request import SaslHandshakeRequest

log = logging.getLogger(__name__)

_INT32 = struct.Struct(">i")
CONNECT_TIMEOUT_S = 5.0
SASL_HANDSHAKE_KEY, SASL_AUTHENTICATE_KEY = 17, 36
# Reconnect (and so re-authenticate) once this share of a SASL session's lifetime has passed.
_SESSION_SHARE = 0.85


class SaslClient(Protocol):
    """One SASL exchange on the client side (kbroker/security/sasl's mechanisms)."""

    mechanism: str

    def initial_response(self) -> bytes: ...

    def evaluate_challenge(self, challenge: bytes) -> bytes | None: ...

    @property
    def is_complete(self) -> bool: ...


@dataclass(frozen=True, slots=True)
class LinkSecurity:
    """How a link reaches a secured listener: TLS with ``ssl_context`` (server name checked per
    the context), SASL with a new ``sasl_client()`` per connection."""

    ssl_context: ssl.SSLContext | None = None
    sasl_client: Callable[[], SaslClient] | None = None


class InterBrokerClient:
    def __init__(self, host: str, port: int, source_host: str | None, client_id: str,
                 security: LinkSecurity | None = None) -> None:
        self.host = host
        self.port = port
        self.source_host = source_host
        self.client_id = client_id
        self.security = security
        self._session_ends: float | None = None  # monotonic time to reconnect by (KIP-368)
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
        if (self._session_ends is not None and time.monotonic() >= self._session_ends and not self._pending
                and self._writer is not None):
            self._fail(ConnectionError(f"{self!r}: SASL session lifetime reached, reconnecting"))
        if self._writer is not None and not self._writer.is_closing():
            return
        async with self._connecting:
            if self._writer is not None and not self._writer.is_closing():
                return
            local = (self.source_host, 0) if self.source_host else None
            context = self.security.ssl_context if self.security is not None else None
            try:
                reader, writer = await asyncio.wait_for(
                    asyncio.open_connection(self.host, self.port, local_addr=local, ssl=context,
                                            server_hostname=self.host if context is not None else None),
                    CONNECT_TIMEOUT_S,
                )
            except (OSError, TimeoutError) as exc:  # ssl.SSLError and certificate errors included
                raise ConnectionError(f"cannot connect to {self.host}:{self.port}: {exc}") from exc
            self._session_ends = None
            if self.security is not None and self.security.sasl_client is not None:
                try:
                    await asyncio.wait_for(self._authenticate(reader, writer, self.security.sasl_client()),
                                           CONNECT_TIMEOUT_S)
                except (OSError, TimeoutError, asyncio.IncompleteReadError, ConnectionError) as exc:
                    writer.close()
                    raise ConnectionError(f"{self!r}: SASL authentication failed: {exc}") from exc
            self._reader, self._writer = reader, writer
            self._read_task = asyncio.get_running_loop().create_task(self._read_loop(reader))

    async def _authenticate(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                            client: SaslClient) -> None:
        """SaslHandshake v1, then SaslAuthenticate v2 until the mechanism is done; ConnectionError
        with the broker's message if it refuses."""
        handshake = await self._exchange(reader, writer, SASL_HANDSHAKE_KEY, 1,
                                         SaslHandshakeRequest(mechanism=client.mechanism))
        if handshake.error_code != 0:
            raise ConnectionError(f"SaslHandshake: {handshake.error_code.name} (enabled mechanisms: "
                                  f"{', '.join(handshake.mechanisms)})")
        token: bytes | None = client.initial_response()
        while token is not None:
            answer = await self._exchange(reader, writer, SASL_AUTHENTICATE_KEY, 2,
                                          SaslAuthenticateRequest(auth_bytes=token))
            if answer.error_code != 0:
                raise ConnectionError(f"SaslAuthenticate: {answer.error_code.name}: {answer.error_message}")
            token = client.evaluate_challenge(bytes(answer.auth_bytes))
            lifetime_ms = answer.session_lifetime.total_seconds() * 1000
            if lifetime_ms > 0:
                self._session_ends = time.monotonic() + lifetime_ms * _SESSION_SHARE / 1000
        if not client.is_complete:
            raise ConnectionError(f"the {client.mechanism} exchange ended before it was complete")

    async def _exchange(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, api_key: int,
                        api_version: int, body: Any) -> Any:
        """One request and its answer on a connection whose read loop has not started yet."""
        writer.write(encode_request(api_key, api_version, 0, self.client_id, body))
        head = await reader.readexactly(4)
        frame = await reader.readexactly(_INT32.unpack(head)[0])
        return decode_response(api_key, api_version, frame)[1]

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
