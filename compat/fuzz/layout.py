"""Where each field of a well-formed request frame sits: the map structured mutations aim with.

``walk(frame)`` reads a request frame (header and body, no size prefix) the way its schema
describes it — kio's request classes, for the API key and version in the header — and returns
a ``Layout``: one ``Span`` per field that has an encoding worth aiming at. Length prefixes of
strings, bytes and records, array counts, nullable-struct markers, tagged-field sections and
each tagged field, fixed-width numbers (named by their path, e.g.
``topics.num_partitions``) and the record set of a Produce request. Spans record whether a
length is a legacy int16/int32 or a compact unsigned varint (flexible versions), so a mutator
can re-encode it. The walker only reads; a frame it cannot walk (a mutated one) has no layout.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, fields
from typing import Any

from kbroker.protocol.codec import API_VERSIONS_KEY, request_schema, response_schema
from kio.serial._introspect import EntityField, EntityTupleField, PrimitiveTupleField, classify_field, is_optional

# Wire width of each fixed-size Kafka type a request can hold.
FIXED_WIDTH = {
    "bool": 1, "int8": 1, "int16": 2, "uint16": 2, "int32": 4, "timedelta_i32": 4, "int64": 8,
    "timedelta_i64": 8, "datetime_i64": 8, "float64": 8, "uuid": 16, "error_code": 2,
}  # fmt: skip
# Legacy (non-flexible) width of the length prefix of each variable-size type.
LEGACY_LENGTH_WIDTH = {"string": 2, "bytes": 4, "records": 4}
_SIGNED = {1: struct.Struct(">b"), 2: struct.Struct(">h"), 4: struct.Struct(">i"), 8: struct.Struct(">q")}

# Span kinds.
NUMBER = "number"  # a fixed-width integer (bool, int8..int64, durations); width 1/2/4/8
ERROR_CODE = "error_code"  # an int16 error code (in responses)
UUID = "uuid"
LENGTH = "length"  # length prefix of a string / bytes / records field
COUNT = "count"  # array count
NULL_MARKER = "null_marker"  # int8 in front of a nullable struct (KIP-893)
TAG_SECTION = "tag_section"  # unsigned varint count opening a tagged-field section
TAGGED_FIELD = "tagged_field"  # one tagged field: tag, size and data
RECORDS = "records"  # the record set of a Produce partition (the bytes after its length)


class LayoutError(ValueError):
    """The frame does not follow its schema (it cannot be walked)."""


@dataclass(frozen=True, slots=True)
class Span:
    start: int
    end: int
    kind: str
    path: str  # dotted field names from the request root ("header.client_id" for the header)
    compact: bool = False  # the value is an unsigned varint (flexible versions)
    width: int = 0  # fixed width of a NUMBER or of a legacy length / count
    value: int = 0  # the value read (for lengths: the decoded length, -1 for null)
    content_end: int = 0  # LENGTH: where the content it announces ends


@dataclass(frozen=True, slots=True)
class Layout:
    api_key: int
    api_version: int
    flexible: bool
    body_start: int
    spans: tuple[Span, ...]

    def of_kind(self, *kinds: str) -> list[Span]:
        return [s for s in self.spans if s.kind in kinds]

    def named(self, suffix: str) -> list[Span]:
        """NUMBER spans whose path ends with ``suffix`` (e.g. ``"num_partitions"``)."""
        return [s for s in self.spans if s.kind == NUMBER and s.path.rsplit(".", 1)[-1] == suffix]

    def records_length(self, records: Span) -> Span:
        """The LENGTH span announcing a RECORDS span."""
        for span in self.spans:
            if span.kind == LENGTH and span.end == records.start and span.content_end == records.end:
                return span
        raise LayoutError("records without a length prefix")


def read_uvarint(buf: bytes | bytearray, pos: int, end: int) -> tuple[int, int]:
    """An unsigned varint at ``pos``; returns (value, position after it)."""
    value = shift = 0
    while True:
        if pos >= end:
            raise LayoutError("varint runs past the end")
        byte = buf[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, pos
        shift += 7
        if shift > 63:
            raise LayoutError("varint too long")


def encode_uvarint(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


class _Walker:
    def __init__(self, frame: bytes, flexible: bool) -> None:
        self.buf = frame
        self.flexible = flexible
        self.spans: list[Span] = []

    def _take(self, pos: int, n: int, end: int) -> int:
        if n < 0 or pos + n > end:
            raise LayoutError("field runs past the end")
        return pos + n

    def _signed(self, pos: int, width: int, end: int) -> int:
        self._take(pos, width, end)
        return _SIGNED[width].unpack_from(self.buf, pos)[0]

    def length(self, pos: int, end: int, legacy_width: int, path: str, kind: str = LENGTH) -> tuple[int, int]:
        """A length or count prefix at ``pos``: (decoded value, -1 for null; position after)."""
        if self.flexible:
            raw, after = read_uvarint(self.buf, pos, end)
            value = raw - 1
            span = Span(pos, after, kind, path, compact=True, value=value)
        else:
            value = self._signed(pos, legacy_width, end)
            after = pos + legacy_width
            span = Span(pos, after, kind, path, width=legacy_width, value=value)
        if kind == LENGTH:
            content_end = self._take(after, max(value, 0), end)
            span = Span(span.start, span.end, kind, path, span.compact, span.width, value, content_end)
        self.spans.append(span)
        return value, after

    def primitive(self, kafka_type: str, pos: int, end: int, path: str) -> int:
        width = FIXED_WIDTH.get(kafka_type)
        if width is not None:
            after = self._take(pos, width, end)
            if kafka_type == "uuid":
                self.spans.append(Span(pos, after, UUID, path, width=16))
            elif kafka_type == "error_code":
                self.spans.append(Span(pos, after, ERROR_CODE, path, width=2, value=self._signed(pos, 2, end)))
            elif kafka_type != "float64":
                self.spans.append(Span(pos, after, NUMBER, path, width=width, value=self._signed(pos, width, end)))
            return after
        legacy = LEGACY_LENGTH_WIDTH.get(kafka_type)
        if legacy is None:
            raise LayoutError(f"no layout for Kafka type {kafka_type}")
        value, after = self.length(pos, end, legacy, path)
        if value < 0:
            return after
        content_end = after + value
        if kafka_type == "records" and value > 0:
            self.spans.append(Span(after, content_end, RECORDS, path))
        return content_end

    def field(self, field: Any, pos: int, end: int, path: str, tagged: bool) -> int:
        kind = classify_field(field)
        if isinstance(kind, EntityTupleField | PrimitiveTupleField):
            count, pos = self.length(pos, end, 4, path, COUNT)
            for _ in range(max(count, 0)):
                if isinstance(kind, EntityTupleField):
                    pos = self.entity(kind.type_, pos, end, path)
                else:
                    pos = self.primitive(field.metadata["kafka_type"], pos, end, path)
            return pos
        if isinstance(kind, EntityField):
            if is_optional(field) and not tagged:
                marker = self._signed(pos, 1, end)
                self.spans.append(Span(pos, pos + 1, NULL_MARKER, path, width=1, value=marker))
                pos += 1
                if marker < 0:
                    return pos
            return self.entity(kind.type_, pos, end, path)
        return self.primitive(field.metadata["kafka_type"], pos, end, path)

    def entity(self, entity_type: type, pos: int, end: int, path: str) -> int:
        tagged: dict[int, Any] = {}
        for field in fields(entity_type):
            tag = field.metadata.get("tag")
            if tag is not None:
                tagged[int(tag)] = field
                continue
            pos = self.field(field, pos, end, f"{path}.{field.name}" if path else field.name, tagged=False)
        if entity_type.__flexible__:
            pos = self.tag_section(pos, end, path, tagged)
        return pos

    def tag_section(self, pos: int, end: int, path: str, known: dict[int, Any]) -> int:
        count, after = read_uvarint(self.buf, pos, end)
        self.spans.append(Span(pos, after, TAG_SECTION, path, compact=True, value=count))
        pos = after
        for _ in range(count):
            start = pos
            tag, pos = read_uvarint(self.buf, pos, end)
            size, pos = read_uvarint(self.buf, pos, end)
            field_end = self._take(pos, size, end)
            field = known.get(tag)
            if field is not None:
                self.field(field, pos, field_end, f"{path}.{field.name}" if path else field.name, tagged=True)
            self.spans.append(Span(start, field_end, TAGGED_FIELD, path, value=tag))
            pos = field_end
        return pos


def walk(frame: bytes | bytearray, *, trailing_ok: bool = False) -> Layout:
    """The layout of a request frame (no size prefix); LayoutError if it does not follow its
    schema. Bytes after the body are an error unless ``trailing_ok`` (decoders ignore them)."""
    if len(frame) < 10:
        raise LayoutError("shorter than a request header")
    api_key, api_version = struct.unpack_from(">hh", frame, 0)
    schema = request_schema(api_key, api_version)
    if schema is None:
        raise LayoutError(f"no schema for API {api_key} v{api_version}")
    flexible = bool(schema.__flexible__)
    end = len(frame)
    walker = _Walker(bytes(frame), flexible=False)  # the header's client id is always legacy
    walker.spans += [
        Span(0, 2, NUMBER, "header.api_key", width=2, value=api_key),
        Span(2, 4, NUMBER, "header.api_version", width=2, value=api_version),
        Span(4, 8, NUMBER, "header.correlation_id", width=4, value=struct.unpack_from(">i", frame, 4)[0]),
    ]
    client_id_length, pos = walker.length(8, end, 2, "header.client_id")
    pos += max(client_id_length, 0)
    walker.flexible = flexible
    if flexible:
        pos = walker.tag_section(pos, end, "header", {})
    body_start = pos
    pos = walker.entity(schema, pos, end, "")
    if pos != end and not trailing_ok:
        raise LayoutError(f"{end - pos} bytes after the body")
    return Layout(api_key, api_version, flexible, body_start, tuple(walker.spans))


def walk_response(api_key: int, api_version: int, frame: bytes | bytearray) -> Layout:
    """The layout of a response frame (no size prefix) to a request of ``api_key`` v``api_version``:
    correlation id, the header's tagged fields (flexible versions but ApiVersions, KIP-511), body."""
    try:
        schema = response_schema(api_key, api_version)
    except Exception as exc:  # kio has no such version
        raise LayoutError(f"no response schema for API {api_key} v{api_version}") from exc
    flexible = bool(schema.__flexible__)
    end = len(frame)
    walker = _Walker(bytes(frame), flexible)
    pos = walker._take(0, 4, end)
    if flexible and api_key != API_VERSIONS_KEY:
        pos = walker.tag_section(pos, end, "header", {})
    body_start = pos
    pos = walker.entity(schema, pos, end, "")
    if pos != end:
        raise LayoutError(f"{end - pos} bytes after the body")
    return Layout(api_key, api_version, flexible, body_start, tuple(walker.spans))
