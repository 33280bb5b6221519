"""A bare Kafka request/response exchange over a socket, for APIs no client library exposes
directly (OffsetForLeaderEpoch, FindCoordinator v0-6, InitProducerId, exact ListOffsets).

Requests and responses are kio entities; only the framing is written here.
"""

from __future__ import annotations

import io
import socket
import struct
from typing import Any

from kio.index import load_response_schema
from kio.serial import entity_reader, entity_writer

_CLIENT_ID = b"kbroker-tests"


def call(bootstrap: str, request: Any, version: int, timeout: float = 10.0) -> Any:
    """Send one request of ``version`` and return the decoded response entity."""
    api_key = request.__api_key__
    header = struct.pack(">hhih", api_key, version, 1, len(_CLIENT_ID)) + _CLIENT_ID
    if request.__flexible__:
        header += b"\x00"  # request header v2: no tagged fields
    body = io.BytesIO()
    entity_writer(type(request))(body, request)
    payload = header + body.getvalue()
    host, port = bootstrap.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=timeout) as sock:
        sock.sendall(struct.pack(">i", len(payload)) + payload)
        size = struct.unpack(">i", _read(sock, 4))[0]
        frame = _read(sock, size)
    schema = load_response_schema(api_key, version)
    (correlation_id,) = struct.unpack_from(">i", frame, 0)
    assert correlation_id == 1
    offset = 4 + (1 if schema.__flexible__ else 0)  # response header v1 adds tagged fields
    value, _size = entity_reader(schema)(memoryview(frame), offset)
    return value


def _read(sock: socket.socket, size: int) -> bytes:
    chunks = []
    while size:
        chunk = sock.recv(size)
        if not chunk:
            raise ConnectionError("broker closed the connection")
        chunks.append(chunk)
        size -= len(chunk)
    return b"".join(chunks)
