"""OffsetIndex: the sparse ``.index`` file mapping offsets to byte positions in a segment.

On-disk format, as Kafka's: 8-byte entries ``relative_offset int32, position int32`` where
``relative_offset = last offset of a batch - segment base offset`` and ``position`` is where
that batch starts. Entries are strictly increasing in both fields. An entry is added at most
every ``index.interval.bytes`` of log. The whole index is kept in memory too; the file is
appended with ``os.write`` and is rebuilt from the log whenever recovery runs, so it never
needs to be durable on its own.
"""

from __future__ import annotations

import bisect
import os
import struct

from .file_io import write_all

_ENTRY = struct.Struct(">ii")


class OffsetIndex:
    """Invariant: ``offsets`` and ``positions`` are sorted and the same length."""

    def __init__(self, path: str, base_offset: int) -> None:
        self.path = path
        self.base_offset = base_offset
        self.offsets: list[int] = []
        self.positions: list[int] = []
        self._fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)

    def load(self, log_size: int) -> bool:
        """Read the file; returns False if it is inconsistent with a log of ``log_size``."""
        raw = os.pread(self._fd, os.fstat(self._fd).st_size, 0)
        usable = len(raw) - len(raw) % _ENTRY.size
        offsets, positions = [], []
        for rel, pos in _ENTRY.iter_unpack(raw[:usable]):
            if (offsets and (rel <= offsets[-1] - self.base_offset or pos <= positions[-1])) or (
                pos >= log_size
            ):
                return False
            offsets.append(self.base_offset + rel)
            positions.append(pos)
        self.offsets, self.positions = offsets, positions
        return usable == len(raw)

    def append(self, last_offset: int, position: int) -> None:
        self.offsets.append(last_offset)
        self.positions.append(position)
        write_all(self._fd, _ENTRY.pack(last_offset - self.base_offset, position))

    def lookup(self, offset: int) -> int:
        """Position of the last indexed batch whose last offset is <= ``offset`` (else 0).

        A scan from there finds the batch containing ``offset``.
        """
        i = bisect.bisect_right(self.offsets, offset) - 1
        return self.positions[i] if i >= 0 else 0

    def truncate_to_position(self, position: int) -> None:
        """Drop entries pointing at or past ``position`` (the log is being cut there)."""
        keep = bisect.bisect_left(self.positions, position)
        self._truncate(keep)

    def reset(self) -> None:
        self._truncate(0)

    def _truncate(self, keep: int) -> None:
        del self.offsets[keep:]
        del self.positions[keep:]
        os.ftruncate(self._fd, keep * _ENTRY.size)

    def close(self) -> None:
        os.close(self._fd)
