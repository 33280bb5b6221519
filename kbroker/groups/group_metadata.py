"""Codec for group metadata records in ``__consumer_offsets``: Kafka's GroupMetadataKey (v2)
and GroupMetadataValue (written as v3, read v0-3), so the log stays readable as Kafka's.

A key with a null value is a tombstone: the group was deleted.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

GROUP_KEY_VERSION = 2
_VALUE_VERSION = 3


@dataclass(slots=True)
class MemberRecord:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    subscription: bytes
    assignment: bytes


@dataclass(slots=True)
class GroupRecord:
    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp: int
    members: list[MemberRecord] = field(default_factory=list)


def _str(text: str | None) -> bytes:
    if text is None:
        return struct.pack(">h", -1)
    data = text.encode()
    return struct.pack(">h", len(data)) + data


def _bytes(data: bytes) -> bytes:
    return struct.pack(">i", len(data)) + data


def encode_group_key(group: str) -> bytes:
    return struct.pack(">h", GROUP_KEY_VERSION) + _str(group)


def encode_group_value(record: GroupRecord) -> bytes:
    parts = [
        struct.pack(">h", _VALUE_VERSION), _str(record.protocol_type), struct.pack(">i", record.generation),
        _str(record.protocol), _str(record.leader), struct.pack(">qi", record.current_state_timestamp,
                                                                len(record.members)),
    ]
    for m in record.members:
        parts += [_str(m.member_id), _str(m.group_instance_id), _str(m.client_id), _str(m.client_host),
                  struct.pack(">ii", m.rebalance_timeout_ms, m.session_timeout_ms), _bytes(m.subscription),
                  _bytes(m.assignment)]
    return b"".join(parts)


class _Reader:
    """Just enough of Kafka's non-flexible primitive types to read a GroupMetadataValue."""

    def __init__(self, data: bytes) -> None:
        self.data, self.pos = data, 0

    def int(self, fmt: str) -> int:
        (value,) = struct.unpack_from(fmt, self.data, self.pos)
        self.pos += struct.calcsize(fmt)
        return value

    def str(self) -> str | None:
        size = self.int(">h")
        if size < 0:
            return None
        text = self.data[self.pos : self.pos + size].decode()
        self.pos += size
        return text

    def bytes(self) -> bytes:
        size = self.int(">i")
        data = self.data[self.pos : self.pos + max(size, 0)]
        self.pos += max(size, 0)
        return bytes(data)


def decode_group_key(key: bytes) -> str | None:
    """The group id of a GroupMetadataKey, or None for any other record type."""
    if struct.unpack_from(">h", key, 0)[0] != GROUP_KEY_VERSION:
        return None
    return _Reader(key[2:]).str() or ""


def decode_group_value(value: bytes) -> GroupRecord | None:
    """A GroupMetadataValue v0-3; None for a version this broker does not write (v4, flexible)."""
    r = _Reader(value)
    version = r.int(">h")
    if version > _VALUE_VERSION:
        return None
    record = GroupRecord(r.str() or "", r.int(">i"), r.str(), r.str(), r.int(">q") if version >= 2 else -1)
    for _ in range(r.int(">i")):
        member_id = r.str() or ""
        instance = r.str() if version >= 3 else None
        client_id, client_host = r.str() or "", r.str() or ""
        rebalance = r.int(">i") if version >= 1 else -1
        session = r.int(">i")
        if rebalance < 0:
            rebalance = session
        record.members.append(MemberRecord(member_id, instance, client_id, client_host, rebalance, session,
                                           r.bytes(), r.bytes()))
    return record
