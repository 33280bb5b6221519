"""LeaderEpochCache: which leader epoch started at which offset, for one partition.

Persisted in ``leader-epoch-checkpoint`` (Kafka's format: version, count, then
``epoch start_offset`` lines). Invariant: epochs and start offsets both strictly increase.
Followers and consumers use it through OffsetForLeaderEpoch to find where their log diverges
from the leader's (KIP-101/KIP-279), so answers must be exact.

A new epoch is in the file before the cache (and so before any record of it) has it: if the
file cannot be written, ``assign`` raises and nothing changed. The file is replaced atomically
but not fsynced then (as Kafka since KAFKA-15046): a new leadership of thousands of partitions
must not cost thousands of fsyncs. ``flush`` makes it durable, and the log calls it before
every fsync that advances its recovery point; what an OS crash may lose above that point is
rebuilt from the recovered batches' partition leader epochs (``restore``). A truncation changes
the cache even if the file cannot be rewritten then (the log was cut regardless): the stale
file only holds epochs past the log end or before its start, which loading drops again.
"""

from __future__ import annotations

import bisect
import logging
import os

from .checkpoint import read_checkpoint, write_checkpoint
from .file_io import fsync_file

log = logging.getLogger(__name__)

CHECKPOINT_FILE = "leader-epoch-checkpoint"
UNDEFINED_EPOCH = -1
UNDEFINED_OFFSET = -1


class LeaderEpochCache:
    def __init__(self, directory: str) -> None:
        self.path = os.path.join(directory, CHECKPOINT_FILE)
        self.epochs: list[int] = []
        self.start_offsets: list[int] = []
        self._unsynced = False  # written since the last flush()
        for epoch, offset in read_checkpoint(self.path, 2):
            self.epochs.append(int(epoch))
            self.start_offsets.append(int(offset))

    @property
    def latest_epoch(self) -> int:
        return self.epochs[-1] if self.epochs else UNDEFINED_EPOCH

    def assign(self, epoch: int, start_offset: int) -> None:
        """Record that ``epoch`` begins at ``start_offset`` (no-op if already known)."""
        if self.epochs and epoch <= self.epochs[-1]:
            return
        # An older epoch that claims the same or a later start has no records: drop it.
        keep = bisect.bisect_left(self.start_offsets, start_offset)
        epochs = [*self.epochs[:keep], epoch]
        start_offsets = [*self.start_offsets[:keep], start_offset]
        _write(self.path, epochs, start_offsets)
        self.epochs, self.start_offsets = epochs, start_offsets
        self._unsynced = True

    def restore(self, epoch: int, base_offset: int) -> None:
        """Recovery found a batch of ``epoch`` at ``base_offset``: the cache must know that epoch
        (an OS crash may have lost the unflushed file)."""
        if epoch >= 0 and (not self.epochs or epoch > self.epochs[-1]):
            self.assign(epoch, base_offset)

    def flush(self) -> None:
        """Make the file durable (before the log's recovery point moves past what it covers)."""
        if self._unsynced and os.path.exists(self.path):
            fsync_file(self.path)
        self._unsynced = False

    def end_offset_for(self, epoch: int, log_end_offset: int) -> tuple[int, int]:
        """(largest epoch <= ``epoch``, the offset where that epoch ended), as Kafka answers.

        For the latest epoch the end is the log end offset. Newer than all known (or
        UNDEFINED_EPOCH): (UNDEFINED_EPOCH, UNDEFINED_OFFSET). Older than all known (its
        history was deleted): ``epoch`` itself and the start of the first known epoch.
        """
        if epoch == UNDEFINED_EPOCH or not self.epochs or epoch > self.epochs[-1]:
            return UNDEFINED_EPOCH, UNDEFINED_OFFSET
        if epoch == self.epochs[-1]:
            return epoch, log_end_offset
        i = bisect.bisect_right(self.epochs, epoch) - 1
        if i < 0:
            return epoch, self.start_offsets[0]
        return self.epochs[i], self.start_offsets[i + 1]

    def epoch_for_offset(self, offset: int) -> int:
        i = bisect.bisect_right(self.start_offsets, offset) - 1
        return self.epochs[i] if i >= 0 else UNDEFINED_EPOCH

    def truncate_from_end(self, end_offset: int) -> None:
        """The log was cut at ``end_offset``: forget epochs that start at or after it."""
        keep = bisect.bisect_left(self.start_offsets, end_offset)
        if keep < len(self.epochs):
            del self.epochs[keep:]
            del self.start_offsets[keep:]
            self._flush()

    def truncate_from_start(self, start_offset: int) -> None:
        """The log now starts at ``start_offset``: the epoch covering it starts there."""
        i = bisect.bisect_right(self.start_offsets, start_offset) - 1
        if i < 0:
            return
        if i > 0 or self.start_offsets[0] != start_offset:
            del self.epochs[:i]
            del self.start_offsets[:i]
            self.start_offsets[0] = start_offset
            self._flush()

    def clear(self) -> None:
        self.epochs.clear()
        self.start_offsets.clear()
        self._flush()

    def _flush(self) -> None:
        try:
            _write(self.path, self.epochs, self.start_offsets)
            self._unsynced = True
        except OSError as exc:
            log.warning("%s not rewritten after truncation (%s): loading drops the stale entries", self.path, exc)


def _write(path: str, epochs: list[int], start_offsets: list[int]) -> None:
    write_checkpoint(path, [(str(e), str(o)) for e, o in zip(epochs, start_offsets, strict=True)], durable=False)
