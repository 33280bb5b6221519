"""TimeIndex: the sparse ``.timeindex`` file mapping timestamps to offsets in a segment.

On-disk format, as Kafka's: 12-byte entries ``timestamp int64, relative_offset int32``;
timestamps strictly increase, so an entry means "no record before this offset has a larger
timestamp than this". Entries are added alongside offset-index entries when the segment's max
timestamp has grown, and a last one when the segment rolls. Kept in memory and written by
``persist`` like the OffsetIndex (no descriptor held, rebuilt by recovery).
"""

from __future__ import annotations

import bisect
import struct

from .index_file import IndexFile

_ENTRY = struct.Struct(">qi")


class TimeIndex:
    def __init__(self, path: str, base_offset: int) -> None:
        self.path = path
        self.base_offset = base_offset
        self.timestamps: list[int] = []
        self.offsets: list[int] = []
        self._file = IndexFile(path, _ENTRY.size)

    def load(self) -> bool:
        raw = self._file.read()
        usable = len(raw) - len(raw) % _ENTRY.size
        timestamps: list[int] = []
        offsets: list[int] = []
        for ts, rel in _ENTRY.iter_unpack(raw[:usable]):
            if timestamps and (ts <= timestamps[-1] or self.base_offset + rel < offsets[-1]):
                return False
            timestamps.append(ts)
            offsets.append(self.base_offset + rel)
        self.timestamps, self.offsets = timestamps, offsets
        self._file.persisted = len(timestamps)
        return usable == len(raw)

    @property
    def last_timestamp(self) -> int:
        return self.timestamps[-1] if self.timestamps else -1

    def maybe_append(self, timestamp: int, offset: int) -> None:
        if timestamp > self.last_timestamp:
            self.timestamps.append(timestamp)
            self.offsets.append(offset)

    def persist(self) -> None:
        """Write the entries the file lacks (undone on failure)."""
        done = self._file.persisted
        self._file.append_entries(
            b"".join(_ENTRY.pack(t, o - self.base_offset)
                     for t, o in zip(self.timestamps[done:], self.offsets[done:], strict=True)),
            len(self.timestamps),
        )

    def lookup(self, timestamp: int) -> int:
        """An offset from which a forward scan finds the first record with ts >= ``timestamp``."""
        i = bisect.bisect_left(self.timestamps, timestamp) - 1
        return self.offsets[i] if i >= 0 else self.base_offset

    def truncate_to_offset(self, offset: int) -> None:
        """Drop entries at or after ``offset``."""
        self._truncate(bisect.bisect_left(self.offsets, offset))

    def reset(self) -> None:
        self._truncate(0)

    def _truncate(self, keep: int) -> None:
        del self.timestamps[keep:]
        del self.offsets[keep:]
        self._file.truncate_entries(keep)

    def reset_file(self) -> None:
        """Remove the file, keeping the entries in memory (it is rebuilt from the log)."""
        self._file.remove()
