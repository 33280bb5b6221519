"""Reject request bodies whose array counts exceed the frame, before kio's native reader runs.

kio's native (Rust) reader preallocates every array from its declared count. A count of
2**32-2 (a 5-byte compact-array varint) makes it request ~34 GB; the Rust allocator then
aborts the whole process — one malformed request would kill the broker. Every element of
every Kafka array takes at least one byte, so a count larger than the bytes left in the frame
is malformed; ``check_array_counts`` walks the body's structure (lengths and counts only, no
values are built) and raises ``BadFrame`` (a ValueError, which ``codec.decode_request_body``
turns into ``MalformedRequest``) for such a count or a field running past the end. It also
refuses a null (count -1) for an array the schema says is not nullable: kio would return None
there and the handler would fail iterating it; Kafka rejects such a request as malformed.
Known tagged fields are walked inside their size; unknown ones are skipped.
"""

from __future__ import annotations

import struct
from dataclasses import fields
from functools import cache
from typing import Any

from kio.serial._introspect import (
    EntityField,
    EntityTupleField,
    PrimitiveTupleField,
    classify_field,
    is_optional,
)
from kio.static.protocol import Entity

_FIXED = {
    "bool": 1, "int8": 1, "int16": 2, "uint16": 2, "int32": 4, "timedelta_i32": 4,
    "int64": 8, "timedelta_i64": 8, "float64": 8, "uuid": 16,
}
_LEGACY_LENGTH = {"string": 2, "bytes": 4, "records": 4}  # int16 / int32 length prefixes
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")



class BadFrame(ValueError):
    """The body cannot be what its schema says (reported as MalformedRequest by the codec)."""


# Plan steps: ("fixed", size) | ("var", legacy_width) | ("array", element, nullable)
# | ("entity", type, nullable)
# where element is ("fixed", size) | ("var", width) | ("entity", type, False).
Step = tuple[Any, ...]


@cache
def _plan(entity_type: type[Entity]) -> tuple[tuple[Step, ...], dict[int, Step]]:
    steps: list[Step] = []
    tagged: dict[int, Step] = {}
    for field in fields(entity_type):
        kind = classify_field(field)
        if isinstance(kind, EntityTupleField):
            size = _fixed_size(kind.type_)
            element: Step = ("entity", kind.type_, False) if size is None else ("fixed", size)
            step: Step = ("array", element, is_optional(field))
        elif isinstance(kind, EntityField):
            step = ("entity", kind.type_, is_optional(field))
        else:
            kafka_type = field.metadata["kafka_type"]
            element = ("fixed", _FIXED[kafka_type]) if kafka_type in _FIXED else ("var", _LEGACY_LENGTH[kafka_type])
            step = ("array", element, is_optional(field)) if isinstance(kind, PrimitiveTupleField) else element
        tag = field.metadata.get("tag")
        if tag is None:
            if step[0] == "fixed" and steps and steps[-1][0] == "fixed":
                steps[-1] = ("fixed", steps[-1][1] + step[1])  # one bounds check per fixed run
            else:
                steps.append(step)
        else:
            # A tagged struct has no nullability marker: absence is the null.
            tagged[int(tag)] = ("entity", step[1], False) if step[0] == "entity" else step
    return tuple(steps), tagged


@cache
def _fixed_size(entity_type: type[Entity]) -> int | None:
    """The wire size of a legacy (non-flexible) entity made only of fixed-size fields."""
    steps, _tagged = _plan(entity_type)
    if entity_type.__flexible__ or any(step[0] != "fixed" for step in steps):
        return None
    size: int = sum(step[1] for step in steps)
    return size


def _uvarint(buf: memoryview, pos: int, end: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if pos >= end:
            raise BadFrame("truncated varint")
        byte = buf[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, pos
        shift += 7
        if shift > 28:
            raise BadFrame("varint too long")


def _take(pos: int, n: int, end: int) -> int:
    if n < 0 or pos + n > end:
        raise BadFrame("field runs past the end of the frame")
    return pos + n


def _walk_step(step: Step, buf: memoryview, pos: int, end: int, flexible: bool) -> int:
    kind = step[0]
    if kind == "fixed":
        return _take(pos, step[1], end)
    if kind == "var":
        if flexible:
            n, pos = _uvarint(buf, pos, end)
            return _take(pos, n - 1, end) if n else pos
        width = step[1]
        pos = _take(pos, width, end)
        n = (_I16 if width == 2 else _I32).unpack_from(buf, pos - width)[0]
        return _take(pos, n, end) if n >= 0 else pos
    if kind == "entity":
        if step[2]:
            pos = _take(pos, 1, end)
            if buf[pos - 1] >= 0x80:  # int8 -1: null struct
                return pos
        return _walk_entity(step[1], buf, pos, end)
    # array
    if flexible:
        n, pos = _uvarint(buf, pos, end)
        count = n - 1
    else:
        pos = _take(pos, 4, end)
        count = _I32.unpack_from(buf, pos - 4)[0]
    if count > end - pos:
        raise BadFrame(f"array of {count} items declared with {end - pos} bytes left")
    if count < 0 and not step[2]:
        # kio would hand the handler None for a non-nullable array; Kafka rejects the request.
        raise BadFrame("non-nullable array is null")
    element = step[1]
    if element[0] == "fixed":
        return _take(pos, count * element[1], end) if count > 0 else pos
    for _ in range(count):
        pos = _walk_step(element, buf, pos, end, flexible)
    return pos


def _walk_entity(entity_type: type[Entity], buf: memoryview, pos: int, end: int) -> int:
    steps, tagged = _plan(entity_type)
    flexible = entity_type.__flexible__
    for step in steps:
        pos = _walk_step(step, buf, pos, end, flexible)
    if flexible:
        count, pos = _uvarint(buf, pos, end)
        for _ in range(count):
            tag, pos = _uvarint(buf, pos, end)
            size, pos = _uvarint(buf, pos, end)
            field_end = _take(pos, size, end)
            tagged_step = tagged.get(tag)
            if tagged_step is not None:
                _walk_step(tagged_step, buf, pos, field_end, flexible)
            pos = field_end
    return pos


def check_array_counts(entity_type: type[Entity], buf: memoryview, offset: int) -> None:
    """Raise BadFrame if an array in the body claims more items than bytes remain."""
    _walk_entity(entity_type, buf, offset, len(buf))
