"""LogSegment: one ``.log`` file of whole record batches plus its offset and time indexes.

Files are named by the segment's base offset, zero-padded to 20 digits
(``00000000000000000000.log``, ``.index``, ``.timeindex``, and ``.txnindex`` once a
transaction aborts in it). The ``.log`` file is a plain
concatenation of magic-v2 record batches exactly as they travel on the wire, with absolute
base offsets patched in. Invariants: batches are contiguous from position 0; offsets
increase; ``next_offset`` is one past the last offset in the segment (``base_offset`` when
empty); ``size`` is the file length. Appends use ``os.write`` on an ``O_APPEND`` descriptor,
so the bytes are in the OS when ``append`` returns.
"""

from __future__ import annotations

import logging
import os
import struct
import time
from collections.abc import Iterator
from dataclasses import dataclass

from kbroker.protocol.records import HEADER_SIZE, LOG_OVERHEAD, crc_is_valid, iter_records, read_header

from .file_io import pread_exact, write_all
from .offset_index import OffsetIndex
from .time_index import TimeIndex
from .transaction_index import TransactionIndex

log = logging.getLogger(__name__)

# What a forward scan needs of each batch header: baseOffset, batchLength, and up to
# maxTimestamp (for timestamp searches).
_SCAN = struct.Struct(">qiibIhiqq")
_SCAN_SIZE = _SCAN.size  # 43 bytes
_RECOVERY_CHUNK = 8 * 1024 * 1024


def segment_file_name(base_offset: int, suffix: str) -> str:
    return f"{base_offset:020d}{suffix}"


@dataclass(slots=True, frozen=True)
class BatchPosition:
    """Where one batch sits in a segment, and what a scan needs to know of it."""

    position: int
    size: int
    base_offset: int
    last_offset: int
    max_timestamp: int


@dataclass(slots=True, frozen=True)
class AppendedBatch:
    """A batch inside a payload being appended: its offset within the payload and offsets."""

    relative_position: int
    last_offset: int
    max_timestamp: int


class LogSegment:
    def __init__(self, directory: str, base_offset: int, index_interval_bytes: int) -> None:
        self.directory = directory
        self.base_offset = base_offset
        self.index_interval_bytes = index_interval_bytes
        self.log_path = os.path.join(directory, segment_file_name(base_offset, ".log"))
        self.fd = os.open(self.log_path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
        self.size = os.fstat(self.fd).st_size
        self.offset_index = OffsetIndex(
            os.path.join(directory, segment_file_name(base_offset, ".index")), base_offset
        )
        self.time_index = TimeIndex(
            os.path.join(directory, segment_file_name(base_offset, ".timeindex")), base_offset
        )
        self.txn_index = TransactionIndex(os.path.join(directory, segment_file_name(base_offset, ".txnindex")))
        self.next_offset = base_offset
        self.max_timestamp = -1
        self.offset_of_max_timestamp = base_offset
        self.bytes_since_index_entry = 0
        self.created_ms = int(time.time() * 1000)
        self.first_batch_timestamp_ms: int | None = None

    # --- loading and recovery -------------------------------------------------------------

    def load_without_recovery(self) -> bool:
        """Trust the indexes of a cleanly closed segment; False if they look wrong."""
        if not (self.offset_index.load(max(self.size, 1)) and self.time_index.load()):
            return False
        start = self.offset_index.positions[-1] if self.offset_index.positions else 0
        last: BatchPosition | None = None
        for batch in self.scan(start):
            last = batch
        if last is None:
            if self.size != 0:
                return False
        else:
            if last.position + last.size != self.size:
                return False
            self.next_offset = last.last_offset + 1
        self.max_timestamp = self.time_index.last_timestamp
        if self.time_index.offsets:
            self.offset_of_max_timestamp = self.time_index.offsets[-1]
        self.created_ms = int(os.stat(self.log_path).st_mtime * 1000)
        return True

    def recover(self) -> int:
        """Validate every batch by CRC, rebuild both indexes, and cut a torn or corrupt tail.

        Returns the number of bytes truncated (0 for a clean segment).
        """
        self.offset_index.reset()
        self.time_index.reset()
        self.next_offset = self.base_offset
        self.max_timestamp = -1
        self.offset_of_max_timestamp = self.base_offset
        self.bytes_since_index_entry = 0
        position = 0
        file_size = os.fstat(self.fd).st_size
        buf = b""
        buf_start = 0
        while position < file_size:
            rel = position - buf_start
            if len(buf) - rel < HEADER_SIZE:
                buf, buf_start, rel = pread_exact(self.fd, _RECOVERY_CHUNK, position), position, 0
                if len(buf) < HEADER_SIZE:
                    break
            size = struct.unpack_from(">i", buf, rel + 8)[0] + LOG_OVERHEAD
            if size < HEADER_SIZE or buf[rel + 16] != 2 or position + size > file_size:
                break
            if len(buf) - rel < size:
                buf = pread_exact(self.fd, max(_RECOVERY_CHUNK, size), position)
                buf_start, rel = position, 0
                if len(buf) < size:
                    break
            if not crc_is_valid(buf, rel, size):
                break
            base, _len, _epoch, _m, _crc, _attr, delta, _bts, max_ts = _SCAN.unpack_from(buf, rel)
            if base < self.next_offset:
                break  # offsets must grow; anything else is garbage from a torn write
            self._track_batch(position, size, base + delta, max_ts)
            position += size
        valid_end = position
        truncated = file_size - valid_end
        if truncated:
            os.ftruncate(self.fd, valid_end)
        self.size = valid_end
        self.txn_index.truncate_to(self.next_offset)
        return truncated

    # --- appending ------------------------------------------------------------------------

    def append(self, payload: bytes | bytearray | memoryview, batches: list[AppendedBatch]) -> None:
        """Write ``payload`` (whole batches with offsets assigned) at the end of the segment."""
        start = self.size
        write_all(self.fd, payload)
        self.size += len(payload)
        if self.first_batch_timestamp_ms is None and batches:
            self.first_batch_timestamp_ms = batches[0].max_timestamp
        for i, batch in enumerate(batches):
            end = batches[i + 1].relative_position if i + 1 < len(batches) else len(payload)
            self._track_batch(
                start + batch.relative_position,
                end - batch.relative_position,
                batch.last_offset,
                batch.max_timestamp,
            )

    def rolling_timestamp_ms(self) -> int:
        """Kafka's rolling-based timestamp: the first batch's max timestamp (read from the file
        once for a segment loaded from disk), or -1 when the segment is empty or has none."""
        if self.first_batch_timestamp_ms is None:
            if self.size < HEADER_SIZE:
                return -1
            self.first_batch_timestamp_ms = read_header(pread_exact(self.fd, HEADER_SIZE, 0)).max_timestamp
        return self.first_batch_timestamp_ms

    def _track_batch(self, position: int, size: int, last_offset: int, max_ts: int) -> None:
        if max_ts > self.max_timestamp:
            self.max_timestamp = max_ts
            self.offset_of_max_timestamp = last_offset
        if self.bytes_since_index_entry >= self.index_interval_bytes or not self.offset_index.offsets:
            self.offset_index.append(last_offset, position)
            self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp)
            self.bytes_since_index_entry = 0
        self.bytes_since_index_entry += size
        self.next_offset = last_offset + 1

    def on_become_inactive(self) -> None:
        """Called at roll: make the time index end with the segment's max timestamp."""
        self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp)

    # --- reading --------------------------------------------------------------------------

    def scan(self, position: int = 0, end: int | None = None) -> Iterator[BatchPosition]:
        """Batch headers from ``position`` (a batch boundary) to ``end`` or the end of file."""
        limit = self.size if end is None else end
        while position + _SCAN_SIZE <= limit:
            raw = os.pread(self.fd, _SCAN_SIZE, position)
            if len(raw) < _SCAN_SIZE:
                return
            base, length, _e, _m, _c, _a, delta, _b, max_ts = _SCAN.unpack(raw)
            size = length + LOG_OVERHEAD
            yield BatchPosition(position, size, base, base + delta, max_ts)
            position += size

    def find_batch(self, offset: int) -> BatchPosition | None:
        """The first batch whose last offset is >= ``offset`` (the one containing it)."""
        for batch in self.scan(self.offset_index.lookup(offset)):
            if batch.last_offset >= offset:
                return batch
        return None

    def position_of(self, offset: int) -> int:
        """Byte position where ``offset``'s batch starts, or ``size`` if past the end."""
        batch = self.find_batch(offset)
        return self.size if batch is None else batch.position

    def find_offset_by_timestamp(self, timestamp: int, start_offset: int = 0) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record at or after ``start_offset`` with timestamp
        >= ``timestamp`` (Kafka's ``LogSegment.findOffsetByTimestamp(ts, startingOffset)``)."""
        start = self.position_of(max(self.time_index.lookup(timestamp), start_offset))
        for batch in self.scan(start):
            if batch.max_timestamp >= timestamp and batch.last_offset >= start_offset:
                for record in iter_records(self.read_bytes(batch.position, batch.size)):
                    if record.timestamp >= timestamp and record.offset >= start_offset:
                        return record.offset, record.timestamp
        return None

    def read_bytes(self, position: int, size: int) -> bytes:
        return pread_exact(self.fd, size, position)

    # --- truncation and lifecycle ---------------------------------------------------------

    def truncate_to(self, offset: int) -> int:
        """Remove every batch whose last offset is >= ``offset``; returns bytes removed."""
        position = self.position_of(offset)
        removed = self.size - position
        if removed <= 0:
            return 0
        os.ftruncate(self.fd, position)
        self.size = position
        self.first_batch_timestamp_ms = None  # re-read from the file (or none if now empty)
        self.offset_index.truncate_to_position(position)
        self.time_index.truncate_to_offset(offset)
        self.txn_index.truncate_to(offset)
        self._rescan_tail()
        return removed

    def _rescan_tail(self) -> None:
        """Recompute next offset and max timestamp after truncation (rare: a full scan)."""
        self.next_offset = self.base_offset
        self.max_timestamp = -1
        self.offset_of_max_timestamp = self.base_offset
        for batch in self.scan(0):
            self.next_offset = batch.last_offset + 1
            if batch.max_timestamp > self.max_timestamp:
                self.max_timestamp = batch.max_timestamp
                self.offset_of_max_timestamp = batch.last_offset
        self.bytes_since_index_entry = self.index_interval_bytes

    @property
    def is_empty(self) -> bool:
        return self.size == 0

    def largest_timestamp(self) -> int:
        """For retention: max record timestamp, or the file's mtime when none has one."""
        if self.max_timestamp >= 0:
            return self.max_timestamp
        return int(os.stat(self.log_path).st_mtime * 1000)

    def fsync(self) -> None:
        os.fsync(self.fd)
        self.txn_index.fsync()

    def close(self) -> None:
        os.close(self.fd)
        self.offset_index.close()
        self.time_index.close()
        self.txn_index.close()

    def delete(self) -> None:
        self.close()
        for path in (self.log_path, self.offset_index.path, self.time_index.path, self.txn_index.path):
            try:
                os.unlink(path)
            except FileNotFoundError:
                pass

