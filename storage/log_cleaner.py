"""LogCleaner: log compaction for ``cleanup.policy=compact`` (and ``compact,delete``), as Kafka's.

What a cleaning does to one partition (Kafka's LogCleaner / Cleaner / LogCleanerManager):

- The *cleanable range* is [first segment, first uncleanable offset): segments wholly below the
  active segment, the last stable offset (no open transaction is touched) and the first segment
  whose largest timestamp is within ``min.compaction.lag.ms``. The *dirty* part starts at the
  partition's entry in ``cleaner-offset-checkpoint``; a log is chosen when dirty bytes / total
  cleanable bytes exceeds ``min.cleanable.dirty.ratio``, when its first dirty batch is older than
  ``max.compaction.lag.ms``, or when tombstones kept by an earlier cleaning have passed their
  delete horizon. The dirtiest such log is cleaned first.
- An offset map (key -> latest offset) is built over the dirty part, skipping records of
  aborted transactions and control batches. Every batch of the cleanable range is then
  filtered: a record stays if no later offset has its key; records without a key and records
  of aborted transactions go. Offsets never change: a kept batch keeps its base offset and its
  last offset delta (so the last sequence of an idempotent producer survives); a batch that
  loses every record is dropped, except that an empty batch header is kept when it is its
  producer's last batch (Kafka's RETAIN_EMPTY, so a retrying producer is not told
  OUT_OF_ORDER_SEQUENCE). Untouched batches are copied byte for byte; a rebuilt batch is
  written uncompressed (Kafka recompresses with the original codec; the records are the same).
- Tombstones and transaction markers are removed in two steps (KIP-534): the first cleaning
  that keeps a tombstone, or a marker whose transaction has no records left, sets the batch's
  delete horizon (attribute bit 0x40, horizon in ``baseTimestamp``, record timestamp deltas
  relative to it) to now + ``delete.retention.ms``; a cleaning after the horizon drops them.
- Consecutive segments are merged while their sizes sum to at most ``segment.bytes``.

Replacing segments (crash-safe at every step; Kafka's scheme, recovery in
``log_cleaner_recovery.py``): the worker writes and fsyncs ``<base>.log.cleaned`` and
``<base>.txnindex.cleaned`` (always created, maybe empty) per group, and builds its
``.index.cleaned`` / ``.timeindex.cleaned``; then, on the event loop and without an await in
between, all are renamed to ``.swap`` (the commit point), the old segments' files unlinked, the
``.swap`` files renamed into place (``.log.swap`` last), the directory
fsynced, and the new segment replaces the old ones in the partition's segment list, so appends
and fetches never see a half-swapped list.

The old segments' descriptors stay open for ``file.delete.delay.ms``, so a fetch that already
holds one (``pread`` or a dup'd fd for ``sendfile``) finishes from the unlinked file.
Per-record work runs in a worker thread on dup'd descriptors of the (immutable) non-active
segments; if retention, DeleteRecords or topic deletion changed those segments meanwhile, the
swap is abandoned and the ``.cleaned`` files removed.

The worker half (offset map, batch filtering, writing ``.cleaned`` files) is
``log_cleaner_job.py``; this module chooses logs, runs jobs and swaps their results in.

``cleaner-offset-checkpoint`` in each log dir (Kafka's text checkpoint, entries
``topic partition offset``) holds each partition's first dirty offset.
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from .checkpoint import read_checkpoint, write_checkpoint
from .file_io import fsync_dir, unlink_quietly
from .log_cleaner_job import CleaningAborted, CleanJob, CleanStats, Source, remove_cleaned, run_job
from .log_cleaner_recovery import CLEANED_SUFFIX, SEGMENT_SUFFIXES, SWAP_SUFFIX
from .segment import LogSegment, segment_file_name

if TYPE_CHECKING:
    from .log import PartitionLog
    from .log_manager import LogManager

log = logging.getLogger(__name__)

CLEANER_CHECKPOINT_FILE = "cleaner-offset-checkpoint"
_MAX_LONG = 2**63 - 1


class LogCleaner:
    """Cleans the compacted partitions of a LogManager, one at a time, dirtiest first.

    Invariants: only one cleaning runs at a time; the segment list of a PartitionLog is only
    changed on the event loop (``_swap``), in one step; ``first_dirty[tp]`` is a segment base
    offset or the log start offset, persisted in each log dir's ``cleaner-offset-checkpoint``.
    """

    def __init__(self, log_manager: LogManager, backoff_ms: int = 15000,
                 high_watermark: Callable[[str, int], int | None] | None = None) -> None:
        self.log_manager = log_manager
        self.backoff_s = backoff_ms / 1000
        self.high_watermark = high_watermark
        self.first_dirty: dict[tuple[str, int], int] = {}
        self.delete_horizons: dict[tuple[str, int], int] = {}
        self.stats: list[CleanStats] = []
        self._stop = threading.Event()
        self._job_stop = threading.Event()
        for log_dir in log_manager.log_dirs:
            for topic, partition, offset in read_checkpoint(os.path.join(log_dir, CLEANER_CHECKPOINT_FILE), 3):
                self.first_dirty[(topic, int(partition))] = int(offset)

    async def run(self) -> None:
        """Background loop: clean the dirtiest log; back off when there is nothing to clean."""
        while not self._stop.is_set():
            try:
                cleaned = await self.clean_once()
            except asyncio.CancelledError:
                raise
            except CleaningAborted as exc:
                log.info("log cleaning abandoned: %s", exc)
                cleaned = None
            except Exception:  # a bad segment must not stop cleaning of every other log
                log.exception("log cleaner round failed")
                cleaned = None
            if cleaned is None:
                await asyncio.sleep(self.backoff_s)

    def stop(self) -> None:
        """Stop the loop and make a running worker thread give up at its next batch."""
        self._stop.set()
        self._job_stop.set()

    async def clean_once(self, now_ms: int | None = None) -> CleanStats | None:
        """Clean the dirtiest cleanable log, if any; returns what was done."""
        now = self.log_manager.clock.wall_ms() if now_ms is None else now_ms
        for gone in set(self.first_dirty) - set(self.log_manager.logs):
            del self.first_dirty[gone]  # a deleted topic; a new one of the same name starts dirty
            self.delete_horizons.pop(gone, None)
        best: tuple[float, PartitionLog] | None = None
        for plog in list(self.log_manager.logs.values()):
            score = self._cleanable_score(plog, now)
            if score is not None and (best is None or score > best[0]):
                best = (score, plog)
        if best is None:
            return None
        return await self.clean_log(best[1], now)

    def _first_dirty(self, plog: PartitionLog) -> int:
        offset = self.first_dirty.get((plog.topic, plog.partition), plog.log_start_offset)
        if offset < plog.log_start_offset or offset > plog.log_end_offset:
            offset = plog.log_start_offset  # Kafka: a checkpoint outside the log is reset
        return offset

    def _clean_end(self, plog: PartitionLog, now: int) -> int:
        """The first uncleanable offset, lowered to a segment boundary."""
        upper = plog.active_segment.base_offset
        first_unstable = plog.producer_state.first_unstable_offset()
        if first_unstable is not None:
            upper = min(upper, first_unstable)
        if self.high_watermark is not None:
            hw = self.high_watermark(plog.topic, plog.partition)
            if hw is not None:
                upper = min(upper, hw)
        lag = plog.config.min_compaction_lag_ms
        end = plog.segments[0].base_offset
        for i, segment in enumerate(plog.segments[:-1]):
            segment_end = plog.segments[i + 1].base_offset
            if segment_end > upper or (lag > 0 and segment.largest_timestamp() > now - lag):
                break
            end = segment_end
        return end

    def _cleanable_score(self, plog: PartitionLog, now: int) -> float | None:
        """Dirty ratio of a log that should be cleaned now, else None (Kafka's grabFilthiestCompactedLog)."""
        if not plog.config.compact:
            return None
        end = self._clean_end(plog, now)
        first_dirty = min(self._first_dirty(plog), end)
        clean_bytes = dirty_bytes = 0
        first_dirty_ts: int | None = None
        for i, segment in enumerate(plog.segments[:-1]):
            segment_end = plog.segments[i + 1].base_offset
            if segment_end > end:
                break
            if segment_end <= first_dirty:
                clean_bytes += segment.size
            else:
                dirty_bytes += segment.size
                if first_dirty_ts is None and not segment.is_empty:
                    first_dirty_ts = next((b.max_timestamp for b in segment.scan(0, segment.size)), None)
        if dirty_bytes > 0:
            ratio = dirty_bytes / (clean_bytes + dirty_bytes)
            max_lag = plog.config.max_compaction_lag_ms
            overdue = max_lag < _MAX_LONG and first_dirty_ts is not None and first_dirty_ts < now - max_lag
            if ratio > plog.config.min_cleanable_ratio or overdue:
                return ratio
        horizon = self.delete_horizons.get((plog.topic, plog.partition))
        if horizon is not None and horizon <= now and clean_bytes > 0:
            return 0.0  # nothing dirty, but kept tombstones have passed their delete horizon
        return None

    async def clean_log(self, plog: PartitionLog, now_ms: int | None = None) -> CleanStats | None:
        """Clean one log over its whole cleanable range now (the ratio is not checked)."""
        now = self.log_manager.clock.wall_ms() if now_ms is None else now_ms
        tp = (plog.topic, plog.partition)
        end = self._clean_end(plog, now)
        segments = [s for i, s in enumerate(plog.segments[:-1]) if plog.segments[i + 1].base_offset <= end]
        if not segments:
            return None
        started = time.monotonic()
        ends = [plog.segments[i + 1].base_offset for i in range(len(segments))]
        aborted = [
            entry for segment in plog.segments for entry in segment.txn_index.entries if entry.first_offset < end
        ]
        producers = {pid: e.batches[-1].last_offset for pid, e in plog.producer_state.producers.items() if e.batches}
        sources = [
            Source(s, os.dup(s.fd), s.size, s.base_offset, e, list(s.txn_index.entries))
            for s, e in zip(segments, ends, strict=True)
        ]
        job = CleanJob(plog.directory, sources, min(self._first_dirty(plog), end), end, aborted, producers, now,
                   plog.config.delete_retention_ms, plog.config.segment_bytes, plog.config.index_interval_bytes,
                   threading.Event())
        stats = CleanStats(plog.topic, plog.partition, job.first_dirty, end, len(segments),
                           bytes_before=sum(s.size for s in segments))
        self._job_stop = job.stop
        if self._stop.is_set():
            job.stop.set()
        try:
            stats.groups = await asyncio.to_thread(run_job, job, stats)
        except asyncio.CancelledError:
            job.stop.set()  # the thread stops at its next batch and removes its files
            raise
        except OSError as exc:
            if self.log_manager.logs.get(tp) is not plog:  # its directory went with the topic
                raise CleaningAborted("log was deleted during cleaning") from exc
            raise
        try:
            self._swap(plog, job, stats)
        except BaseException:
            remove_cleaned(job)
            if self.log_manager.logs.get(tp) is not plog:
                # The topic was deleted while the worker wrote into its directory (so rmtree may
                # have left it behind): an empty directory must not come back as a partition.
                try:
                    os.rmdir(plog.directory)
                except OSError:
                    pass
            raise
        stats.segments_after = len(stats.groups)
        stats.bytes_after = sum(g.size for g in stats.groups)
        stats.seconds = time.monotonic() - started
        self.first_dirty[tp] = end
        if stats.pending_delete_horizon is None:
            self.delete_horizons.pop(tp, None)
        else:
            self.delete_horizons[tp] = stats.pending_delete_horizon
        self._write_checkpoint(plog)
        self.stats.append(stats)
        del self.stats[:-100]
        log.info(
            "cleaned %s-%d [%d, %d): %d segments %d bytes %d records -> %d segments %d bytes %d records "
            "(%d keys) in %.3fs",
            plog.topic, plog.partition, job.first_dirty, end, stats.segments_before, stats.bytes_before,
            stats.records_before, stats.segments_after, stats.bytes_after, stats.records_after, stats.keys,
            stats.seconds,
        )
        return stats

    def _swap(self, plog: PartitionLog, job: CleanJob, stats: CleanStats) -> None:
        """Replace each group of old segments by its cleaned segment (event loop, no await)."""
        if self.log_manager.logs.get((plog.topic, plog.partition)) is not plog:
            raise CleaningAborted("log was deleted during cleaning")
        old = [s.segment for s in job.sources]
        try:
            first = next(i for i, s in enumerate(plog.segments) if s is old[0])
        except StopIteration:
            raise CleaningAborted("segments were deleted during cleaning") from None
        if plog.segments[first : first + len(old)] != old or first + len(old) >= len(plog.segments):
            raise CleaningAborted("segments changed during cleaning")
        directory = plog.directory
        delay_s = plog.config.file_delete_delay_ms / 1000
        loop = asyncio.get_running_loop()
        for cleaned in stats.groups:
            base = cleaned.base_offset
            names = [segment_file_name(base, suffix) for suffix in SEGMENT_SUFFIXES]
            for name in names:
                os.replace(os.path.join(directory, name + CLEANED_SUFFIX), os.path.join(directory, name + SWAP_SUFFIX))
            fsync_dir(directory)
            for source in cleaned.sources:
                segment = source.segment
                segment.retire()  # its open descriptor keeps the data readable for reads in flight
                for path in (segment.log_path, segment.offset_index.path, segment.time_index.path,
                             segment.txn_index.path):
                    unlink_quietly(path)
                loop.call_later(delay_s, _close_quietly, segment)
            for name in names[::-1]:  # the .log last: recovery keys on it
                os.replace(os.path.join(directory, name + SWAP_SUFFIX), os.path.join(directory, name))
            fsync_dir(directory)
            segment = LogSegment(directory, base, plog.config.index_interval_bytes, plog.files)
            if not segment.load_without_recovery():  # indexes were built by the worker
                segment.recover()
                segment.on_become_inactive()
            segment.created_ms = cleaned.sources[-1].segment.created_ms
            index = plog.segments.index(cleaned.sources[0].segment)
            count = len(cleaned.sources)
            plog.segments[index : index + count] = [segment]
            plog.base_offsets[index : index + count] = [base]

    def _write_checkpoint(self, plog: PartitionLog) -> None:
        log_dir = os.path.dirname(plog.directory)
        live = {tp for tp, p in self.log_manager.logs.items() if os.path.dirname(p.directory) == log_dir}
        entries = sorted((t, p, o) for (t, p), o in self.first_dirty.items() if (t, p) in live)
        write_checkpoint(os.path.join(log_dir, CLEANER_CHECKPOINT_FILE), [(t, str(p), str(o)) for t, p, o in entries])


def _close_quietly(segment: LogSegment) -> None:
    try:
        segment.close_file()
    except OSError:
        pass
