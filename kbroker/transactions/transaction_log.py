"""The ``__transaction_state`` records: one transactional id's state per record, and its partition.

One record per change of a transactional id's state, keyed by the id; the newest record
for a key is the state (a null value is a tombstone). Which partition holds an id is
Kafka's rule: ``abs(javaHashCode(id)) % transaction.state.log.num.partitions``.

The key and value layouts (TransactionLogKey v0, TransactionLogValue v0 and, once an id is used
with transaction version 2, v1) are in ``protocol/internal_records.py``; here the coordinator's
TransactionMetadata is converted to and from them.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from enum import IntEnum

from kbroker.protocol.internal_records import (
    TransactionLogValue,
    decode_transaction_key,
    decode_transaction_value,
    encode_transaction_key,
    encode_transaction_value,
)
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


def encode_key(transactional_id: str) -> bytes:
    return encode_transaction_key(transactional_id)


def encode_value(m: TransactionMetadata) -> bytes:
    return encode_transaction_value(TransactionLogValue(
        m.producer_id, m.producer_epoch, m.timeout_ms, m.state, m.partitions, m.last_update_ms, m.start_ms,
        m.previous_producer_id, m.next_producer_id, m.client_transaction_version))


def decode(key: bytes, value: bytes | None) -> tuple[str, TransactionMetadata | None]:
    """The transactional id of a record, and its state (None: a tombstone)."""
    transactional_id = decode_transaction_key(key)
    if value is None:
        return transactional_id, None
    v = decode_transaction_value(value)
    return transactional_id, TransactionMetadata(
        transactional_id, v.producer_id, v.producer_epoch, v.timeout_ms, TransactionState(v.state), v.partitions,
        v.last_update_ms, v.start_ms, v.previous_producer_id, v.next_producer_id, v.client_transaction_version)


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
