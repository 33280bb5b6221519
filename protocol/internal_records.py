"""Internal record formats: the keys and values kbroker writes to ``__consumer_offsets`` and
``__transaction_state``, byte for byte Kafka's, so either broker can read the other's logs.

One ``Reader`` and one ``Writer`` of Kafka's primitive types serve every format: fixed-width
big-endian integers, int16-length strings and int32-length bytes (the non-flexible versions),
and unsigned varints, compact strings, compact arrays and tagged fields (the flexible ones).
A null value is a tombstone in both topics; these functions see only non-null values.

``__consumer_offsets`` keys start with an int16 that tells the record type:

- 0, 1 OffsetCommitKey (group, topic, partition); value OffsetCommitValue, written as v4 (flexible,
  the topic id in tagged field 0 when the commit named one) as Kafka 4.3 writes it, read v0-4
- 2 GroupMetadataKey (group); value GroupMetadataValue, written as v3, read v0-3
- 3 ConsumerGroupMetadata (group); value group epoch
- 5 ConsumerGroupMemberMetadata (group, member); value instance/rack/client id, client host,
  subscribed topic names and regex, rebalance timeout, server assignor, and (tagged field 0)
  a classic member's session timeout and JoinGroup protocols
- 6 ConsumerGroupTargetAssignmentMetadata (group); value assignment epoch
- 7 ConsumerGroupTargetAssignmentMember (group, member); value topic id -> partitions
- 8 ConsumerGroupCurrentMemberAssignment (group, member); value member and previous epoch,
  state, assigned partitions and partitions pending revocation

Consumer group values are the flexible encoding at version 0, as Kafka 4.3 writes them. Types 4
(partition metadata, deprecated by Kafka 4.1) and 16 (resolved regexes) are not written; their
keys decode to None, as unknown tagged fields are skipped, so a Kafka-written log replays.

``__transaction_state``: TransactionLogKey v0 (transactional id) and TransactionLogValue v1
(flexible), as Kafka 4.3 writes it with transaction.version 1 or 2 finalized (the default):
tagged fields PreviousProducerId (0), NextProducerId (1) and ClientTransactionVersion (2) are
present only when not their defaults (-1, -1, 0). v0 (Kafka before transaction version 1) is
still read.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from uuid import UUID

from kbroker.protocol.codec import MalformedRequest, encode_unsigned_varint, read_unsigned_varint

Partitions = dict[UUID, set[int]]  # topic id -> partitions (a consumer group assignment)


# ----- primitives ----------------------------------------------------------------------------

class Reader:
    """Reads Kafka's primitive types from ``data``; ValueError when the data ends too soon."""

    def __init__(self, data: bytes | memoryview) -> None:
        self.data, self.pos = bytes(data), 0

    @property
    def remaining(self) -> int:
        return len(self.data) - self.pos

    def _take(self, size: int) -> bytes:
        if size < 0 or self.pos + size > len(self.data):
            raise ValueError(f"truncated: {size} bytes wanted at {self.pos} of {len(self.data)}")
        chunk = self.data[self.pos : self.pos + size]
        self.pos += size
        return chunk

    def _fixed(self, fmt: str) -> int:
        (value,) = struct.unpack(fmt, self._take(struct.calcsize(fmt)))
        return int(value)

    def int8(self) -> int:
        return self._fixed(">b")

    def int16(self) -> int:
        return self._fixed(">h")

    def int32(self) -> int:
        return self._fixed(">i")

    def int64(self) -> int:
        return self._fixed(">q")

    def uuid(self) -> UUID:
        return UUID(bytes=self._take(16))

    def uvarint(self) -> int:
        try:
            value, self.pos = read_unsigned_varint(self.data, self.pos)
        except MalformedRequest as exc:  # one error for all malformed internal records
            raise ValueError(str(exc)) from None
        return value

    def string(self) -> str | None:
        """An int16-length string (-1: null)."""
        size = self.int16()
        return None if size < 0 else self._take(size).decode()

    def blob(self) -> bytes:
        """Kafka's BYTES: int32-length bytes (-1, null, reads as empty)."""
        size = self.int32()
        return b"" if size < 0 else self._take(size)

    def compact_string(self) -> str | None:
        size = self.uvarint() - 1
        return None if size < 0 else self._take(size).decode()

    def compact_blob(self) -> bytes:
        """Kafka's COMPACT_BYTES (null reads as empty)."""
        size = self.uvarint() - 1
        return b"" if size < 0 else self._take(size)

    def compact_count(self) -> int:
        """The length of a compact array (a null array counts as empty)."""
        return max(self.uvarint() - 1, 0)

    def tagged_fields(self) -> dict[int, Reader]:
        """A tagged-field section: each tag's bytes, to read the fields this version knows."""
        fields: dict[int, Reader] = {}
        for _ in range(self.uvarint()):
            tag = self.uvarint()
            fields[tag] = Reader(self._take(self.uvarint()))
        return fields


class Writer:
    """Builds Kafka's primitive types into one byte string (``bytes()``)."""

    def __init__(self) -> None:
        self.out = bytearray()

    def __bytes__(self) -> bytes:
        return bytes(self.out)

    def fixed(self, fmt: str, *values: int) -> Writer:
        self.out += struct.pack(fmt, *values)
        return self

    def int16(self, value: int) -> Writer:
        return self.fixed(">h", value)

    def int32(self, value: int) -> Writer:
        return self.fixed(">i", value)

    def int64(self, value: int) -> Writer:
        return self.fixed(">q", value)

    def uvarint(self, value: int) -> Writer:
        self.out += encode_unsigned_varint(value)
        return self

    def raw(self, data: bytes) -> Writer:
        self.out += data
        return self

    def string(self, text: str | None) -> Writer:
        if text is None:
            return self.int16(-1)
        data = text.encode()
        return self.int16(len(data)).raw(data)

    def blob(self, data: bytes) -> Writer:
        return self.int32(len(data)).raw(data)

    def compact_string(self, text: str | None) -> Writer:
        if text is None:
            return self.uvarint(0)
        data = text.encode()
        return self.uvarint(len(data) + 1).raw(data)

    def compact_blob(self, data: bytes) -> Writer:
        return self.uvarint(len(data) + 1).raw(data)

    def compact_count(self, count: int) -> Writer:
        return self.uvarint(count + 1)

    def tagged_fields(self, fields: list[tuple[int, bytes]]) -> Writer:
        """A tagged-field section (ascending tags; empty: the single byte 0)."""
        self.uvarint(len(fields))
        for tag, data in fields:
            self.uvarint(tag).uvarint(len(data)).raw(data)
        return self


def _no_tags(w: Writer) -> Writer:
    return w.tagged_fields([])


# ----- __consumer_offsets: offset commits --------------------------------------------------------

OFFSET_COMMIT_KEY_VERSION = 1
OFFSET_COMMIT_VALUE_VERSION = 4
GROUP_METADATA_KEY_VERSION = 2
GROUP_METADATA_VALUE_VERSION = 3


@dataclass(slots=True, frozen=True)
class OffsetCommitKey:
    group: str
    topic: str
    partition: int


@dataclass(slots=True, frozen=True)
class OffsetCommitValue:
    offset: int
    leader_epoch: int
    metadata: str
    commit_timestamp: int
    topic_id: UUID | None = None  # the id an OffsetCommit v10+ named the topic by (v4 only)


def encode_offset_commit_key(key: OffsetCommitKey) -> bytes:
    return bytes(Writer().int16(OFFSET_COMMIT_KEY_VERSION).string(key.group).string(key.topic)
                 .int32(key.partition))


def decode_offset_commit_key(key: bytes) -> OffsetCommitKey | None:
    """An OffsetCommitKey (v0 or v1, the same layout); None for every other record type."""
    r = Reader(key)
    if r.int16() not in (0, 1):
        return None
    return OffsetCommitKey(r.string() or "", r.string() or "", r.int32())


def encode_offset_commit_value(value: OffsetCommitValue) -> bytes:
    """OffsetCommitValue v4: offset, leader epoch, compact metadata, commit timestamp, and the
    topic id as tagged field 0 when there is one (Kafka leaves out a zero id)."""
    w = (Writer().int16(OFFSET_COMMIT_VALUE_VERSION).int64(value.offset).int32(value.leader_epoch)
         .compact_string(value.metadata).int64(value.commit_timestamp))
    tags = [(0, value.topic_id.bytes)] if value.topic_id is not None and value.topic_id.int else []
    return bytes(w.tagged_fields(tags))


def decode_offset_commit_value(value: bytes) -> OffsetCommitValue:
    """OffsetCommitValue v0-4: v1 adds an expire timestamp (dropped again in v2, ignored
    here), v3 the leader epoch (-1 before), v4 is flexible with the topic id as tag 0."""
    r = Reader(value)
    version = r.int16()
    offset = r.int64()
    leader_epoch = r.int32() if version >= 3 else -1
    metadata = (r.compact_string() if version >= 4 else r.string()) or ""
    commit_timestamp = r.int64()
    if version == 1:
        r.int64()  # expire timestamp: kbroker applies offsets.retention.minutes instead
    topic_id = None
    if version >= 4:
        tag = r.tagged_fields().get(0)
        if tag is not None:
            topic_id = tag.uuid()
    return OffsetCommitValue(offset, leader_epoch, metadata, commit_timestamp, topic_id)


# ----- __consumer_offsets: classic group metadata ------------------------------------------------

@dataclass(slots=True)
class GroupMemberValue:
    """One member in a GroupMetadataValue."""

    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    subscription: bytes
    assignment: bytes


@dataclass(slots=True)
class GroupMetadataValue:
    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp: int
    members: list[GroupMemberValue] = field(default_factory=list)


def encode_group_metadata_key(group: str) -> bytes:
    return bytes(Writer().int16(GROUP_METADATA_KEY_VERSION).string(group))


def decode_group_metadata_key(key: bytes) -> str | None:
    """The group id of a GroupMetadataKey, or None for any other record type."""
    r = Reader(key)
    if r.int16() != GROUP_METADATA_KEY_VERSION:
        return None
    return r.string() or ""


def encode_group_metadata_value(record: GroupMetadataValue) -> bytes:
    w = (Writer().int16(GROUP_METADATA_VALUE_VERSION).string(record.protocol_type).int32(record.generation)
         .string(record.protocol).string(record.leader).int64(record.current_state_timestamp)
         .int32(len(record.members)))
    for m in record.members:
        (w.string(m.member_id).string(m.group_instance_id).string(m.client_id).string(m.client_host)
         .int32(m.rebalance_timeout_ms).int32(m.session_timeout_ms).blob(m.subscription).blob(m.assignment))
    return bytes(w)


def decode_group_metadata_value(value: bytes) -> GroupMetadataValue | None:
    """A GroupMetadataValue v0-3; None for a version this broker does not write (v4, flexible)."""
    r = Reader(value)
    version = r.int16()
    if version > GROUP_METADATA_VALUE_VERSION:
        return None
    record = GroupMetadataValue(r.string() or "", r.int32(), r.string(), r.string(),
                                r.int64() if version >= 2 else -1)
    for _ in range(r.int32()):
        member_id = r.string() or ""
        instance = r.string() if version >= 3 else None
        client_id, client_host = r.string() or "", r.string() or ""
        rebalance = r.int32() if version >= 1 else -1
        session = r.int32()
        if rebalance < 0:  # v0 has no rebalance timeout: Kafka takes the session timeout
            rebalance = session
        record.members.append(GroupMemberValue(member_id, instance, client_id, client_host, rebalance, session,
                                               r.blob(), r.blob()))
    return record


# ----- __consumer_offsets: KIP-848 consumer group records --------------------------------------

CONSUMER_GROUP_METADATA = 3
CONSUMER_MEMBER_METADATA = 5
CONSUMER_TARGET_METADATA = 6
CONSUMER_TARGET_MEMBER = 7
CONSUMER_CURRENT_ASSIGNMENT = 8
CONSUMER_GROUP_RECORD_TYPES = (CONSUMER_GROUP_METADATA, CONSUMER_MEMBER_METADATA, CONSUMER_TARGET_METADATA,
                               CONSUMER_TARGET_MEMBER, CONSUMER_CURRENT_ASSIGNMENT)
_PER_MEMBER = (CONSUMER_MEMBER_METADATA, CONSUMER_TARGET_MEMBER, CONSUMER_CURRENT_ASSIGNMENT)


@dataclass(slots=True)
class ConsumerMemberMetadata:
    instance_id: str | None
    rack_id: str | None
    client_id: str
    client_host: str
    subscribed_topic_names: list[str]
    subscribed_topic_regex: str | None
    rebalance_timeout_ms: int
    server_assignor: str | None
    # a classic member's (session timeout, JoinGroup protocols); None for a consumer-protocol member
    classic: tuple[int, list[tuple[str, bytes]]] | None = None


@dataclass(slots=True)
class ConsumerMemberAssignment:
    """ConsumerGroupCurrentMemberAssignmentValue; ``state`` is Kafka's MemberState code."""

    member_epoch: int
    previous_member_epoch: int
    state: int
    assigned: Partitions = field(default_factory=dict)
    pending_revocation: Partitions = field(default_factory=dict)


def encode_consumer_group_key(record_type: int, group_id: str, member_id: str | None = None) -> bytes:
    w = Writer().int16(record_type).string(group_id)
    return bytes(w.string(member_id) if record_type in _PER_MEMBER else w)


def decode_consumer_group_key(key: bytes) -> tuple[int, str, str | None] | None:
    """(record type, group id, member id) of a consumer group record key; None for others."""
    r = Reader(key)
    record_type = r.int16()
    if record_type not in CONSUMER_GROUP_RECORD_TYPES:
        return None
    group_id = r.string() or ""
    return record_type, group_id, (r.string() or "") if record_type in _PER_MEMBER else None


def _write_partitions(w: Writer, assignment: Partitions) -> None:
    topics = [(t, ps) for t, ps in sorted(assignment.items(), key=lambda item: str(item[0])) if ps]
    w.compact_count(len(topics))
    for topic_id, ps in topics:
        w.raw(topic_id.bytes).compact_count(len(ps))
        for p in sorted(ps):
            w.int32(p)
        _no_tags(w)


def _read_partitions(r: Reader) -> Partitions:
    result: Partitions = {}
    for _ in range(r.compact_count()):
        topic_id = r.uuid()
        partitions = {r.int32() for _ in range(r.compact_count())}
        r.tagged_fields()
        if partitions:
            result[topic_id] = partitions
    return result


def encode_consumer_epoch(epoch: int) -> bytes:
    """ConsumerGroupMetadataValue (group epoch) or ConsumerGroupTargetAssignmentMetadataValue
    (assignment epoch): the same layout."""
    return bytes(_no_tags(Writer().int16(0).int32(epoch)))


def decode_consumer_epoch(value: bytes) -> int:
    r = Reader(value)
    r.int16()
    return r.int32()


def encode_consumer_member_metadata(m: ConsumerMemberMetadata) -> bytes:
    w = (Writer().int16(0).compact_string(m.instance_id).compact_string(m.rack_id).compact_string(m.client_id)
         .compact_string(m.client_host).compact_count(len(m.subscribed_topic_names)))
    for name in m.subscribed_topic_names:
        w.compact_string(name)
    w.compact_string(m.subscribed_topic_regex).int32(m.rebalance_timeout_ms).compact_string(m.server_assignor)
    if m.classic is None:
        return bytes(_no_tags(w))
    session_ms, protocols = m.classic
    classic = Writer().int32(session_ms).compact_count(len(protocols))
    for name, data in protocols:
        _no_tags(classic.compact_string(name).compact_blob(data))
    return bytes(w.tagged_fields([(0, bytes(_no_tags(classic)))]))


def decode_consumer_member_metadata(value: bytes) -> ConsumerMemberMetadata:
    r = Reader(value)
    r.int16()
    instance_id, rack_id, client_id, client_host = (r.compact_string(), r.compact_string(),
                                                    r.compact_string() or "", r.compact_string() or "")
    names = [r.compact_string() or "" for _ in range(r.compact_count())]
    meta = ConsumerMemberMetadata(instance_id, rack_id, client_id, client_host, names, r.compact_string(),
                                  r.int32(), r.compact_string())
    classic = r.tagged_fields().get(0)
    if classic is not None:
        session_ms = classic.int32()
        protocols: list[tuple[str, bytes]] = []
        for _ in range(classic.compact_count()):
            protocols.append((classic.compact_string() or "", classic.compact_blob()))
            classic.tagged_fields()
        meta.classic = (session_ms, protocols)
    return meta


def encode_consumer_target_member(assignment: Partitions) -> bytes:
    w = Writer().int16(0)
    _write_partitions(w, assignment)
    return bytes(_no_tags(w))


def decode_consumer_target_member(value: bytes) -> Partitions:
    r = Reader(value)
    r.int16()
    return _read_partitions(r)


def encode_consumer_member_assignment(c: ConsumerMemberAssignment) -> bytes:
    w = Writer().int16(0).int32(c.member_epoch).int32(c.previous_member_epoch).fixed(">b", c.state)
    _write_partitions(w, c.assigned)
    _write_partitions(w, c.pending_revocation)
    return bytes(_no_tags(w))


def decode_consumer_member_assignment(value: bytes) -> ConsumerMemberAssignment:
    r = Reader(value)
    r.int16()
    epoch, previous, state = r.int32(), r.int32(), r.int8()
    return ConsumerMemberAssignment(epoch, previous, state, _read_partitions(r), _read_partitions(r))


# ----- __transaction_state ----------------------------------------------------------------------

@dataclass(slots=True)
class TransactionLogValue:
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: int  # Kafka's TransactionState id
    partitions: set[tuple[str, int]]
    last_update_ms: int
    start_ms: int
    previous_producer_id: int = -1
    next_producer_id: int = -1
    client_transaction_version: int = 0


def encode_transaction_key(transactional_id: str) -> bytes:
    return bytes(Writer().int16(0).string(transactional_id))


def decode_transaction_key(key: bytes) -> str:
    r = Reader(key)
    r.int16()
    return r.string() or ""


TRANSACTION_VALUE_VERSION = 1
EMPTY_STATE = 0  # TransactionState.EMPTY's id


def encode_transaction_value(m: TransactionLogValue) -> bytes:
    """TransactionLogValue v1 (Kafka 4.3's with transaction.version >= 1, whatever the client's);
    an Empty state's partitions are a null array, as Kafka writes them."""
    w = Writer().fixed(">hqhib", TRANSACTION_VALUE_VERSION, m.producer_id, m.producer_epoch, m.timeout_ms, m.state)
    by_topic: dict[str, list[int]] = {}
    for topic, partition in sorted(m.partitions):
        by_topic.setdefault(topic, []).append(partition)
    if m.state == EMPTY_STATE and not by_topic:
        w.uvarint(0)  # null
    else:
        w.compact_count(len(by_topic))
    for topic, parts in by_topic.items():
        w.compact_string(topic).compact_count(len(parts))
        for p in parts:
            w.int32(p)
        _no_tags(w)
    w.int64(m.last_update_ms).int64(m.start_ms)
    tags: list[tuple[int, bytes]] = []
    if m.previous_producer_id != -1:
        tags.append((0, struct.pack(">q", m.previous_producer_id)))
    if m.next_producer_id != -1:
        tags.append((1, struct.pack(">q", m.next_producer_id)))
    if m.client_transaction_version != 0:
        tags.append((2, struct.pack(">h", m.client_transaction_version)))
    return bytes(w.tagged_fields(tags))


def decode_transaction_value(value: bytes) -> TransactionLogValue:
    """TransactionLogValue v0 or v1."""
    r = Reader(value)
    flexible = r.int16() >= 1
    producer_id, epoch, timeout, state = r.int64(), r.int16(), r.int32(), r.int8()
    partitions: set[tuple[str, int]] = set()
    for _ in range(r.compact_count() if flexible else max(r.int32(), 0)):
        topic = (r.compact_string() if flexible else r.string()) or ""
        for _p in range(r.compact_count() if flexible else max(r.int32(), 0)):
            partitions.add((topic, r.int32()))
        if flexible:
            r.tagged_fields()
    m = TransactionLogValue(producer_id, epoch, timeout, state, partitions, r.int64(), r.int64())
    if flexible:
        tags = r.tagged_fields()
        if 0 in tags:
            m.previous_producer_id = tags[0].int64()
        if 1 in tags:
            m.next_producer_id = tags[1].int64()
        if 2 in tags:
            m.client_transaction_version = tags[2].int16()
    return m
