"""Codec for KIP-848 consumer group records in ``__consumer_offsets``, in Kafka 4.3's layout.

A key is ``int16 record type`` then the key fields (non-flexible: int16-length strings); a
value is ``int16 version`` (0) then the fields in the flexible encoding (compact strings and
arrays, a tagged-field section per struct). Types written, as Kafka's coordinator does:

- 3 ConsumerGroupMetadata: key group; value group epoch
- 5 ConsumerGroupMemberMetadata: key group, member; value instance/rack/client id, client
  host, subscribed topic names and regex, rebalance timeout, server assignor, and (tagged
  field 0) a classic member's session timeout and JoinGroup protocols
- 6 ConsumerGroupTargetAssignmentMetadata: key group; value assignment epoch
- 7 ConsumerGroupTargetAssignmentMember: key group, member; value topic id -> partitions
- 8 ConsumerGroupCurrentMemberAssignment: key group, member; value member and previous
  epoch, state, assigned partitions and partitions pending revocation

A null value is a tombstone. Types 4 (partition metadata, deprecated by Kafka 4.1) and 16
(resolved regexes; regexes are resolved again here) are neither written nor needed: a
decoder skips unknown types and unknown tagged fields, so a Kafka-written log replays.
"""

from __future__ import annotations

import struct
import uuid
from dataclasses import dataclass, field

from kbroker.groups.assignors import Assignment
from kbroker.protocol.codec import encode_unsigned_varint, read_unsigned_varint

GROUP_METADATA = 3
MEMBER_METADATA = 5
TARGET_METADATA = 6
TARGET_MEMBER = 7
CURRENT_ASSIGNMENT = 8
RECORD_TYPES = (GROUP_METADATA, MEMBER_METADATA, TARGET_METADATA, TARGET_MEMBER, CURRENT_ASSIGNMENT)
_PER_MEMBER = (MEMBER_METADATA, TARGET_MEMBER, CURRENT_ASSIGNMENT)


@dataclass(slots=True)
class MemberMetadata:
    instance_id: str | None
    rack_id: str | None
    client_id: str
    client_host: str
    subscribed_topic_names: list[str]
    subscribed_topic_regex: str | None
    rebalance_timeout_ms: int
    server_assignor: str | None
    # tagged field 0, ClassicMemberMetadata: (session timeout, [(protocol name, metadata)]) of a
    # classic member of a consumer group; None for a member using the consumer protocol
    classic: tuple[int, list[tuple[str, bytes]]] | None = None


@dataclass(slots=True)
class CurrentAssignment:
    member_epoch: int
    previous_member_epoch: int
    state: int
    assigned: Assignment = field(default_factory=dict)
    pending_revocation: Assignment = field(default_factory=dict)


# ----- keys ----------------------------------------------------------------------------------

def _key_str(text: str) -> bytes:
    data = text.encode()
    return struct.pack(">h", len(data)) + data


def encode_key(record_type: int, group_id: str, member_id: str | None = None) -> bytes:
    key = struct.pack(">h", record_type) + _key_str(group_id)
    return key + _key_str(member_id) if record_type in _PER_MEMBER else key


def decode_key(key: bytes) -> tuple[int, str, str | None] | None:
    """(record type, group id, member id) of a consumer group record key; None for others."""
    (record_type,) = struct.unpack_from(">h", key, 0)
    if record_type not in RECORD_TYPES:
        return None
    (size,) = struct.unpack_from(">h", key, 2)
    group_id = key[4 : 4 + size].decode()
    if record_type not in _PER_MEMBER:
        return record_type, group_id, None
    pos = 4 + size
    (msize,) = struct.unpack_from(">h", key, pos)
    return record_type, group_id, key[pos + 2 : pos + 2 + msize].decode()


# ----- flexible values -----------------------------------------------------------------------

_NO_TAGS = b"\x00"


def _str(text: str | None) -> bytes:
    if text is None:
        return b"\x00"
    data = text.encode()
    return encode_unsigned_varint(len(data) + 1) + data


def _array(items: list[bytes]) -> bytes:
    return encode_unsigned_varint(len(items) + 1) + b"".join(items)


def _topic_partitions(assignment: Assignment) -> bytes:
    return _array([t.bytes + _array([struct.pack(">i", p) for p in sorted(ps)]) + _NO_TAGS
                   for t, ps in sorted(assignment.items(), key=lambda item: str(item[0])) if ps])


def encode_group_metadata(epoch: int) -> bytes:
    return struct.pack(">hi", 0, epoch) + _NO_TAGS


def encode_target_metadata(assignment_epoch: int) -> bytes:
    return struct.pack(">hi", 0, assignment_epoch) + _NO_TAGS


def encode_member_metadata(m: MemberMetadata) -> bytes:
    return b"".join([
        struct.pack(">h", 0), _str(m.instance_id), _str(m.rack_id), _str(m.client_id), _str(m.client_host),
        _array([_str(n) for n in m.subscribed_topic_names]), _str(m.subscribed_topic_regex),
        struct.pack(">i", m.rebalance_timeout_ms), _str(m.server_assignor), _classic_tags(m.classic)])


def _classic_tags(classic: tuple[int, list[tuple[str, bytes]]] | None) -> bytes:
    if classic is None:
        return _NO_TAGS
    session_ms, protocols = classic
    body = struct.pack(">i", session_ms) + _array(
        [_str(name) + encode_unsigned_varint(len(data) + 1) + data + _NO_TAGS for name, data in protocols]) + _NO_TAGS
    return b"\x01\x00" + encode_unsigned_varint(len(body)) + body


def encode_target_member(assignment: Assignment) -> bytes:
    return struct.pack(">h", 0) + _topic_partitions(assignment) + _NO_TAGS


def encode_current_assignment(c: CurrentAssignment) -> bytes:
    return (struct.pack(">hiib", 0, c.member_epoch, c.previous_member_epoch, c.state)
            + _topic_partitions(c.assigned) + _topic_partitions(c.pending_revocation) + _NO_TAGS)


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data, self.pos = data, 0

    def fixed(self, fmt: str) -> int:
        (value,) = struct.unpack_from(fmt, self.data, self.pos)
        self.pos += struct.calcsize(fmt)
        return value

    def uvarint(self) -> int:
        value, self.pos = read_unsigned_varint(self.data, self.pos)
        return value

    def str(self) -> str | None:
        size = self.uvarint() - 1
        if size < 0:
            return None
        text = self.data[self.pos : self.pos + size].decode()
        self.pos += size
        return text

    def skip_tags(self) -> None:
        for _ in range(self.uvarint()):
            self.uvarint()
            self.pos += self.uvarint()

    def topic_partitions(self) -> Assignment:
        result: Assignment = {}
        for _ in range(self.uvarint() - 1):
            topic_id = uuid.UUID(bytes=bytes(self.data[self.pos : self.pos + 16]))
            self.pos += 16
            partitions = {self.fixed(">i") for _ in range(self.uvarint() - 1)}
            self.skip_tags()
            if partitions:
                result[topic_id] = partitions
        return result


def decode_epoch(value: bytes) -> int:
    """The int32 of a ConsumerGroupMetadataValue or ConsumerGroupTargetAssignmentMetadataValue."""
    return struct.unpack_from(">i", value, 2)[0]


def decode_member_metadata(value: bytes) -> MemberMetadata:
    r = _Reader(value)
    r.fixed(">h")
    instance_id, rack_id, client_id, client_host = r.str(), r.str(), r.str() or "", r.str() or ""
    names = [r.str() or "" for _ in range(r.uvarint() - 1)]
    regex = r.str()
    meta = MemberMetadata(instance_id, rack_id, client_id, client_host, names, regex, r.fixed(">i"), r.str())
    for _ in range(r.uvarint()):
        tag, size = r.uvarint(), r.uvarint()
        end = r.pos + size
        if tag == 0:
            session_ms = r.fixed(">i")
            protocols = []
            for _ in range(r.uvarint() - 1):
                name = r.str() or ""
                length = r.uvarint() - 1
                protocols.append((name, bytes(r.data[r.pos : r.pos + length])))
                r.pos += length
                r.skip_tags()
            meta.classic = (session_ms, protocols)
        r.pos = end
    return meta


def decode_target_member(value: bytes) -> Assignment:
    r = _Reader(value)
    r.fixed(">h")
    return r.topic_partitions()


def decode_current_assignment(value: bytes) -> CurrentAssignment:
    r = _Reader(value)
    r.fixed(">h")
    epoch, previous, state = r.fixed(">i"), r.fixed(">i"), r.fixed(">b")
    return CurrentAssignment(epoch, previous, state, r.topic_partitions(), r.topic_partitions())
