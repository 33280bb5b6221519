"""One cleaning pass of the LogCleaner, as it runs in a worker thread (Kafka's ``Cleaner``).

Given a :class:`CleanJob` (dup'd descriptors of the non-active segments, the first dirty offset,
the aborted transactions and each producer's last offset), build the key → latest-offset map
over the dirty part, filter every batch of the cleanable range, and write the groups of
``.cleaned`` files with their indexes. Nothing here touches a PartitionLog: the swap into the
segment list happens on the event loop in ``log_cleaner.py``, whose docstring describes the
rules and the on-disk protocol.
"""

from __future__ import annotations

import os
import struct
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field

from kbroker.protocol.record_builder import rebuild_batch
from kbroker.protocol.records import (
    COMPRESSION_MASK,
    HEADER_SIZE,
    LOG_OVERHEAD,
    BatchHeader,
    Record,
    control_record_type,
    iter_records,
    read_header,
)

from .file_io import pread_exact, unlink_quietly, write_all
from .log_cleaner_recovery import CLEANED_SUFFIX, SEGMENT_SUFFIXES
from .offset_index import OffsetIndex
from .segment import LogSegment, segment_file_name
from .time_index import TimeIndex
from .transaction_index import AbortedTxn, TransactionIndex

DELETE_HORIZON_FLAG = 0x40  # RecordBatch attribute bit: baseTimestamp holds the delete horizon
CONTROL_ABORT, CONTROL_COMMIT = 0, 1
_MAX_RELATIVE_OFFSET = 2**31 - 1
_WRITE_CHUNK = 1 << 20


class CleaningAborted(Exception):
    """The cleaner was stopped, or the log changed under it; nothing was swapped."""


# --- one cleaning job: what the event loop hands the worker thread ----------------------------


@dataclass(slots=True)
class Source:
    """One old segment as the worker sees it: a dup'd descriptor and its offset range."""

    segment: LogSegment
    fd: int
    size: int
    base_offset: int
    end_offset: int  # the next segment's base offset
    txn_entries: list[AbortedTxn]


@dataclass(slots=True)
class CleanJob:
    directory: str
    sources: list[Source]
    first_dirty: int
    end_offset: int
    aborted: list[AbortedTxn]
    producer_last_offsets: dict[int, int]
    now_ms: int
    delete_retention_ms: int
    segment_bytes: int
    index_interval_bytes: int
    stop: threading.Event


@dataclass(slots=True)
class CleanedGroup:
    """A group of old segments and the cleaned file that replaces them."""

    sources: list[Source]
    base_offset: int
    batches: list[tuple[int, int, int, int]]  # position, size, last offset, max timestamp
    size: int


@dataclass(slots=True)
class CleanStats:
    """What one cleaning did (logged, and returned for tests and figures)."""

    topic: str
    partition: int
    first_dirty: int
    end_offset: int
    segments_before: int = 0
    segments_after: int = 0
    bytes_before: int = 0
    bytes_after: int = 0
    records_before: int = 0
    records_after: int = 0
    keys: int = 0
    seconds: float = 0.0
    pending_delete_horizon: int | None = None
    groups: list[CleanedGroup] = field(default_factory=list)


class _TxnTracker:
    """Kafka's CleanedTransactionMetadata: which producers are inside an aborted or a committed
    transaction at the current position of a forward pass, from the aborted-transaction list."""

    def __init__(self, aborted: list[AbortedTxn]) -> None:
        self._pending = sorted(aborted, key=lambda t: t.first_offset)
        self._next = 0
        self._aborted: dict[int, bool] = {}  # producer id -> a batch of the transaction was seen
        self._committed: set[int] = set()

    def _advance(self, offset: int) -> None:
        while self._next < len(self._pending) and self._pending[self._next].first_offset <= offset:
            self._aborted.setdefault(self._pending[self._next].producer_id, False)
            self._next += 1

    def on_data(self, header: BatchHeader) -> bool:
        """True when the batch belongs to an aborted transaction (its records go)."""
        self._advance(header.last_offset)
        if not header.is_transactional:
            return False
        if header.producer_id in self._aborted:
            self._aborted[header.producer_id] = True
            return True
        self._committed.add(header.producer_id)
        return False

    def on_control(self, header: BatchHeader, control_type: int | None) -> bool:
        """True when the marker may go: no record of its transaction is left in the log."""
        self._advance(header.last_offset)
        if control_type == CONTROL_ABORT:
            return not self._aborted.pop(header.producer_id, False)
        if control_type == CONTROL_COMMIT:
            if header.producer_id in self._committed:
                self._committed.discard(header.producer_id)
                return False
            return True
        return False


def _iter_batches(fd: int, size: int, stop: threading.Event) -> Iterator[tuple[BatchHeader, bytes]]:
    position = 0
    while position + HEADER_SIZE <= size:
        if stop.is_set():
            raise CleaningAborted("cleaner stopped")
        (length,) = struct.unpack(">i", pread_exact(fd, 4, position + 8))
        raw = pread_exact(fd, length + LOG_OVERHEAD, position)
        if len(raw) < length + LOG_OVERHEAD:
            return
        yield read_header(raw), raw
        position += len(raw)


def _build_offset_map(job: CleanJob) -> tuple[dict[bytes, int], int]:
    """key -> latest offset over the dirty range, and how many records were read."""
    tracker = _TxnTracker([t for t in job.aborted if t.last_offset >= job.first_dirty])
    latest: dict[bytes, int] = {}
    records = 0
    for source in job.sources:
        if source.end_offset <= job.first_dirty:
            continue
        for header, raw in _iter_batches(source.fd, source.size, job.stop):
            if header.last_offset < job.first_dirty:
                continue
            if header.is_control:
                tracker.on_control(header, control_record_type(raw) if header.record_count else None)
                continue
            if tracker.on_data(header):
                continue
            for record in iter_records(raw):
                records += 1
                if record.key is not None:
                    latest[record.key] = record.offset
    return latest, records


def _encode_batch(header: BatchHeader, records: list[Record], horizon: int | None) -> bytes:
    """A batch with the same offsets, producer fields and last offset delta as ``header``, holding
    ``records`` uncompressed; with ``horizon`` the delete horizon is set."""
    attributes = header.attributes & ~COMPRESSION_MASK
    if horizon is not None:
        attributes |= DELETE_HORIZON_FLAG
        base_ts = horizon
    elif records:
        attributes &= ~DELETE_HORIZON_FLAG
        base_ts = records[0].timestamp
    else:  # an empty header keeps its base timestamp (and a horizon it may carry)
        base_ts = header.base_timestamp
    if header.is_log_append_time or not records:
        max_ts = header.max_timestamp
    else:
        max_ts = max(r.timestamp for r in records)
    return rebuild_batch(header, records, attributes, base_ts, max_ts)


def _filter_batch(job: CleanJob, header: BatchHeader, raw: bytes, latest: dict[bytes, int],
                  tracker: _TxnTracker, stats: CleanStats) -> bytes | None:
    """What of one batch survives the cleaning (None: nothing, not even its header)."""
    now = job.now_ms
    horizon = header.base_timestamp if header.attributes & DELETE_HORIZON_FLAG else None
    pid = header.producer_id
    last_of_producer = pid >= 0 and job.producer_last_offsets.get(pid) == header.last_offset
    if header.is_control:
        can_discard = tracker.on_control(header, control_record_type(raw) if header.record_count else None)
        if not can_discard or header.record_count == 0:
            return raw
        if horizon is not None and horizon <= now:
            return _encode_batch(header, [], None) if last_of_producer else None
        if horizon is None:
            horizon = now + job.delete_retention_ms
            raw = _encode_batch(header, list(iter_records(raw)), horizon)
        _note_horizon(stats, horizon, now)
        return raw
    aborted = tracker.on_data(header)
    records = [] if aborted else list(iter_records(raw))
    stats.records_before += header.record_count
    deletes_expired = horizon is not None and horizon <= now
    kept = [
        r for r in records
        if r.key is not None and r.offset >= latest.get(r.key, -1) and (r.value is not None or not deletes_expired)
    ]
    stats.records_after += len(kept)
    if not kept:
        return _encode_batch(header, [], None) if last_of_producer else None
    has_tombstone = any(r.value is None for r in kept)
    if has_tombstone and horizon is None:
        horizon = now + job.delete_retention_ms
        _note_horizon(stats, horizon, now)
        return _encode_batch(header, kept, horizon)
    if has_tombstone and horizon is not None:
        _note_horizon(stats, horizon, now)
    if len(kept) == header.record_count:
        return raw
    return _encode_batch(header, kept, horizon)


def _note_horizon(stats: CleanStats, horizon: int, now: int) -> None:
    if horizon >= now and (stats.pending_delete_horizon is None or horizon > stats.pending_delete_horizon):
        stats.pending_delete_horizon = horizon


def _group_by_size(sources: list[Source], max_bytes: int) -> list[list[Source]]:
    """Consecutive segments merged while their sizes fit in segment.bytes (Kafka's
    groupSegmentsBySize) and their offsets fit a 32-bit relative index."""
    groups: list[list[Source]] = []
    for source in sources:
        group = groups[-1] if groups else None
        if (
            group is not None
            and sum(s.size for s in group) + source.size <= max_bytes
            and source.end_offset - 1 - group[0].base_offset <= _MAX_RELATIVE_OFFSET
        ):
            group.append(source)
        else:
            groups.append([source])
    return groups


def run_job(job: CleanJob, stats: CleanStats) -> list[CleanedGroup]:
    """The worker thread: owns the job's dup'd descriptors (closes them) and, on failure or
    stop, removes its ``.cleaned`` files itself, so nothing races with a cancelled caller."""
    try:
        return _write_cleaned(job, stats)
    except BaseException:
        remove_cleaned(job)
        raise
    finally:
        for source in job.sources:
            os.close(source.fd)


def _write_cleaned(job: CleanJob, stats: CleanStats) -> list[CleanedGroup]:
    """Offset map, then one fsynced ``.cleaned`` file per group of old segments."""
    latest, _read = _build_offset_map(job)
    stats.keys = len(latest)
    tracker = _TxnTracker([t for t in job.aborted if t.last_offset >= job.sources[0].base_offset])
    out: list[CleanedGroup] = []
    for group in _group_by_size(job.sources, job.segment_bytes):
        base = group[0].base_offset
        log_path, index_path, time_path, txn_path = (
            os.path.join(job.directory, segment_file_name(base, suffix) + CLEANED_SUFFIX) for suffix in SEGMENT_SUFFIXES
        )
        for path in (log_path, index_path, time_path, txn_path):
            unlink_quietly(path)
        cleaned = CleanedGroup(group, base, [], 0)
        out.append(cleaned)
        kept_markers: set[int] = set()
        fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            pending = bytearray()
            for source in group:
                for header, raw in _iter_batches(source.fd, source.size, job.stop):
                    kept = _filter_batch(job, header, raw, latest, tracker, stats)
                    if kept is None:
                        continue
                    if header.is_control:
                        kept_markers.add(header.last_offset)
                    max_ts = read_header(kept).max_timestamp
                    cleaned.batches.append((cleaned.size, len(kept), header.last_offset, max_ts))
                    cleaned.size += len(kept)
                    pending += kept
                    if len(pending) >= _WRITE_CHUNK:
                        write_all(fd, pending)
                        pending.clear()
            write_all(fd, pending)
            os.fsync(fd)  # what is renamed to .swap must already be on disk
        finally:
            os.close(fd)
        os.close(os.open(txn_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644))
        index = TransactionIndex(txn_path)
        for source in group:
            for entry in source.txn_entries:
                if entry.last_offset in kept_markers:
                    index.append(entry)
        index.fsync()
        _write_indexes(cleaned, index_path, time_path, job.index_interval_bytes)
    return out


def _write_indexes(cleaned: CleanedGroup, index_path: str, time_path: str, interval: int) -> None:
    """The ``.index`` and ``.timeindex`` of a cleaned segment, by LogSegment's own rules
    (an entry per ``index.interval.bytes``, a last time entry as at roll), built here so the
    event loop only loads them. They need no fsync: recovery rebuilds indexes from the log."""
    offsets = OffsetIndex(index_path, cleaned.base_offset)
    times = TimeIndex(time_path, cleaned.base_offset)
    max_ts, offset_of_max, since_entry = -1, cleaned.base_offset, 0
    for position, size, last_offset, batch_max_ts in cleaned.batches:
        if batch_max_ts > max_ts:
            max_ts, offset_of_max = batch_max_ts, last_offset
        if since_entry > interval:
            offsets.append(last_offset, position)
            times.maybe_append(max_ts, offset_of_max)
            since_entry = 0
        since_entry += size
    times.maybe_append(max_ts, offset_of_max)
    offsets.persist()
    times.persist()


# --- the cleaner ------------------------------------------------------------------------------


def remove_cleaned(job: CleanJob) -> None:
    for group_base in {s.base_offset for s in job.sources}:
        for suffix in SEGMENT_SUFFIXES:
            unlink_quietly(os.path.join(job.directory, segment_file_name(group_base, suffix) + CLEANED_SUFFIX))
