"""The ``__transaction_state`` records: Kafka's TransactionLogKey / TransactionLogValue v0.

One record per change of a transactional id's state, keyed by the id; the newest record
for a key is the state (a null value is a tombstone). Which partition holds an id is
Kafka's rule: ``abs(javaHashCode(id)) % transaction.state.log.num.partitions``.

Key (big-endian): version int16 (=0) | transactional_id string (int16 length + UTF-8).
Value v0: version int16 (=0) | producer_id int64 | producer_epoch int16 |
transaction_timeout_ms int32 | state int8 | partitions: int32 count of
{topic string | int32 count of partition int32} | last_update_timestamp_ms int64 |
start_timestamp_ms int64.
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


def _string(value: str) -> bytes:
    raw = value.encode()
    return struct.pack(">h", len(raw)) + raw


def encode_key(transactional_id: str) -> bytes:
    return struct.pack(">h", 0) + _string(transactional_id)


def encode_value(m: TransactionMetadata) -> bytes:
    out = bytearray(struct.pack(">hqhib", 0, m.producer_id, m.producer_epoch, m.timeout_ms, m.state))
    by_topic: dict[str, list[int]] = {}
    for topic, partition in sorted(m.partitions):
        by_topic.setdefault(topic, []).append(partition)
    out += struct.pack(">i", len(by_topic))
    for topic, parts in by_topic.items():
        out += _string(topic) + struct.pack(">i", len(parts)) + b"".join(struct.pack(">i", p) for p in parts)
    out += struct.pack(">qq", m.last_update_ms, m.start_ms)
    return bytes(out)


def _read_string(buf: bytes, pos: int) -> tuple[str, int]:
    (length,) = struct.unpack_from(">h", buf, pos)
    return buf[pos + 2 : pos + 2 + length].decode(), pos + 2 + length


def decode(key: bytes, value: bytes | None) -> tuple[str, TransactionMetadata | None]:
    transactional_id, _pos = _read_string(key, 2)
    if value is None:
        return transactional_id, None
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


def read_log(plog: PartitionLog) -> Iterator[tuple[bytes | None, bytes | None]]:
    """(key, value) of every record of a ``__transaction_state`` partition, oldest first."""
    for batch in plog.iter_batches():
        for record in iter_records(batch):
            yield record.key, record.value
