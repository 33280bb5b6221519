"""ProducerStateManager: one partition's idempotent/transactional producer state, and its snapshots.

It answers, from record batch HEADER fields only (producerId, producerEpoch, baseSequence,
lastOffsetDelta, attributes), whether an incoming batch is a retry of one already written
(a duplicate), in sequence, or must be refused; and which transactions are still open (the
first unstable offset, from which the partition's LastStableOffset follows).
"""

from __future__ import annotations

import logging
import os
import struct
from collections import deque
from dataclasses import dataclass, field

from crc32c import crc32c
from kbroker.protocol.errors import ErrorCode, KafkaError
from kbroker.protocol.records import BatchHeader, iter_records

from .file_io import replace_atomically, unlink_quietly

log = logging.getLogger(__name__)

NUM_BATCHES_TO_RETAIN = 5  # Kafka's ProducerStateEntry.NUM_BATCHES_TO_RETAIN
NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
INT32_MAX = 2**31 - 1
SNAPSHOT_SUFFIX = ".snapshot"

_SNAP_HEAD = struct.Struct(">4shIi")  # magic, version, crc32c of what follows the crc, entry count
_SNAP_ENTRY = struct.Struct(">qhqiqb")  # pid, epoch, last timestamp, coordinator epoch, txn first, n
_SNAP_BATCH = struct.Struct(">iiqq")  # first seq, last seq, first offset, last offset
_SNAP_MAGIC = b"KBPS"
_SNAP_VERSION = 1


def snapshot_file_name(offset: int) -> str:
    return f"{offset:020d}{SNAPSHOT_SUFFIX}"


def last_sequence(header: BatchHeader) -> int:
    """The batch's last sequence number, wrapping past Int32.MAX to 0 as the producer does."""
    if header.base_sequence == NO_SEQUENCE:
        return NO_SEQUENCE
    return (header.base_sequence + header.last_offset_delta) % (INT32_MAX + 1)


def in_sequence(last_seq: int, next_seq: int) -> bool:
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == INT32_MAX)


@dataclass(slots=True, frozen=True)
class BatchMetadata:
    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int


@dataclass(slots=True)
class ProducerStateEntry:
    """One producer's epoch, its last (up to) five batches and its open transaction, if any.

    Invariants: ``batches`` are all of ``producer_epoch``, oldest first, at most five;
    ``current_txn_first_offset`` is -1 unless a transaction of this producer is open here.
    """

    producer_id: int
    producer_epoch: int = NO_PRODUCER_EPOCH
    batches: deque[BatchMetadata] = field(default_factory=lambda: deque(maxlen=NUM_BATCHES_TO_RETAIN))
    last_timestamp: int = -1
    coordinator_epoch: int = -1
    current_txn_first_offset: int = -1

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else NO_SEQUENCE

    def copy(self) -> ProducerStateEntry:
        return ProducerStateEntry(
            self.producer_id, self.producer_epoch, deque(self.batches, maxlen=NUM_BATCHES_TO_RETAIN),
            self.last_timestamp, self.coordinator_epoch, self.current_txn_first_offset,
        )

    def find_duplicate(self, header: BatchHeader) -> BatchMetadata | None:
        if header.producer_epoch != self.producer_epoch:
            return None
        last = last_sequence(header)
        for batch in self.batches:
            if batch.first_seq == header.base_sequence and batch.last_seq == last:
                return batch
        return None

    def add_batch(self, epoch: int, first_seq: int, last_seq: int, first_offset: int, last_offset: int,
                  timestamp: int) -> None:
        if epoch != self.producer_epoch:
            self.batches.clear()
            self.producer_epoch = epoch
        self.batches.append(BatchMetadata(first_seq, last_seq, first_offset, last_offset))
        self.last_timestamp = timestamp


@dataclass(slots=True, frozen=True)
class EndTxnMarker:
    """A control batch's COMMIT/ABORT marker: its type and the coordinator epoch that wrote it."""

    commit: bool
    coordinator_epoch: int


def end_txn_marker(batch: bytes | memoryview) -> EndTxnMarker | None:
    """The EndTransactionMarker of a control batch (record key: version int16, type int16 —
    1 commit; value: version int16, coordinator epoch int32), or None if it has no record."""
    for record in iter_records(batch):
        if record.key is None or len(record.key) < 4:
            return None
        control_type: int = struct.unpack_from(">h", record.key, 2)[0]
        value = record.value
        coordinator_epoch: int = struct.unpack_from(">i", value, 2)[0] if value is not None and len(value) >= 6 else -1
        return EndTxnMarker(control_type == 1, coordinator_epoch)
    return None


@dataclass(slots=True, frozen=True)
class CompletedTxn:
    """A transaction ended by a marker at ``last_offset``."""

    producer_id: int
    first_offset: int
    last_offset: int
    is_aborted: bool


@dataclass(slots=True)
class ProducerAppendInfo:
    """Validated but not yet applied changes of one append: updated entries by producer id."""

    updated: dict[int, ProducerStateEntry] = field(default_factory=dict)
    started_txns: list[tuple[int, int]] = field(default_factory=list)  # (first offset, producer id)


class ProducerStateManager:
    """Producer id -> ProducerStateEntry for one partition, plus the open transactions.

    Invariants: the state reflects every producer batch below ``map_end_offset`` (the log end
    offset once loaded); ``ongoing_txns`` maps the first offset of each open transaction to its
    producer id, and its minimum is the first unstable offset.

    Snapshot file ``<offset, 20 digits>.snapshot`` in the partition directory holds the state
    as of ``offset`` (every batch below it applied). Format (big-endian), our own::

        magic "KBPS" | version int16 (=1) | crc32c uint32 of everything after it | count int32
        count x { producerId int64 | epoch int16 | lastTimestamp int64 | coordinatorEpoch int32
                  | currentTxnFirstOffset int64 (-1: none) | n int8
                  | n x { firstSeq int32 | lastSeq int32 | firstOffset int64 | lastOffset int64 } }

    Snapshots are written (write, fsync, rename) when a segment rolls and at clean shutdown;
    after a crash the state is the latest readable snapshot plus a replay of the batch headers
    after it (``PartitionLog`` drives the replay).
    """

    def __init__(self, directory: str) -> None:
        self.directory = directory
        self.producers: dict[int, ProducerStateEntry] = {}
        self.ongoing_txns: dict[int, int] = {}
        self.map_end_offset = 0
        self.last_snapshot_offset: int | None = None  # written or loaded; a close at it writes none

    # --- validation and application -------------------------------------------------------

    def find_duplicate(self, header: BatchHeader) -> BatchMetadata | None:
        entry = self.producers.get(header.producer_id)
        return entry.find_duplicate(header) if entry is not None else None

    def prepare_append(self, batches: list[tuple[BatchHeader, int]], check_sequence: bool = True
                       ) -> ProducerAppendInfo:
        """Validate data batches (header, assigned first offset) of a client's append.

        Raises KafkaError: INVALID_PRODUCER_EPOCH for an epoch older than the producer's,
        OUT_OF_ORDER_SEQUENCE_NUMBER for a gap or a new epoch not starting at 0, and
        INVALID_TXN_STATE for a non-transactional batch while the producer's transaction is
        open. An unknown producer may start at any sequence (Kafka 4, KIP-360). Nothing is
        applied until ``complete_append``.
        """
        info = ProducerAppendInfo()
        for header, first_offset in batches:
            pid = header.producer_id
            if pid < 0:
                continue
            entry = info.updated.get(pid)
            if entry is None:
                current = self.producers.get(pid)
                entry = current.copy() if current is not None else ProducerStateEntry(pid)
                info.updated[pid] = entry
            epoch, first_seq = header.producer_epoch, header.base_sequence
            if epoch < entry.producer_epoch:
                raise KafkaError(
                    ErrorCode.invalid_producer_epoch,
                    f"Epoch of producer {pid} at offset {first_offset} is {epoch}, which is smaller than "
                    f"the last seen epoch {entry.producer_epoch}",
                )
            if not check_sequence:
                pass
            elif epoch != entry.producer_epoch:
                if first_seq != 0 and entry.producer_epoch != NO_PRODUCER_EPOCH:
                    raise KafkaError(
                        ErrorCode.out_of_order_sequence_number,
                        f"Invalid sequence number for new epoch of producer {pid}: {epoch} (request epoch), "
                        f"{first_seq} (seq. number), {entry.producer_epoch} (current producer epoch)",
                    )
            elif entry.batches and not in_sequence(entry.last_seq, first_seq):
                raise KafkaError(
                    ErrorCode.out_of_order_sequence_number,
                    f"Out of order sequence number for producer {pid} at offset {first_offset}: "
                    f"{first_seq} (incoming seq. number), {entry.last_seq} (current end sequence number)",
                )
            if entry.current_txn_first_offset >= 0 and not header.is_transactional:
                raise KafkaError(
                    ErrorCode.invalid_txn_state,
                    f"Expected transactional write from producer {pid} at offset {first_offset}",
                )
            self._apply_data(entry, header, first_offset, info)
        return info

    def _apply_data(self, entry: ProducerStateEntry, header: BatchHeader, first_offset: int,
                    info: ProducerAppendInfo | None) -> None:
        entry.add_batch(
            header.producer_epoch, header.base_sequence, last_sequence(header),
            first_offset, first_offset + header.last_offset_delta, header.max_timestamp,
        )
        if header.is_transactional and entry.current_txn_first_offset < 0:
            entry.current_txn_first_offset = first_offset
            if info is not None:
                info.started_txns.append((first_offset, entry.producer_id))
            else:
                self.ongoing_txns[first_offset] = entry.producer_id

    def complete_append(self, info: ProducerAppendInfo, end_offset: int) -> None:
        """Apply what ``prepare_append`` validated, once the bytes are written."""
        self.producers.update(info.updated)
        for first_offset, pid in info.started_txns:
            self.ongoing_txns[first_offset] = pid
        self.map_end_offset = end_offset

    def replay_batch(self, header: BatchHeader, marker: EndTxnMarker | None) -> CompletedTxn | None:
        """Apply a batch already in the log (recovery, or a follower's append): no validation, as
        Kafka's replication; a marker's coordinator epoch is learnt, so a follower that becomes
        leader fences the same stale coordinators its leader did."""
        if header.producer_id < 0:
            self.map_end_offset = header.last_offset + 1
            return None
        if marker is not None:
            completed = self.append_marker(
                header.producer_id, header.producer_epoch, header.base_offset, marker.commit,
                marker.coordinator_epoch, header.max_timestamp, validate=False,
            )
        else:
            entry = self.producers.setdefault(header.producer_id, ProducerStateEntry(header.producer_id))
            self._apply_data(entry, header, header.base_offset, None)
            completed = None
        self.map_end_offset = header.last_offset + 1
        return completed

    def check_marker(self, producer_id: int, producer_epoch: int, coordinator_epoch: int = -1) -> None:
        """A leader's check of a marker before writing it: INVALID_PRODUCER_EPOCH if the producer
        has moved past its epoch, TRANSACTION_COORDINATOR_FENCED if a newer transaction
        coordinator (a higher coordinator epoch) has already written a marker for the producer
        here (Kafka's ProducerAppendInfo.checkCoordinatorEpoch: the sender is a zombie)."""
        entry = self.producers.get(producer_id)
        if entry is not None and producer_epoch < entry.producer_epoch:
            raise KafkaError(
                ErrorCode.invalid_producer_epoch,
                f"marker epoch {producer_epoch} of producer {producer_id} is older than {entry.producer_epoch}",
            )
        if entry is not None and coordinator_epoch < entry.coordinator_epoch:
            raise KafkaError(
                ErrorCode.transaction_coordinator_fenced,
                f"Invalid coordinator epoch for producerId {producer_id}: {coordinator_epoch} (zombie), "
                f"{entry.coordinator_epoch} (current)",
            )

    def append_marker(self, producer_id: int, producer_epoch: int, offset: int, commit: bool,
                      coordinator_epoch: int, timestamp: int, validate: bool = True) -> CompletedTxn | None:
        """A commit/abort marker written at ``offset``: closes the producer's open transaction."""
        if validate:
            self.check_marker(producer_id, producer_epoch, coordinator_epoch)
        entry = self.producers.setdefault(producer_id, ProducerStateEntry(producer_id))
        if producer_epoch != entry.producer_epoch:
            entry.batches.clear()
            entry.producer_epoch = producer_epoch
        entry.coordinator_epoch = max(entry.coordinator_epoch, coordinator_epoch)
        entry.last_timestamp = timestamp
        completed = None
        first = entry.current_txn_first_offset
        if first >= 0:
            completed = CompletedTxn(producer_id, first, offset, not commit)
            self.ongoing_txns.pop(first, None)
            entry.current_txn_first_offset = -1
        self.map_end_offset = offset + 1
        return completed

    # --- transactions ---------------------------------------------------------------------

    def first_unstable_offset(self) -> int | None:
        return min(self.ongoing_txns) if self.ongoing_txns else None

    def last_stable_offset_after(self, completed: CompletedTxn) -> int:
        """Kafka's LastStableOffset recorded with an aborted transaction in the TransactionIndex."""
        others = [first for first, pid in self.ongoing_txns.items() if pid != completed.producer_id]
        return min(others) if others else completed.last_offset + 1

    def open_transaction(self, producer_id: int) -> int | None:
        entry = self.producers.get(producer_id)
        if entry is None or entry.current_txn_first_offset < 0:
            return None
        return entry.current_txn_first_offset

    # --- expiry, truncation ---------------------------------------------------------------

    def remove_expired_producers(self, now_ms: int, expiration_ms: int) -> int:
        """Forget producers idle longer than producer.id.expiration.ms (never one with an open txn)."""
        expired = [
            pid for pid, e in self.producers.items()
            if e.current_txn_first_offset < 0 and now_ms - e.last_timestamp >= expiration_ms
        ]
        for pid in expired:
            del self.producers[pid]
        return len(expired)

    def reset(self, offset: int) -> None:
        self.producers.clear()
        self.ongoing_txns.clear()
        self.map_end_offset = offset

    # --- snapshots ------------------------------------------------------------------------

    def snapshot_offsets(self) -> list[int]:
        try:
            names = os.listdir(self.directory)
        except FileNotFoundError:
            return []
        return sorted(int(n[: -len(SNAPSHOT_SUFFIX)]) for n in names
                      if n.endswith(SNAPSHOT_SUFFIX) and n[: -len(SNAPSHOT_SUFFIX)].isdigit())

    def take_snapshot(self) -> None:
        """Write the state as of ``map_end_offset`` (atomically; replaces one at that offset)."""
        body = bytearray(struct.pack(">i", len(self.producers)))
        for e in self.producers.values():
            body += _SNAP_ENTRY.pack(e.producer_id, e.producer_epoch, e.last_timestamp, e.coordinator_epoch,
                                     e.current_txn_first_offset, len(e.batches))
            for b in e.batches:
                body += _SNAP_BATCH.pack(b.first_seq, b.last_seq, b.first_offset, b.last_offset)
        head = struct.pack(">4shI", _SNAP_MAGIC, _SNAP_VERSION, crc32c(bytes(body)))
        path = os.path.join(self.directory, snapshot_file_name(self.map_end_offset))
        replace_atomically(path, head + bytes(body))
        self.last_snapshot_offset = self.map_end_offset

    def load_latest_snapshot(self, max_offset: int) -> int | None:
        """Load the newest valid snapshot at or below ``max_offset``; delete newer or corrupt ones.

        Returns the snapshot's offset (state is exact up to there), or None (state is empty).
        """
        self.reset(0)
        for offset in reversed(self.snapshot_offsets()):
            path = os.path.join(self.directory, snapshot_file_name(offset))
            if offset > max_offset:
                unlink_quietly(path)
                continue
            try:
                with open(path, "rb") as fh:
                    self._decode(fh.read())
            except (OSError, ValueError, struct.error) as exc:
                log.warning("deleting unreadable producer state snapshot %s: %s", path, exc)
                self.reset(0)
                unlink_quietly(path)
                continue
            self.map_end_offset = offset
            self.last_snapshot_offset = offset
            return offset
        return None

    def _decode(self, data: bytes) -> None:
        magic, version, crc = struct.unpack_from(">4shI", data, 0)
        if magic != _SNAP_MAGIC or version != _SNAP_VERSION:
            raise ValueError(f"not a version {_SNAP_VERSION} snapshot")
        if crc32c(data[10:]) != crc:
            raise ValueError("CRC32C mismatch")
        (count,) = struct.unpack_from(">i", data, 10)
        pos = 14
        for _ in range(count):
            pid, epoch, ts, coord, txn_first, n = _SNAP_ENTRY.unpack_from(data, pos)
            pos += _SNAP_ENTRY.size
            entry = ProducerStateEntry(pid, epoch, last_timestamp=ts, coordinator_epoch=coord,
                                       current_txn_first_offset=txn_first)
            for _b in range(n):
                entry.batches.append(BatchMetadata(*_SNAP_BATCH.unpack_from(data, pos)))
                pos += _SNAP_BATCH.size
            self.producers[pid] = entry
            if txn_first >= 0:
                self.ongoing_txns[txn_first] = pid
        if pos != len(data):
            raise ValueError("trailing bytes")

    def delete_snapshots_below(self, offset: int) -> None:
        """Segments below ``offset`` are gone: so are their snapshots (the newest is kept)."""
        offsets = self.snapshot_offsets()
        for snap in offsets[:-1]:
            if snap < offset:
                unlink_quietly(os.path.join(self.directory, snapshot_file_name(snap)))

    def delete_snapshots_above(self, offset: int) -> None:
        for snap in self.snapshot_offsets():
            if snap > offset:
                unlink_quietly(os.path.join(self.directory, snapshot_file_name(snap)))
