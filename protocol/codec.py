"""Request/response framing and the message codec.

A frame is ``int32 size`` followed by a header and a body. Request header v1 carries
``api_key, api_version, correlation_id, client_id``; v2 (flexible request versions) adds a
tagged-field section. Response header v0 is just ``correlation_id``; v1 adds tagged fields,
except ApiVersions, whose response always uses v0 so that a client can read the error of an
unsupported version (KIP-511).

Bodies are decoded by kio's native readers (with a fallback that skips unknown tagged fields,
which also reads the int64 durations kio cannot hold, see tagged_reader) and encoded by kio's
writers; the hot Produce and Fetch responses are packed by hand in the handlers that own them.
"""

from __future__ import annotations

import datetime
import io
import struct
import sys
import uuid
from dataclasses import dataclass, fields
from functools import cache
from typing import Any

from kio.index import KioIndexError, load_request_schema, load_response_schema
from kio.serial import entity_reader, entity_writer
from kio.static.primitive import i32Timedelta
from kio.static.protocol import Entity, RequestPayload, ResponsePayload

from .array_guard import check_array_counts
from .tagged_reader import has_int64_duration, read_entity_skipping_unknown_tags

API_VERSIONS_KEY = 18
NO_THROTTLE = i32Timedelta.parse(datetime.timedelta(0))  # throttle_time_ms: kbroker has no quotas yet
ZERO_UUID = uuid.UUID(int=0)  # "no topic id" on the wire

_HEADER_FIXED = struct.Struct(">hhi")
_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")


class MalformedRequest(Exception):
    """The frame cannot be parsed; Kafka closes the connection in this case."""


@dataclass(slots=True, frozen=True)
class RequestHeader:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None


def read_unsigned_varint(buf: memoryview | bytes, offset: int) -> tuple[int, int]:
    """Decode an unsigned varint; returns (value, new offset)."""
    value = 0
    shift = 0
    while True:
        if offset >= len(buf):
            raise MalformedRequest("truncated varint")
        byte = buf[offset]
        offset += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, offset
        shift += 7
        if shift > 28:
            raise MalformedRequest("varint too long")


def encode_unsigned_varint(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def parse_request_header(frame: memoryview, flexible: bool | None) -> tuple[RequestHeader, int]:
    """Parse the header of a request frame (without its size prefix).

    ``flexible`` says whether the request version uses header v2; ``None`` means the version
    is unknown to us, and only the fixed fields and client id are read.
    Returns the header and the offset where the body starts.
    """
    if len(frame) < _HEADER_FIXED.size:
        raise MalformedRequest("request shorter than its header")
    api_key, api_version, correlation_id = _HEADER_FIXED.unpack_from(frame, 0)
    offset = _HEADER_FIXED.size
    client_id: str | None = None
    if len(frame) >= offset + 2:
        (length,) = _INT16.unpack_from(frame, offset)
        offset += 2
        if length >= 0:
            if offset + length > len(frame):
                raise MalformedRequest("client id runs past the end of the frame")
            client_id = bytes(frame[offset : offset + length]).decode("utf-8", "replace")
            offset += length
    if flexible:
        count, offset = read_unsigned_varint(frame, offset)
        for _ in range(count):
            _tag, offset = read_unsigned_varint(frame, offset)
            size, offset = read_unsigned_varint(frame, offset)
            offset += size
        if offset > len(frame):
            raise MalformedRequest("header tagged fields run past the end of the frame")
    return RequestHeader(api_key, api_version, correlation_id, client_id), offset


@cache
def request_schema(api_key: int, api_version: int) -> type[RequestPayload] | None:
    """The kio request class for a version, or None if kio has no such version."""
    try:
        return load_request_schema(api_key, api_version)
    except (KioIndexError, KeyError, ValueError, ImportError):  # unknown key or version
        return None


@cache
def response_schema(api_key: int, api_version: int) -> type[ResponsePayload]:
    return load_response_schema(api_key, api_version)


def is_flexible(api_key: int, api_version: int) -> bool | None:
    schema = request_schema(api_key, api_version)
    return None if schema is None else bool(schema.__flexible__)


def decode_request_body(schema: type[Entity], frame: memoryview, offset: int) -> Any:
    """Decode a request body with kio, skipping unknown tagged fields (KIP-482)."""
    frame = frame.toreadonly()  # kio's native readers refuse writable buffers
    value: Entity
    try:
        check_array_counts(schema, frame, offset)  # kio would preallocate a huge count and abort
        if has_int64_duration(schema):  # kio's native reader fails on any int64 past ±8.6e16 there
            value, _size = read_entity_skipping_unknown_tags(schema, frame, offset)
        else:
            try:
                value, _size = entity_reader(schema)(frame, offset)
            except KeyError:
                value, _size = read_entity_skipping_unknown_tags(schema, frame, offset)
    except MalformedRequest:
        raise
    except Exception as exc:  # kio raises ValueError/IndexError/UnicodeError on bad input
        raise MalformedRequest(f"cannot decode {schema.__name__}: {exc}") from exc
    return value


def response_header(correlation_id: int, api_key: int, flexible: bool) -> bytes:
    if flexible and api_key != API_VERSIONS_KEY:
        return _INT32.pack(correlation_id) + b"\x00"
    return _INT32.pack(correlation_id)


def encode_response(correlation_id: int, api_key: int, entity: Any) -> bytes:
    """A whole response frame (size prefix, header, body) for a kio response entity."""
    buf = io.BytesIO()
    buf.write(b"\x00\x00\x00\x00")
    buf.write(response_header(correlation_id, api_key, entity.__flexible__))
    entity_writer(type(entity))(buf, entity)
    frame = buf.getbuffer()
    _INT32.pack_into(frame, 0, len(frame) - 4)
    del frame
    return buf.getvalue()


@cache
def _field_names(cls: type) -> frozenset[str]:
    return frozenset(f.name for f in fields(cls))


def build(cls: type, **values: Any) -> Any:
    """Construct a kio entity from the superset of fields across versions.

    Handlers describe a response once; fields this version's class lacks are dropped here.
    """
    names = _field_names(cls)
    return cls(**{k: v for k, v in values.items() if k in names})


def has_field(cls: type, name: str) -> bool:
    return name in _field_names(cls)


def response_module(api_key: int, api_version: int) -> Any:
    """The kio module holding the response classes (nested ones too) of one version."""
    return sys.modules[response_schema(api_key, api_version).__module__]


def encode_request(api_key: int, api_version: int, correlation_id: int, client_id: str, body: Any) -> bytes:
    """A whole request frame (size prefix, header v1 or v2, body) for a kio request entity."""
    buf = io.BytesIO()
    buf.write(b"\x00\x00\x00\x00")
    buf.write(_HEADER_FIXED.pack(api_key, api_version, correlation_id))
    encoded_id = client_id.encode()
    buf.write(_INT16.pack(len(encoded_id)) + encoded_id)
    if body.__flexible__:
        buf.write(b"\x00")  # request header v2: no tagged fields
    entity_writer(type(body))(buf, body)
    frame = buf.getbuffer()
    _INT32.pack_into(frame, 0, len(frame) - 4)
    del frame
    return buf.getvalue()


def decode_response(api_key: int, api_version: int, frame: bytes) -> tuple[int, Any]:
    """(correlation id, kio response entity) of a response frame without its size prefix."""
    schema = response_schema(api_key, api_version)
    (correlation_id,) = _INT32.unpack_from(frame, 0)
    offset = 4
    if schema.__flexible__ and api_key != API_VERSIONS_KEY:
        count, offset = read_unsigned_varint(frame, offset)
        for _ in range(count):
            _tag, offset = read_unsigned_varint(frame, offset)
            size, offset = read_unsigned_varint(frame, offset)
            offset += size
    view = memoryview(frame).toreadonly()
    value: Entity
    try:
        value, _size = entity_reader(schema)(view, offset)
    except KeyError:
        value, _size = read_entity_skipping_unknown_tags(schema, view, offset)
    return correlation_id, value
