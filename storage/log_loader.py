"""Start-up of one partition log: its directory's files made into a consistent list of segments
(Kafka's LogLoader), and the producer state rebuilt from them.

``load_segments`` finishes an interrupted cleaning, opens every ``<base offset>.log`` with its
indexes and recovers (CRC scan, index rebuild) each segment that cannot be trusted: after an
unclean shutdown, every segment holding offsets at or past the recovery point; after a clean
one, any segment whose index files do not check out. A torn or corrupt tail is truncated and
every later segment deleted (nothing after a corrupt point is reachable). Leader epochs of
recovered batches are restored into the epoch cache, which is durable only up to the recovery
point.

``rebuild_producer_state`` loads the newest producer snapshot at or below the log end and
replays batch headers after it (control batches are read whole for their marker type); each
aborted transaction met on the way gets its ``.txnindex`` entry again (``index_aborted``).
"""

from __future__ import annotations

import bisect
import logging
import os
import time

from kbroker.protocol.records import HEADER_SIZE, read_header

from .leader_epoch_cache import LeaderEpochCache
from .log_cleaner_recovery import complete_interrupted_cleaning
from .producer_state import CompletedTxn, ProducerStateManager, end_txn_marker
from .segment import LogSegment, SegmentFileCache
from .transaction_index import AbortedTxn

log = logging.getLogger(__name__)


def load_segments(directory: str, label: str, index_interval_bytes: int, files: SegmentFileCache,
                  epoch_cache: LeaderEpochCache, *, clean_shutdown: bool, recovery_point: int,
                  log_start_offset: int) -> list[LogSegment]:
    """The directory's segments, oldest first, each recovered if it cannot be trusted (see the
    module docstring); one new empty segment at ``log_start_offset`` if there is none.
    ``label`` (topic-partition) names the log in what is logged."""
    complete_interrupted_cleaning(directory, index_interval_bytes)
    bases = sorted(int(name[:-4]) for name in os.listdir(directory) if name.endswith(".log"))
    if not bases:
        return [LogSegment(directory, log_start_offset, index_interval_bytes, files, create=True)]
    segments: list[LogSegment] = []
    started = time.monotonic()
    for i, base in enumerate(bases):
        segment = LogSegment(directory, base, index_interval_bytes, files)
        next_base = bases[i + 1] if i + 1 < len(bases) else None
        must_recover = not clean_shutdown and (next_base is None or next_base > recovery_point)
        if must_recover or not segment.load_without_recovery():
            truncated = segment.recover(epoch_cache.restore)
            if truncated:
                log.warning(
                    "recovery: %s segment %d: truncated %d bytes of torn or corrupt tail (log end offset now %d)",
                    label, base, truncated, segment.next_offset,
                )
                for later in bases[i + 1 :]:
                    LogSegment(directory, later, index_interval_bytes, files).delete()
                segments.append(segment)
                break
            if next_base is not None:
                _persist_recovered_indexes(segment)
        segment.close_file()  # reopened when read: a partition nobody uses holds no descriptor
        segments.append(segment)
        if time.monotonic() - started > 1.0 and i + 1 < len(bases):
            log.info("recovery: %s loaded %d/%d segments", label, i + 1, len(bases))
    return segments


def _persist_recovered_indexes(segment: LogSegment) -> None:
    """A recovered inactive segment keeps its rebuilt indexes (else every start rebuilds them)."""
    try:
        segment.persist_indexes()
    except OSError as exc:
        log.warning("recovery: indexes of %s not written (%s): rebuilt again at the next start",
                    segment.log_path, exc)


def rebuild_producer_state(state: ProducerStateManager, segments: list[LogSegment], base_offsets: list[int],
                           log_end_offset: int, label: str) -> None:
    """Newest snapshot at or below the log end, then replay batch headers after it."""
    start = state.load_latest_snapshot(log_end_offset)
    if start is None:
        start = segments[0].base_offset
        state.reset(start)
    replayed = 0
    if start < log_end_offset:
        i = max(bisect.bisect_right(base_offsets, start) - 1, 0)
        for segment in segments[i:]:
            first = segment.find_batch(start) if segment.base_offset <= start else None
            position = first.position if first is not None else 0
            for batch in segment.scan(position):
                if batch.last_offset < start:
                    continue
                header = read_header(segment.read_bytes(batch.position, HEADER_SIZE))
                marker = None
                if header.is_control and header.producer_id >= 0:
                    marker = end_txn_marker(segment.read_bytes(batch.position, batch.size))
                completed = state.replay_batch(header, marker)
                if completed is not None and completed.is_aborted:
                    index_aborted(segment, completed, state)
                replayed += 1
    state.map_end_offset = log_end_offset
    if replayed:
        log.info("producer state of %s rebuilt from offset %d: %d batch headers replayed, %d producers",
                 label, start, replayed, len(state.producers))


def index_aborted(segment: LogSegment, completed: CompletedTxn, state: ProducerStateManager) -> None:
    """The ``.txnindex`` entry of an aborted transaction, in the segment holding its marker."""
    segment.txn_index.append(AbortedTxn(
        completed.producer_id, completed.first_offset, completed.last_offset,
        state.last_stable_offset_after(completed),
    ))
