"""A bare Kafka request/response exchange over a socket, for APIs no client library exposes
directly (OffsetForLeaderEpoch, FindCoordinator v0-6, InitProducerId, exact ListOffsets).

Requests and responses are kio entities; only the framing is written here.
"""

from __future__ import annotations

import io
import socket
import struct
import time
from typing import Any

from kio.index import load_response_schema
from kio.schema.find_coordinator.v4.request import FindCoordinatorRequest
from kio.serial import entity_reader, entity_writer
from kio.static.primitive import i8

_CLIENT_ID = b"kbroker-tests"


def request_frame(request: Any, version: int, correlation_id: int = 1) -> bytes:
    """A whole request frame (size prefix, header, body) for a kio request entity."""
    header = struct.pack(">hhih", request.__api_key__, version, correlation_id, len(_CLIENT_ID)) + _CLIENT_ID
    if request.__flexible__:
        header += b"\x00"  # request header v2: no tagged fields
    body = io.BytesIO()
    entity_writer(type(request))(body, request)
    payload = header + body.getvalue()
    return struct.pack(">i", len(payload)) + payload


def read_response(sock: socket.socket, schema: Any, correlation_id: int = 1) -> Any:
    """Read one response frame for ``schema`` from ``sock`` and decode it."""
    size = struct.unpack(">i", _read(sock, 4))[0]
    frame = _read(sock, size)
    (received,) = struct.unpack_from(">i", frame, 0)
    assert received == correlation_id
    offset = 4 + (1 if schema.__flexible__ else 0)  # response header v1 adds tagged fields
    value, _size = entity_reader(schema)(memoryview(frame), offset)
    return value


def call(bootstrap: str, request: Any, version: int, timeout: float = 10.0) -> Any:
    """Send one request of ``version`` and return the decoded response entity."""
    host, port = bootstrap.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=timeout) as sock:
        sock.sendall(request_frame(request, version))
        return read_response(sock, load_response_schema(request.__api_key__, version))


def _read(sock: socket.socket, size: int) -> bytes:
    chunks = []
    while size:
        chunk = sock.recv(size)
        if not chunk:
            raise ConnectionError("broker closed the connection")
        chunks.append(chunk)
        size -= len(chunk)
    return b"".join(chunks)


def wait_for_coordinators(bootstrap: str, timeout: float = 30.0) -> None:
    """Ask FindCoordinator (as every client does before a group or transaction request) until
    both internal topics exist and their coordinators answer: a bare request sent before that
    is answered NOT_COORDINATOR, as by Kafka."""
    deadline = time.monotonic() + timeout
    for key_type in (0, 1):  # groups, transactional ids
        while True:
            answer = call(bootstrap, FindCoordinatorRequest(key_type=i8(key_type), coordinator_keys=("probe",)), 4)
            if answer.coordinators[0].error_code == 0:
                break
            assert time.monotonic() < deadline, answer
            time.sleep(0.05)
