"""A pure-Python entity reader that skips tagged fields it does not know.

kio's native reader raises ``KeyError`` on an unknown tag, but the protocol says a receiver
must skip tags it does not understand (KIP-482). The codec uses the native reader first and
falls back to this one only when that happens, so the common path stays at native speed.
Field readers for primitives are still kio's native ones; this module only walks the
structure (nested entities, arrays, nullable structs and tagged-field sections).
"""

from __future__ import annotations

from dataclasses import Field, fields
from typing import Any

from kio._kio_native import get_field_reader, read_int8, read_int32, read_unsigned_varint
from kio.serial._implicit_defaults import get_tagged_field_default
from kio.serial._introspect import EntityField, EntityTupleField, classify_field, is_optional
from kio.static.protocol import Entity


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
    reader = get_field_reader(entity_type, field, is_header, is_tagged)
    value, size = reader(buf, offset)
    return value, offset + size


__all__ = ["read_entity_skipping_unknown_tags"]
