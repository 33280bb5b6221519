"""OffsetIndex: the sparse ``.index`` file mapping offsets to byte positions in a segment.

On-disk format, as Kafka's: 8-byte entries ``relative_offset int32, position int32`` where
``relative_offset = last offset of a batch - segment base offset`` and ``position`` is where
that batch starts. Entries are strictly increasing in both fields. An entry is added at most
every ``index.interval.bytes`` of log: for the first batch that starts more than that many
bytes after the last indexed batch's start (never for the segment's first batch).

The whole index lives in memory. The file is written only by ``persist`` (when the segment
rolls, at flush and at close), so an index holds no file descriptor and costs no system call
per append; after a crash recovery rebuilds it from the log, so it never needs to be durable
on its own. A segment smaller than ``index.interval.bytes`` has no entry (Kafka's rule), so an
empty index file is valid; a non-empty segment whose index file is missing is recovered rather
than trusted.
"""

from __future__ import annotations

import bisect
import os
import struct

from .index_file import IndexFile

_ENTRY = struct.Struct(">ii")


class OffsetIndex:
    """Invariant: ``offsets`` and ``positions`` are sorted and the same length."""

    def __init__(self, path: str, base_offset: int) -> None:
        self.path = path
        self.base_offset = base_offset
        self.offsets: list[int] = []
        self.positions: list[int] = []
        self._file = IndexFile(path, _ENTRY.size)

    def load(self, log_size: int) -> bool:
        """Read the file; False if it is missing entries or inconsistent with a log of ``log_size``."""
        raw = self._file.read()
        usable = len(raw) - len(raw) % _ENTRY.size
        offsets: list[int] = []
        positions: list[int] = []
        for rel, pos in _ENTRY.iter_unpack(raw[:usable]):
            if (offsets and (rel <= offsets[-1] - self.base_offset or pos <= positions[-1])) or (
                pos >= log_size
            ):
                return False
            offsets.append(self.base_offset + rel)
            positions.append(pos)
        self.offsets, self.positions = offsets, positions
        self._file.persisted = len(offsets)
        return usable == len(raw) and (bool(offsets) or log_size == 0 or os.path.exists(self.path))

    def append(self, last_offset: int, position: int) -> None:
        self.offsets.append(last_offset)
        self.positions.append(position)

    def persist(self) -> None:
        """Write the entries the file lacks (undone on failure)."""
        done = self._file.persisted
        self._file.append_entries(
            b"".join(_ENTRY.pack(o - self.base_offset, p)
                     for o, p in zip(self.offsets[done:], self.positions[done:], strict=True)),
            len(self.offsets),
        )

    def lookup(self, offset: int) -> int:
        """Position of the last indexed batch whose last offset is <= ``offset`` (else 0).

        A scan from there finds the batch containing ``offset``.
        """
        i = bisect.bisect_right(self.offsets, offset) - 1
        return self.positions[i] if i >= 0 else 0

    def truncate_to_position(self, position: int) -> None:
        """Drop entries pointing at or past ``position`` (the log is being cut there)."""
        self._truncate(bisect.bisect_left(self.positions, position))

    def reset(self) -> None:
        self._truncate(0)

    def _truncate(self, keep: int) -> None:
        del self.offsets[keep:]
        del self.positions[keep:]
        self._file.truncate_entries(keep)

    def reset_file(self) -> None:
        """Remove the file, keeping the entries in memory (it is rebuilt from the log)."""
        self._file.remove()
