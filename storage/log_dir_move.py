"""Moving a replica between the ``log.dirs`` of one broker (JBOD): the future log's catch-up.

Kafka's ReplicaAlterLogDirsThread, as steps the caller drives: a *future* log in the destination
directory (``<topic>-<partition>.<id>-future``) copies the current log's batches, byte for byte
with their offsets and leader epochs, until it holds everything the current log holds; then
``LogManager.replace_current_with_future`` swaps it in within the same step, so no append can
fall between the last copy and the swap. Until then every append, read and acknowledgement
stays with the current log: the future log is a copy nobody depends on, and losing it (a
failed write, a crash) loses nothing acknowledged.

The current log may change under the copy: a follower truncation (its leader changed) is met
by comparing leader epochs and truncating the future log where they part; the log start
offset moving (retention, DeleteRecords) is applied at the swap; a compacted log's gaps are
kept (``PartitionLog.skip_to``).
"""

from __future__ import annotations

from kbroker.protocol.records import split_batches

from .log import PartitionLog

COPY_STEP_BYTES = 1 << 20  # per step; the event loop serves requests between steps


def diverged_at(current: PartitionLog, future: PartitionLog) -> int | None:
    """The offset below the future log's end from which its leader epochs disagree with the
    current log's (the current log was truncated and written again since), or None."""
    start, end = future.log_start_offset, future.log_end_offset
    ours, theirs = _epoch_ranges(future, start, end), _epoch_ranges(current, start, end)
    for (epoch_a, start_a), (epoch_b, start_b) in zip(ours, theirs, strict=False):
        if (epoch_a, start_a) != (epoch_b, start_b):
            return min(start_a, start_b)
    if len(ours) != len(theirs):
        return (ours if len(ours) > len(theirs) else theirs)[min(len(ours), len(theirs))][1]
    return None


def _epoch_ranges(plog: PartitionLog, start: int, end: int) -> list[tuple[int, int]]:
    """(epoch, first offset) of each epoch of ``plog`` holding offsets in [start, end)."""
    cache = plog.leader_epoch_cache
    out = []
    for i, (epoch, first) in enumerate(zip(cache.epochs, cache.start_offsets, strict=True)):
        following = cache.start_offsets[i + 1] if i + 1 < len(cache.start_offsets) else None
        if first < end and (following is None or following > start):
            out.append((epoch, max(first, start)))
    return out


def copy_step(current: PartitionLog, future: PartitionLog, now_ms: int, max_bytes: int = COPY_STEP_BYTES) -> bool:
    """Copy up to ``max_bytes`` of batches from ``current`` to ``future``; True when the future
    log holds exactly what the current log holds (time to swap). Raises OSError when the
    future log cannot be written."""
    diverged = diverged_at(current, future)
    if future.log_end_offset > current.log_end_offset:
        diverged = current.log_end_offset if diverged is None else min(diverged, current.log_end_offset)
    if diverged is not None and diverged < future.log_end_offset:
        future.truncate_to(max(diverged, future.log_start_offset))
    if future.log_end_offset < current.log_start_offset:
        future.truncate_fully_and_start_at(current.log_start_offset)
    found = current.read(future.log_end_offset, max_bytes, current.log_end_offset, True)
    if found is None:
        return future.log_end_offset == current.log_end_offset
    data = found.segment.read_bytes(found.position, found.length)
    records = memoryview(bytearray(data[: _whole_batches_length(data)]))
    first_base = split_batches(records)[0][1].base_offset
    if first_base < future.log_end_offset and future.size_in_bytes == 0:
        # The log start lies inside this batch (DeleteRecords): the copy starts with the batch.
        future.truncate_fully_and_start_at(first_base)
    elif first_base > future.log_end_offset:
        future.skip_to(first_base)  # a compacted log: the offsets between were cleaned away
    future.append_as_follower(records, now_ms)
    return future.log_end_offset == current.log_end_offset


def _whole_batches_length(data: bytes) -> int:
    """The length of the whole batches at the start of ``data`` (a read may cut the last)."""
    position = 0
    while position + 12 <= len(data):
        size = int.from_bytes(data[position + 8 : position + 12], "big") + 12
        if position + size > len(data):
            break
        position += size
    return position
