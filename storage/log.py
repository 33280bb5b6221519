"""One partition's log: its segments in order and every change to them — append (leader,
follower, transaction markers), roll and flush, truncation, DeleteRecords and retention.

Beside it: loading at start-up (``log_loader``), the checks of batches before a write and the
leader's offset numbering (``log_validator``), lookups across the segments for reads
(``log_reads``), the retention rule (``log_retention``); the file formats are the segment's
and its indexes'. ``PartitionLog`` below states the invariants.
"""

from __future__ import annotations

import errno
import logging
import os
import shutil
from collections.abc import Iterator
from dataclasses import dataclass

from kbroker.protocol.errors import ErrorCode, KafkaError
from kbroker.protocol.record_builder import build_end_txn_marker
from kbroker.protocol.records import (
    patch_base_offset,
    patch_leader_epoch,
    split_batches,
)

from .clock import SYSTEM_CLOCK, Clock
from .file_io import fsync_file, make_dirs, replace_atomically
from .leader_epoch_cache import LeaderEpochCache
from .log_config import LogConfig
from .log_dir_health import LogDirHealth
from .log_loader import index_aborted, load_segments, rebuild_producer_state
from .log_reads import aborted_txns, batches_from, locate, max_timestamp_offset, offset_for_timestamp
from .log_retention import retention_cutoff
from .log_validator import assign_offsets, follower_batches, validate_batches
from .producer_state import CompletedTxn, ProducerAppendInfo, ProducerStateManager, end_txn_marker
from .segment import AppendedBatch, LogSegment, SegmentFileCache
from .transaction_index import AbortedTxn

log = logging.getLogger(__name__)

PARTITION_METADATA_FILE = "partition.metadata"
_MAX_RELATIVE_OFFSET = 2**31 - 1


@dataclass(slots=True, frozen=True)
class AppendInfo:
    first_offset: int
    last_offset: int
    log_append_time: int  # -1 unless the topic uses LogAppendTime
    log_start_offset: int


class LogOfflineError(OSError):
    """Appends to a log that an unrecoverable write failure took offline (until restart)."""


@dataclass(slots=True, frozen=True)
class FetchSlice:
    """A byte range of one segment file holding whole batches (the last may be cut short)."""

    segment: LogSegment
    position: int
    length: int


class PartitionLog:
    """One partition's log, as Kafka's UnifiedLog over its LocalLog.

    On disk, ``<log.dir>/<topic>-<partition>/`` holds the segments (``<base offset>.log`` with
    its ``.index``, ``.timeindex`` and ``.txnindex``, the base offset zero-padded to 20 digits),
    ``leader-epoch-checkpoint``, producer snapshots (``<offset>.snapshot``) and
    ``partition.metadata`` (topic id).

    Invariants: segments are sorted by base offset and contiguous (``base_offsets`` mirrors
    them); only the last (active) segment is appended to; ``log_start_offset`` lies within
    [first segment base, log_end_offset]; the recovery point is <= log_end_offset and everything
    below it has been fsynced. Appends validate each batch header and CRC, assign offsets by
    patching the batch bytes and write them with one ``os.write``; records are not parsed
    except where Kafka requires it (keys of compacted topics).

    Storage faults: every write either lands whole or is undone before the append raises (the
    segment cuts a failed write back; checkpoints and snapshots are replaced atomically), so a
    full disk or an I/O error loses nothing that was acknowledged and later appends never go
    after a torn tail; ``LogDirHealth`` hears of each failure and of the first success after
    them. What cannot be undone — an fsync that failed (the kernel may have dropped the pages),
    a transaction index entry missing for a marker already written — takes this log offline
    (``offline``): appends are refused with KAFKA_STORAGE_ERROR until a restart recovers it;
    reads go on.

    Producer state (``ProducerStateManager``) is checked from batch headers before a write and
    updated after it: a retried idempotent batch is answered with its original offsets and not
    written again. It is snapshotted at every roll and at close; ``load`` rebuilds it from the
    newest snapshot plus a header replay to the log end. Transaction markers (control batches)
    are written by ``append_end_txn_marker`` on a leader, or arrive from the leader in
    ``append_as_follower``; an aborted transaction is recorded in the ``.txnindex`` of the
    segment holding its marker.
    """

    def __init__(
        self,
        directory: str,
        topic: str,
        partition: int,
        config: LogConfig,
        *,
        log_start_offset: int = 0,
        recovery_point: int = 0,
        files: SegmentFileCache | None = None,
        health: LogDirHealth | None = None,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        self.directory = directory
        self.clock = clock
        self.log_dir = os.path.dirname(directory)
        self.files = files if files is not None else SegmentFileCache()
        self.health = health if health is not None else LogDirHealth()
        self.offline: str | None = None  # why appends are refused until a restart
        self._unsynced_files: list[str] = []  # written without fsync; the next _fsync makes them durable
        self.topic = topic
        self.partition = partition
        self.config = config
        self.segments: list[LogSegment] = []
        self.base_offsets: list[int] = []
        self.log_start_offset = log_start_offset
        self.recovery_point = recovery_point
        self.leader_epoch_cache = LeaderEpochCache(directory)
        self.producer_state = ProducerStateManager(directory)
        self.unflushed_messages = 0
        self.last_flush_ms = clock.wall_ms()

    # --- lifecycle ------------------------------------------------------------------------

    @classmethod
    def create(cls, directory: str, topic: str, partition: int, topic_id: str, config: LogConfig,
               files: SegmentFileCache | None = None, health: LogDirHealth | None = None,
               clock: Clock = SYSTEM_CLOCK) -> PartitionLog:
        """A new, empty log: its directory, ``partition.metadata`` and first segment (if any of
        them cannot be written, the directory is removed again and the error raised)."""
        make_dirs(directory)
        try:
            metadata_file = write_partition_metadata(directory, topic_id)
            plog = cls(directory, topic, partition, config, files=files, health=health, clock=clock)
            # The first flush makes the new directory's entry in its log dir durable too (the
            # directory is "fsynced as a file": itself, then its parent), so a flushed log cannot
            # vanish in an OS crash; creating a thousand logs costs no fsync.
            plog._unsynced_files += [directory, metadata_file]
            plog._add_segment(plog._new_segment(0))
        except OSError:
            shutil.rmtree(directory, ignore_errors=True)
            raise
        plog.active_segment.close_file()  # opened again by the first append or read
        return plog

    def _new_segment(self, base_offset: int) -> LogSegment:
        return LogSegment(self.directory, base_offset, self.config.index_interval_bytes, self.files, create=True,
                          created_ms=self.clock.wall_ms())

    def load(self, clean_shutdown: bool) -> None:
        """Open every segment; recover (CRC scan, index rebuild) those past the recovery point
        (``log_loader``); then clamp the offsets and epochs to what was found and rebuild the
        producer state. What recovery cut is logged."""
        for segment in load_segments(
            self.directory, self._label, self.config.index_interval_bytes, self.files, self.leader_epoch_cache,
            clean_shutdown=clean_shutdown, recovery_point=self.recovery_point, log_start_offset=self.log_start_offset,
        ):
            self._add_segment(segment)
        self.log_start_offset = max(self.log_start_offset, self.segments[0].base_offset)
        self.log_start_offset = min(self.log_start_offset, self.log_end_offset)
        self.recovery_point = min(self.recovery_point, self.log_end_offset)
        self.leader_epoch_cache.truncate_from_end(self.log_end_offset)
        self.leader_epoch_cache.truncate_from_start(self.log_start_offset)
        self._rebuild_producer_state()
        self.active_segment.close_file()

    def _rebuild_producer_state(self) -> None:
        rebuild_producer_state(self.producer_state, self.segments, self.base_offsets, self.log_end_offset,
                               self._label)

    @property
    def _label(self) -> str:
        return f"{self.topic}-{self.partition}"

    def _add_segment(self, segment: LogSegment) -> None:
        self.segments.append(segment)
        self.base_offsets.append(segment.base_offset)

    @property
    def active_segment(self) -> LogSegment:
        return self.segments[-1]

    @property
    def log_end_offset(self) -> int:
        return self.active_segment.next_offset

    @property
    def size_in_bytes(self) -> int:
        return sum(s.size for s in self.segments)

    @property
    def needs_recovery(self) -> bool:
        """Whether the next start must not trust this log's files as a clean shutdown left them."""
        return self.offline is not None or self.active_segment.torn

    def close(self) -> None:
        """Clean shutdown: a producer state snapshot at the log end, then close every file
        (a failure here is logged: what it leaves is rebuilt or cut at the next start)."""
        active = self.active_segment
        if active.torn:
            try:
                active.cut_torn_tail()
            except OSError as exc:
                log.error("%s-%d: a failed append's partial write is still in %s (%s): it is cut by CRC at "
                          "the next start", self.topic, self.partition, active.log_path, exc)
        active.time_index.maybe_append(active.max_timestamp, active.offset_of_max_timestamp)
        self.producer_state.map_end_offset = self.log_end_offset
        if self.producer_state.last_snapshot_offset != self.log_end_offset:
            self._take_producer_snapshot()
        for segment in self.segments:
            segment.close()

    def _take_producer_snapshot(self) -> None:
        """A snapshot only saves replay work: if it cannot be written, the next load replays from
        an older one (or from the log start)."""
        try:
            self.producer_state.take_snapshot()
        except OSError as exc:
            log.warning("producer state snapshot of %s-%d at offset %d not written: %s",
                        self.topic, self.partition, self.producer_state.map_end_offset, exc)

    def delete(self) -> None:
        for segment in self.segments:
            segment.close_file()
        shutil.rmtree(self.directory, ignore_errors=True)

    # --- append ---------------------------------------------------------------------------

    def append_as_leader(self, records: memoryview, leader_epoch: int, now_ms: int,
                         from_coordinator: bool = False) -> AppendInfo:
        """Validate a produce payload, assign offsets in place and write it.

        ``records`` must be writable (offsets, epoch and LogAppendTime are patched into it).
        ``from_coordinator``: a transactional offset commit written by the broker itself (no
        sequence numbers: only the producer epoch is checked, as Kafka's COORDINATOR origin).
        """
        batches = split_batches(records)
        validate_batches(records, batches, self.config, now_ms, self._label)
        first = self.log_end_offset
        producer_info: ProducerAppendInfo | None = None
        if any(header.producer_id >= 0 for _pos, header in batches):
            for _pos, header in [] if from_coordinator else batches:
                duplicate = self.producer_state.find_duplicate(header) if header.producer_id >= 0 else None
                if duplicate is not None:
                    # A retry of a batch already written: Kafka answers with its original offsets.
                    return AppendInfo(duplicate.first_offset, duplicate.last_offset, -1, self.log_start_offset)
            assigned = []
            offset = first
            for _pos, header in batches:
                assigned.append((header, offset))
                offset += header.record_count
            producer_info = self.producer_state.prepare_append(assigned, check_sequence=not from_coordinator)
        appended = assign_offsets(records, batches, first, leader_epoch, now_ms, self.config.log_append_time)
        end = first + sum(header.record_count for _pos, header in batches)
        self._assign_epoch(leader_epoch, first)
        self._append(records, appended, first, end - 1, now_ms)
        if producer_info is not None:
            self.producer_state.complete_append(producer_info, end)
        self._after_append(first, end, now_ms)
        return AppendInfo(first, end - 1, now_ms if self.config.log_append_time else -1, self.log_start_offset)

    def append_as_follower(self, records: memoryview, now_ms: int) -> AppendInfo:
        """Append batches the leader already assigned offsets and leader epochs to.

        Header and CRC are checked (CORRUPT_MESSAGE) but nothing is rewritten: the follower's
        bytes must equal the leader's. The first batch must start at the log end offset and the
        batches must be contiguous. Each batch's partition leader epoch goes into the epoch
        cache and its producer fields (control batches included) into the producer state, as a
        replay: the leader already validated them.
        """
        batches = split_batches(records)
        first = self.log_end_offset
        appended = follower_batches(batches, first, self._label)
        offset = appended[-1].last_offset + 1 if appended else first
        for _pos, header in batches:
            # Before the write, as the leader does, so a crash never leaves records whose
            # epoch the cache does not know.
            self._assign_epoch(header.partition_leader_epoch, header.base_offset)
        self._append(records, appended, first, offset - 1, now_ms)
        segment = self.active_segment
        for pos, header in batches:
            if header.producer_id < 0:
                continue
            marker = end_txn_marker(records[pos : pos + header.size]) if header.is_control else None
            completed = self.producer_state.replay_batch(header, marker)
            if completed is not None and completed.is_aborted:
                self._index_aborted_after_write(segment, completed)
        self._after_append(first, offset, now_ms)
        return AppendInfo(first, offset - 1, -1, self.log_start_offset)

    def _after_append(self, first: int, end: int, now_ms: int) -> None:
        """Bookkeeping shared by every append path once [first, end) is written."""
        self.producer_state.map_end_offset = end
        self.unflushed_messages += end - first
        self.maybe_flush(now_ms)

    def _index_aborted_after_write(self, segment: LogSegment, completed: CompletedTxn) -> None:
        """The abort marker is in the log: without its index entry read_committed consumers
        would see the aborted records, so a failure here takes the log offline (the restart's
        replay writes the entry)."""
        try:
            index_aborted(segment, completed, self.producer_state)
        except OSError as exc:
            self._take_offline(f"transaction index entry for the abort at offset {completed.last_offset}", exc)
            raise

    def _assign_epoch(self, epoch: int, start_offset: int) -> None:
        self._check_writable()
        try:
            self.leader_epoch_cache.assign(epoch, start_offset)
        except OSError as exc:
            self.health.write_failed(self.log_dir, f"leader epoch checkpoint of {self.topic}-{self.partition}", exc)
            raise

    def _check_writable(self) -> None:
        if self.offline is not None:
            raise LogOfflineError(errno.EIO, f"{self.topic}-{self.partition} is offline until restart: {self.offline}")

    def _take_offline(self, what: str, exc: OSError) -> None:
        self.health.write_failed(self.log_dir, f"{what} of {self.topic}-{self.partition}", exc)
        if self.offline is None:
            self.offline = f"{what} failed: {exc}"
            log.error("%s-%d is offline until restart (appends refused, reads go on): %s failed: %s",
                      self.topic, self.partition, what, exc)

    def append_end_txn_marker(self, producer_id: int, producer_epoch: int, commit: bool,
                              coordinator_epoch: int, leader_epoch: int, now_ms: int) -> int:
        """Write a COMMIT/ABORT control batch for the producer's transaction; returns its offset.

        Raises INVALID_PRODUCER_EPOCH if the producer has moved past ``producer_epoch``,
        TRANSACTION_COORDINATOR_FENCED if a newer coordinator has written a marker for it.
        """
        self.producer_state.check_marker(producer_id, producer_epoch, coordinator_epoch)
        batch = bytearray(build_end_txn_marker(producer_id, producer_epoch, commit, coordinator_epoch, now_ms))
        offset = self.log_end_offset
        patch_base_offset(batch, 0, offset)
        patch_leader_epoch(batch, 0, leader_epoch)
        self._assign_epoch(leader_epoch, offset)
        self._append(memoryview(batch), [AppendedBatch(0, offset, now_ms)], offset, offset, now_ms)
        completed = self.producer_state.append_marker(
            producer_id, producer_epoch, offset, commit, coordinator_epoch, now_ms
        )
        if completed is not None and completed.is_aborted:
            self._index_aborted_after_write(self.active_segment, completed)
        self._after_append(offset, offset + 1, now_ms)
        return offset

    def collect_aborted_txns(self, fetch_offset: int, upper_bound: int) -> list[AbortedTxn]:
        """Aborted transactions overlapping [fetch_offset, upper_bound), from the TransactionIndex."""
        return aborted_txns(self.segments, self.base_offsets, fetch_offset, upper_bound)

    def _append(self, payload: memoryview, batches: list[AppendedBatch], first: int, last: int, now_ms: int) -> None:
        """Roll if due, then write; all or nothing (see the class docstring)."""
        self._check_writable()
        active = self.active_segment
        try:
            if not active.is_empty and (
                active.size + len(payload) > self.config.segment_bytes
                or last - active.base_offset > _MAX_RELATIVE_OFFSET
                or self._time_waited_for_roll(active, batches, now_ms) > self.config.segment_ms
            ):
                self.roll()
            self.active_segment.append(payload, batches)
        except LogOfflineError:
            raise
        except OSError as exc:
            self.health.write_failed(self.log_dir, f"append to {self.topic}-{self.partition}", exc)
            raise
        self.health.write_succeeded(self.log_dir)

    @staticmethod
    def _time_waited_for_roll(active: LogSegment, batches: list[AppendedBatch], now_ms: int) -> int:
        """Kafka's rule: the incoming records' max timestamp minus the segment's first batch
        timestamp (so a replay of old data rolls by its own time), or wall time since the
        segment was created when the segment has no timestamp."""
        rolling = active.rolling_timestamp_ms()
        if rolling < 0:
            return now_ms - active.created_ms
        return max((b.max_timestamp for b in batches), default=now_ms) - rolling

    def roll(self) -> LogSegment:
        """Close the active segment for appends and start a new one at the log end offset.

        If the old segment's indexes or the new segment cannot be written the roll raises and
        the old segment stays active; if the fsync fails the log goes offline."""
        old = self.active_segment
        if old.is_empty:
            return old
        old.on_become_inactive()
        self._fsync(old)  # what rolls off is durable; recovery after a crash starts here
        self.recovery_point = max(self.recovery_point, self.log_end_offset)
        segment = self._new_segment(self.log_end_offset)
        self._add_segment(segment)
        self.producer_state.map_end_offset = self.log_end_offset
        self._take_producer_snapshot()  # a crash replays from here, not from the log start
        return segment

    def _fsync(self, segment: LogSegment) -> None:
        """fsync the segment and the leader epoch cache (the recovery point moves past both).
        After a failed fsync the kernel may have dropped the dirty pages: nothing written since
        the last good fsync can be trusted, so the log goes offline."""
        try:
            segment.fsync()
            self.leader_epoch_cache.flush()
            while self._unsynced_files:
                fsync_file(self._unsynced_files[-1])
                self._unsynced_files.pop()
        except OSError as exc:
            self._take_offline("fsync", exc)
            raise LogOfflineError(exc.errno, f"fsync of {segment.log_path} failed: {exc.strerror}") from exc

    def maybe_flush(self, now_ms: int) -> None:
        """fsync if flush.messages or flush.ms says it is time."""
        if self.offline is None and (
            self.unflushed_messages >= self.config.flush_messages
            or now_ms - self.last_flush_ms >= self.config.flush_ms
        ):
            self.flush(now_ms)

    def flush(self, now_ms: int) -> None:
        """fsync the active segment (flush.messages / flush.ms ask for this); nothing to do when
        nothing was written since the last one (a node with thousands of idle partitions shuts
        down without thousands of fsyncs)."""
        if self.recovery_point < self.log_end_offset or self.active_segment.torn:
            self._fsync(self.active_segment)
        self.recovery_point = self.log_end_offset
        self.unflushed_messages = 0
        self.last_flush_ms = now_ms

    # --- read -----------------------------------------------------------------------------

    def read(self, offset: int, max_bytes: int, max_offset: int, min_one_batch: bool) -> FetchSlice | None:
        """Whole batches from the one containing ``offset``, up to ``max_offset`` (exclusive).

        Raises OFFSET_OUT_OF_RANGE outside [log_start_offset, log_end_offset]. Returns None
        when there is nothing to read yet. KIP-74: with ``min_one_batch`` the first batch is
        returned whole even if larger than ``max_bytes``.
        """
        if offset < self.log_start_offset or offset > self.log_end_offset:
            raise KafkaError(
                ErrorCode.offset_out_of_range,
                f"offset {offset} is outside [{self.log_start_offset}, {self.log_end_offset}]",
            )
        found = locate(self.segments, self.base_offsets, offset, max_bytes, max_offset, min_one_batch)
        return None if found is None else FetchSlice(*found)

    def iter_batches(self) -> Iterator[bytes]:
        """Every whole batch from the log start, oldest first (loading internal topics)."""
        return batches_from(self.segments, self.log_start_offset)

    def offset_for_timestamp(self, timestamp: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record at or after ``timestamp`` and at or after the
        log start offset, if any. As in Kafka, the search is in the first segment whose largest
        timestamp reaches ``timestamp``, and the answer is that record's own offset and
        timestamp (records below the log start offset, deleted by DeleteRecords, are skipped)."""
        return offset_for_timestamp(self.segments, timestamp, self.log_start_offset)

    def max_timestamp_offset(self) -> tuple[int, int] | None:
        """(offset, timestamp) of the record with the largest timestamp (ListOffsets -3)."""
        return max_timestamp_offset(self.segments)

    # --- truncation, deletion, retention --------------------------------------------------

    def truncate_to(self, offset: int) -> None:
        """Drop everything at or after ``offset`` (follower divergence, unclean election)."""
        if offset >= self.log_end_offset:
            # Nothing to cut from the log, but an epoch this broker started as leader without
            # appending (start offset = log end) conflicts with the new leader's: drop it, or the
            # follower asks with it again and diverges again forever (Kafka's truncateTo does too).
            self.leader_epoch_cache.truncate_from_end(self.log_end_offset)
            return
        while len(self.segments) > 1 and self.segments[-1].base_offset >= offset:
            self.segments.pop().delete()
            self.base_offsets.pop()
        removed = self.active_segment.truncate_to(offset)
        log.info("truncated %s-%d to offset %d (%d bytes)", self.topic, self.partition, offset, removed)
        self.leader_epoch_cache.truncate_from_end(self.log_end_offset)
        self.recovery_point = min(self.recovery_point, self.log_end_offset)
        self.log_start_offset = min(self.log_start_offset, self.log_end_offset)
        self.producer_state.delete_snapshots_above(self.log_end_offset)
        self._rebuild_producer_state()

    def skip_to(self, offset: int) -> None:
        """A copy of a compacted log (a replica moving between log dirs): the next batch starts
        past the log end, so the next segment starts there (rolled off if it holds data)."""
        if offset <= self.log_end_offset:
            return
        if not self.active_segment.is_empty:
            self.roll()
        self.segments.pop().delete()
        self.base_offsets.pop()
        self._add_segment(self._new_segment(offset))
        self.producer_state.map_end_offset = offset

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Drop every segment and restart the log empty at ``offset`` (a follower whose fetch
        position fell below the leader's log start offset)."""
        for segment in self.segments:
            segment.delete()
        self.segments.clear()
        self.base_offsets.clear()
        self._add_segment(self._new_segment(offset))
        log.info("truncated %s-%d fully; log now starts at %d", self.topic, self.partition, offset)
        self.log_start_offset = offset
        self.recovery_point = offset
        self.leader_epoch_cache.clear()
        self.producer_state.delete_snapshots_above(-1)
        self.producer_state.reset(offset)

    def delete_records_before(self, offset: int, high_watermark: int) -> int:
        """DeleteRecords: move the log start offset to ``offset`` (<= high watermark)."""
        if offset < 0 or offset > high_watermark:
            raise KafkaError(
                ErrorCode.offset_out_of_range,
                f"cannot delete before {offset}: high watermark is {high_watermark}",
            )
        if offset > self.log_start_offset:
            self.log_start_offset = offset
            self.leader_epoch_cache.truncate_from_start(offset)
            self._delete_segments_below(offset)
        return self.log_start_offset

    def _delete_segments_below(self, offset: int) -> int:
        """Delete segments entirely below ``offset``; rolls first if that is all of them."""
        if self.active_segment.next_offset <= offset and not self.active_segment.is_empty:
            self.roll()
        deleted = 0
        while len(self.segments) > 1 and self.segments[1].base_offset <= offset:
            self.segments.pop(0).delete()
            self.base_offsets.pop(0)
            deleted += 1
        if deleted:
            # Producer state outlives the records (KIP-360); only the old snapshots go.
            self.producer_state.delete_snapshots_below(self.segments[0].base_offset)
        return deleted

    def enforce_retention(self, now_ms: int, high_watermark: int) -> int:
        """Delete segments past retention.ms / retention.bytes; returns how many."""
        if not self.config.delete:
            return 0
        cutoff = retention_cutoff(self.segments, self.log_end_offset, high_watermark, self.config, now_ms)
        if cutoff <= self.log_start_offset and cutoff <= self.segments[0].base_offset:
            return 0
        deleted = self._delete_segments_below(cutoff)
        if deleted:
            self.log_start_offset = max(self.log_start_offset, self.segments[0].base_offset)
            self.leader_epoch_cache.truncate_from_start(self.log_start_offset)
            log.info(
                "retention: %s-%d deleted %d segment(s); log start offset now %d",
                self.topic, self.partition, deleted, self.log_start_offset,
            )
        return deleted

    def update_config(self, config: LogConfig) -> None:
        self.config = config


def write_partition_metadata(directory: str, topic_id: str) -> str:
    """Kafka's ``partition.metadata`` (for operators' tools; kbroker takes topic ids from the
    metadata log). Not fsynced here: the log's first flush makes it durable."""
    path = os.path.join(directory, PARTITION_METADATA_FILE)
    replace_atomically(path, f"version: 0\ntopic_id: {topic_id}\n".encode(), durable=False)
    return path
