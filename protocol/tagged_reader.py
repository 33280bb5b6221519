"""A pure-Python entity reader for what kio's native reader refuses: unknown tagged fields and
int64 durations beyond what a ``datetime.timedelta`` holds.

kio's native reader raises ``KeyError`` on an unknown tag, but the protocol says a receiver
must skip tags it does not understand (KIP-482). It also maps int64 duration fields
(``timedelta_i64``: OffsetCommit v2-4 retention_time_ms, the delegation-token lifetimes) to
``timedelta`` and fails on values beyond about ±8.6e16 ms, where Kafka takes every int64
(INT64_MIN/MAX included). The codec uses the native reader first and falls back to this one on
an unknown tag; schemas with an int64 duration (``has_int64_duration``, cold APIs only) always
come here, and such a value is read as a raw int64 and saturated to the widest ``timedelta``
kio takes. kbroker acts on none of these values beyond their sign (OffsetCommit's retention
time is ignored as Kafka 4 ignores it; delegation tokens are off), so saturation changes no
answer. Field readers for other primitives are still kio's native ones; this module only walks
the structure (nested entities, arrays, nullable structs and tagged-field sections).
"""

from __future__ import annotations

import datetime
from dataclasses import Field, fields
from functools import cache
from typing import Any

from kio._kio_native import get_field_reader, read_int8, read_int32, read_int64, read_unsigned_varint
from kio.serial._implicit_defaults import get_tagged_field_default
from kio.serial._introspect import EntityField, EntityTupleField, classify_field, is_optional
from kio.static.primitive import i64_timedelta_max, i64_timedelta_min, i64Timedelta
from kio.static.protocol import Entity

INT64_DURATION = "timedelta_i64"  # kio's kafka_type of an int64 field it reads as a timedelta
_MS = datetime.timedelta(milliseconds=1)
_SHORTEST_MS = i64_timedelta_min // _MS
_LONGEST_MS = i64_timedelta_max // _MS


def int64_duration(milliseconds: int) -> i64Timedelta:
    """An int64 duration as kio's type, saturated to the range a ``timedelta`` holds."""
    clamped = min(max(milliseconds, _SHORTEST_MS), _LONGEST_MS)
    return i64Timedelta.parse(datetime.timedelta(milliseconds=clamped))


@cache
def has_int64_duration(entity_type: type[Entity]) -> bool:
    """Whether ``entity_type`` or an entity nested in it has an int64 duration field."""
    for field in fields(entity_type):
        if field.metadata.get("kafka_type") == INT64_DURATION:
            return True
        kind = classify_field(field)
        if isinstance(kind, (EntityField, EntityTupleField)) and has_int64_duration(kind.type_):
            return True
    return False


def read_entity_skipping_unknown_tags(entity_type: type[Entity], buf: Any, offset: int) -> tuple[Any, int]:
    """Read one ``entity_type`` at ``offset``; returns (entity, bytes consumed)."""
    start = offset
    flexible: bool = entity_type.__flexible__
    is_header = entity_type.__name__ == "RequestHeader"
    values: dict[str, Any] = {}
    tagged: dict[int, Field[Any]] = {}
    for field in fields(entity_type):
        tag = field.metadata.get("tag")
        if tag is not None:
            tagged[int(tag)] = field
            continue
        value, offset = _read_field(entity_type, field, buf, offset, flexible, is_header, False)
        values[field.name] = value
    if flexible:
        count, size = read_unsigned_varint(buf, offset)
        offset += size
        for _ in range(count):
            tag, size = read_unsigned_varint(buf, offset)
            offset += size
            length, size = read_unsigned_varint(buf, offset)
            offset += size
            tagged_field = tagged.get(tag)
            if tagged_field is not None:
                values[tagged_field.name], _ = _read_field(
                    entity_type, tagged_field, buf, offset, flexible, is_header, True
                )
            offset += length
        for field in tagged.values():
            if field.name not in values:
                values[field.name] = get_tagged_field_default(field)
    return entity_type(**values), offset - start


def _read_field(
    entity_type: type[Entity],
    field: Field[Any],
    buf: Any,
    offset: int,
    flexible: bool,
    is_header: bool,
    is_tagged: bool,
) -> tuple[Any, int]:
    kind = classify_field(field)
    if isinstance(kind, EntityTupleField):
        if flexible:
            raw, size = read_unsigned_varint(buf, offset)
            count = raw - 1
        else:
            count, size = read_int32(buf, offset)
        offset += size
        if count < 0:
            return None, offset
        items = []
        for _ in range(count):
            item, size = read_entity_skipping_unknown_tags(kind.type_, buf, offset)
            items.append(item)
            offset += size
        return tuple(items), offset
    if isinstance(kind, EntityField):
        if is_optional(field) and not is_tagged:
            marker, size = read_int8(buf, offset)  # KIP-893 nullable struct
            offset += size
            if marker < 0:
                return None, offset
        value, size = read_entity_skipping_unknown_tags(kind.type_, buf, offset)
        return value, offset + size
    if field.metadata.get("kafka_type") == INT64_DURATION:
        milliseconds, size = read_int64(buf, offset)
        return int64_duration(milliseconds), offset + size
    reader = get_field_reader(entity_type, field, is_header, is_tagged)
    value, size = reader(buf, offset)
    return value, offset + size


__all__ = ["has_int64_duration", "int64_duration", "read_entity_skipping_unknown_tags"]
