"""The ``__transaction_state`` records: Kafka's TransactionLogKey / TransactionLogValue v0.

One record per change of a transactional id's state, keyed by the id; the newest record
for a key is the state (a null value is a tombstone). Which partition holds an id is
Kafka's rule: ``abs(javaHashCode(id)) % transaction.state.log.num.partitions``.

Key (big-endian): version int16 (=0) | transactional_id string (int16 length + UTF-8).
Value v0: version int16 (=0) | producer_id int64 | producer_epoch int16 |
transaction_timeout_ms int32 | state int8 | partitions: int32 count of
{topic string | int32 count of partition int32} | last_update_timestamp_ms int64 |
start_timestamp_ms int64.
Value v1 (flexible, written once an id is used with transaction version 2): the same fields
with compact strings/arrays and empty tagged fields per topic, then tagged fields
PreviousProducerId (tag 0, int64), NextProducerId (tag 1, int64) and
ClientTransactionVersion (tag 2, int16), each present only when not its default (-1, -1, 0).
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass, field
from enum import IntEnum

from kbroker.protocol.record_builder import build_batch
from kbroker.protocol.records import iter_records
from kbroker.storage.log import PartitionLog

TRANSACTION_STATE_TOPIC = "__transaction_state"
# Kafka's topic configs for it: compacted, min ISR from the broker setting, 100 MiB segments.
TRANSACTION_STATE_TOPIC_CONFIGS = {"cleanup.policy": "compact", "compression.type": "uncompressed"}


class TransactionState(IntEnum):
    """Kafka's TransactionState ids (as stored) and names (as DescribeTransactions shows)."""

    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7

    @property
    def display(self) -> str:
        return "".join(part.capitalize() for part in self.name.split("_"))


def java_hash_code(text: str) -> int:
    """Java's String.hashCode (UTF-16 code units, 32-bit wrap), for Kafka's partition choice."""
    h = 0
    data = text.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + int.from_bytes(data[i : i + 2], "big")) & 0xFFFFFFFF
    return h - 2**32 if h >= 2**31 else h


def partition_for(key: str, partitions: int) -> int:
    h = java_hash_code(key)
    return (0 if h == -(2**31) else abs(h)) % partitions


@dataclass(slots=True)
class TransactionMetadata:
    """One transactional id's state as the coordinator holds and logs it."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: TransactionState = TransactionState.EMPTY
    partitions: set[tuple[str, int]] = field(default_factory=set)
    last_update_ms: int = -1
    start_ms: int = -1
    previous_producer_id: int = -1  # the id before an epoch overflow (TV2 EndTxn retries)
    next_producer_id: int = -1  # the id to switch to when this transaction completes (TV2 overflow)
    client_transaction_version: int = 0

    @property
    def flexible(self) -> bool:
        return (self.previous_producer_id, self.next_producer_id, self.client_transaction_version) != (-1, -1, 0)


def _string(value: str) -> bytes:
    raw = value.encode()
    return struct.pack(">h", len(raw)) + raw


def encode_key(transactional_id: str) -> bytes:
    return struct.pack(">h", 0) + _string(transactional_id)


def _uvarint(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _read_uvarint(buf: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = buf[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, pos
        shift += 7


def encode_value(m: TransactionMetadata) -> bytes:
    flexible = m.flexible
    out = bytearray(struct.pack(">hqhib", int(flexible), m.producer_id, m.producer_epoch, m.timeout_ms, m.state))
    by_topic: dict[str, list[int]] = {}
    for topic, partition in sorted(m.partitions):
        by_topic.setdefault(topic, []).append(partition)
    if not flexible:
        out += struct.pack(">i", len(by_topic))
        for topic, parts in by_topic.items():
            out += _string(topic) + struct.pack(">i", len(parts)) + b"".join(struct.pack(">i", p) for p in parts)
        out += struct.pack(">qq", m.last_update_ms, m.start_ms)
        return bytes(out)
    out += _uvarint(len(by_topic) + 1)
    for topic, parts in by_topic.items():
        raw = topic.encode()
        out += _uvarint(len(raw) + 1) + raw + _uvarint(len(parts) + 1)
        out += b"".join(struct.pack(">i", p) for p in parts) + b"\x00"
    out += struct.pack(">qq", m.last_update_ms, m.start_ms)
    tags = []
    if m.previous_producer_id != -1:
        tags.append((0, struct.pack(">q", m.previous_producer_id)))
    if m.next_producer_id != -1:
        tags.append((1, struct.pack(">q", m.next_producer_id)))
    if m.client_transaction_version != 0:
        tags.append((2, struct.pack(">h", m.client_transaction_version)))
    out += _uvarint(len(tags))
    for tag, data in tags:
        out += _uvarint(tag) + _uvarint(len(data)) + data
    return bytes(out)


def _skip_tagged_fields(buf: bytes, pos: int) -> int:
    count, pos = _read_uvarint(buf, pos)
    for _ in range(count):
        _tag, pos = _read_uvarint(buf, pos)
        size, pos = _read_uvarint(buf, pos)
        pos += size
    return pos


def _decode_v1(transactional_id: str, value: bytes) -> TransactionMetadata:
    _version, pid, epoch, timeout, state = struct.unpack_from(">hqhib", value, 0)
    pos = 17
    topics, pos = _read_uvarint(value, pos)
    partitions: set[tuple[str, int]] = set()
    for _ in range(max(topics - 1, 0)):
        length, pos = _read_uvarint(value, pos)
        topic = value[pos : pos + length - 1].decode()
        pos += length - 1
        count, pos = _read_uvarint(value, pos)
        for _p in range(count - 1):
            partitions.add((topic, struct.unpack_from(">i", value, pos)[0]))
            pos += 4
        pos = _skip_tagged_fields(value, pos)
    last_update, start = struct.unpack_from(">qq", value, pos)
    m = TransactionMetadata(transactional_id, pid, epoch, timeout, TransactionState(state), partitions,
                            last_update, start)
    count, pos = _read_uvarint(value, pos + 16)
    for _ in range(count):
        tag, pos = _read_uvarint(value, pos)
        size, pos = _read_uvarint(value, pos)
        if tag == 0:
            (m.previous_producer_id,) = struct.unpack_from(">q", value, pos)
        elif tag == 1:
            (m.next_producer_id,) = struct.unpack_from(">q", value, pos)
        elif tag == 2:
            (m.client_transaction_version,) = struct.unpack_from(">h", value, pos)
        pos += size
    return m


def _read_string(buf: bytes, pos: int) -> tuple[str, int]:
    (length,) = struct.unpack_from(">h", buf, pos)
    return buf[pos + 2 : pos + 2 + length].decode(), pos + 2 + length


def decode(key: bytes, value: bytes | None) -> tuple[str, TransactionMetadata | None]:
    transactional_id, _pos = _read_string(key, 2)
    if value is None:
        return transactional_id, None
    if struct.unpack_from(">h", value, 0)[0] >= 1:
        return transactional_id, _decode_v1(transactional_id, value)
    _version, pid, epoch, timeout, state = struct.unpack_from(">hqhib", value, 0)
    pos = 17
    (topics,) = struct.unpack_from(">i", value, pos)
    pos += 4
    partitions: set[tuple[str, int]] = set()
    for _ in range(max(topics, 0)):
        topic, pos = _read_string(value, pos)
        (count,) = struct.unpack_from(">i", value, pos)
        pos += 4
        for _p in range(count):
            partitions.add((topic, struct.unpack_from(">i", value, pos)[0]))
            pos += 4
    last_update, start = struct.unpack_from(">qq", value, pos)
    return transactional_id, TransactionMetadata(
        transactional_id, pid, epoch, timeout, TransactionState(state), partitions, last_update, start
    )


def record_batch(m: TransactionMetadata, now_ms: int) -> memoryview:
    """A writable one-record batch holding ``m`` (what the coordinator appends)."""
    return memoryview(bytearray(build_batch([(encode_key(m.transactional_id), encode_value(m))],
                                            base_timestamp=now_ms)))


def tombstone_batch(transactional_id: str, now_ms: int) -> memoryview:
    """A writable one-record batch with the id's key and a null value: the id is forgotten."""
    return memoryview(bytearray(build_batch([(encode_key(transactional_id), None)], base_timestamp=now_ms)))


def read_log(plog: PartitionLog) -> Iterator[tuple[bytes | None, bytes | None]]:
    """(key, value) of every record of a ``__transaction_state`` partition, oldest first."""
    for batch in plog.iter_batches():
        for record in iter_records(batch):
            yield record.key, record.value
