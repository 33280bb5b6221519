"""TimeIndex: the sparse ``.timeindex`` file mapping timestamps to offsets in a segment.

On-disk format, as Kafka's: 12-byte entries ``timestamp int64, relative_offset int32``;
timestamps strictly increase, so an entry means "no record before this offset has a larger
timestamp than this". Entries are added alongside offset-index entries when the segment's max
timestamp has grown. Kept in memory, appended with ``os.write``, rebuilt by recovery.
"""

from __future__ import annotations

import bisect
import os
import struct

from .file_io import write_all

_ENTRY = struct.Struct(">qi")


class TimeIndex:
    def __init__(self, path: str, base_offset: int) -> None:
        self.path = path
        self.base_offset = base_offset
        self.timestamps: list[int] = []
        self.offsets: list[int] = []
        self._fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)

    def load(self) -> bool:
        raw = os.pread(self._fd, os.fstat(self._fd).st_size, 0)
        usable = len(raw) - len(raw) % _ENTRY.size
        timestamps, offsets = [], []
        for ts, rel in _ENTRY.iter_unpack(raw[:usable]):
            if timestamps and (ts <= timestamps[-1] or self.base_offset + rel < offsets[-1]):
                return False
            timestamps.append(ts)
            offsets.append(self.base_offset + rel)
        self.timestamps, self.offsets = timestamps, offsets
        return usable == len(raw)

    @property
    def last_timestamp(self) -> int:
        return self.timestamps[-1] if self.timestamps else -1

    def maybe_append(self, timestamp: int, offset: int) -> None:
        if timestamp > self.last_timestamp:
            self.timestamps.append(timestamp)
            self.offsets.append(offset)
            write_all(self._fd, _ENTRY.pack(timestamp, offset - self.base_offset))

    def lookup(self, timestamp: int) -> int:
        """An offset from which a forward scan finds the first record with ts >= ``timestamp``."""
        i = bisect.bisect_left(self.timestamps, timestamp) - 1
        return self.offsets[i] if i >= 0 else self.base_offset

    def truncate_to_offset(self, offset: int) -> None:
        """Drop entries at or after ``offset``."""
        keep = bisect.bisect_left(self.offsets, offset)
        self._truncate(keep)

    def reset(self) -> None:
        self._truncate(0)

    def _truncate(self, keep: int) -> None:
        del self.timestamps[keep:]
        del self.offsets[keep:]
        os.ftruncate(self._fd, keep * _ENTRY.size)

    def close(self) -> None:
        os.close(self._fd)
