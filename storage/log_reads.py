"""The read side of a partition log: lookups across its segments, oldest first.

Where a fetch starts and how many bytes it takes (whole batches from the one holding the fetch
offset up to a bound offset; KIP-74's first batch whole even past the byte limit), which record
first reaches a timestamp, which has the largest one, which aborted transactions overlap a
read_committed fetch, and every batch from the log start for loading an internal topic. Nothing
here changes the log; ``PartitionLog`` checks the offsets against its bounds before asking.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterator, Sequence

from kbroker.protocol.records import iter_records

from .segment import LogSegment
from .transaction_index import AbortedTxn


def locate(segments: Sequence[LogSegment], base_offsets: Sequence[int], offset: int, max_bytes: int,
           max_offset: int, min_one_batch: bool) -> tuple[LogSegment, int, int] | None:
    """(segment, position, length) of whole batches from the one containing ``offset`` up to
    ``max_offset`` (exclusive) and ``max_bytes`` (the first batch whole with ``min_one_batch``);
    None if there is nothing to read yet."""
    if offset >= max_offset:
        return None
    i = bisect.bisect_right(base_offsets, offset) - 1
    while i < len(segments):
        segment = segments[i]
        batch = segment.find_batch(offset)
        if batch is not None:
            end = segment.size if max_offset >= segment.next_offset else segment.position_of(max_offset)
            available = end - batch.position
            if available <= 0:
                return None
            length = min(max_bytes, available)
            if min_one_batch:
                length = max(length, min(batch.size, available))
            if length <= 0:
                return None
            return segment, batch.position, length
        i += 1
    return None


def batches_from(segments: Sequence[LogSegment], log_start_offset: int) -> Iterator[bytes]:
    """Every whole batch ending at or after ``log_start_offset``, oldest first."""
    for segment in list(segments):
        for batch in segment.scan(0):
            if batch.last_offset >= log_start_offset:
                yield segment.read_bytes(batch.position, batch.size)


def offset_for_timestamp(segments: Sequence[LogSegment], timestamp: int,
                         log_start_offset: int) -> tuple[int, int] | None:
    """(offset, timestamp) of the first record at or after ``timestamp`` and ``log_start_offset``:
    searched, as in Kafka, in the first segment whose largest timestamp reaches ``timestamp``."""
    for segment in segments:
        if segment.max_timestamp >= timestamp:
            return segment.find_offset_by_timestamp(timestamp, log_start_offset)
    return None


def max_timestamp_offset(segments: Sequence[LogSegment]) -> tuple[int, int] | None:
    """(offset, timestamp) of the record with the largest timestamp, if any has one."""
    best = max(segments, key=lambda s: s.max_timestamp)
    if best.max_timestamp < 0:
        return None
    batch = best.find_batch(best.offset_of_max_timestamp)
    if batch is None:
        return None
    for record in iter_records(best.read_bytes(batch.position, batch.size)):
        if record.timestamp == best.max_timestamp:
            return record.offset, record.timestamp
    return batch.last_offset, best.max_timestamp


def aborted_txns(segments: Sequence[LogSegment], base_offsets: Sequence[int], fetch_offset: int,
                 upper_bound: int) -> list[AbortedTxn]:
    """Aborted transactions overlapping [fetch_offset, upper_bound), from the segments' indexes."""
    i = max(bisect.bisect_right(base_offsets, fetch_offset) - 1, 0)
    out: list[AbortedTxn] = []
    for segment in segments[i:]:
        if segment.base_offset >= upper_bound and out:
            break
        out.extend(segment.txn_index.collect(fetch_offset, upper_bound))
    return out
