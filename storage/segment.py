"""LogSegment: one ``.log`` file of whole record batches plus its offset and time indexes.

Files are named by the segment's base offset, zero-padded to 20 digits
(``00000000000000000000.log``, ``.index``, ``.timeindex``, and ``.txnindex`` once a
transaction aborts in it). The ``.log`` file is a plain
concatenation of magic-v2 record batches exactly as they travel on the wire, with absolute
base offsets patched in. Invariants: batches are contiguous from position 0; offsets
increase; ``next_offset`` is one past the last offset in the segment (``base_offset`` when
empty); ``size`` is the length of the file's valid prefix — the file is longer only while a
failed append could not be cut back (``torn``), and no append happens until it is. Appends use
``os.write`` on an ``O_APPEND`` descriptor, so the bytes are in the OS when ``append`` returns;
a failed append is cut back before it raises.

The ``.log`` descriptor is opened on first use and may be closed at any time by the
``SegmentFileCache`` that bounds how many are open (a partition nobody reads or writes holds
none); a deleted segment never reopens. Code must read ``fd`` when it uses it, not keep it.
"""

from __future__ import annotations

import errno
import logging
import os
import struct
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from kbroker.protocol.records import HEADER_SIZE, LOG_OVERHEAD, crc_is_valid, iter_records, read_header

from .file_io import (
    TornWriteError,
    append_or_undo,
    close_file,
    fsync,
    open_file,
    pread_exact,
    truncate,
    unlink_quietly,
)
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


class SegmentFileCache:
    """Bounds the ``.log`` descriptors open at once: past ``limit`` the least recently used is
    closed (its segment reopens it when next used). ``limit=None``: no bound."""

    def __init__(self, limit: int | None = None) -> None:
        self.limit = limit
        self._open: OrderedDict[LogSegment, None] = OrderedDict()

    def __len__(self) -> int:
        return len(self._open)

    def opened(self, segment: LogSegment) -> None:
        self._open[segment] = None
        if self.limit is not None:
            while len(self._open) > self.limit:
                oldest = next(iter(self._open))
                if oldest is segment:
                    break
                oldest.close_file()

    def used(self, segment: LogSegment) -> None:
        try:
            self._open.move_to_end(segment)
        except KeyError:
            pass  # a retired segment: its descriptor is no longer the cache's to close

    def closed(self, segment: LogSegment) -> None:
        self._open.pop(segment, None)


class LogSegment:
    def __init__(self, directory: str, base_offset: int, index_interval_bytes: int,
                 files: SegmentFileCache | None = None, *, create: bool = False, created_ms: int | None = None) -> None:
        self.directory = directory
        self.base_offset = base_offset
        self.index_interval_bytes = index_interval_bytes
        self.files = files if files is not None else SegmentFileCache()
        self.log_path = os.path.join(directory, segment_file_name(base_offset, ".log"))
        self._fd = -1
        self.deleted = False
        self.torn = False  # a failed append left bytes past ``size`` that could not be cut yet
        if create:
            self._open(os.O_TRUNC)  # the file exists from now on (recovery lists segments by their .log)
            self.size = 0
        else:
            self.size = os.stat(self.log_path).st_size
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
        # When it was made (segment.ms rolls by it until a batch brings a timestamp); an existing
        # file's modification time replaces it when the segment loads.
        self.created_ms = created_ms if created_ms is not None else int(time.time() * 1000)
        self.first_batch_timestamp_ms: int | None = None

    # --- the descriptor -------------------------------------------------------------------

    @property
    def fd(self) -> int:
        """The open ``.log`` descriptor (opened now if the cache closed it)."""
        if self._fd < 0:
            return self._open()
        self.files.used(self)
        return self._fd

    def _open(self, extra_flags: int = 0) -> int:
        if self.deleted:
            raise FileNotFoundError(errno.ENOENT, "segment was deleted", self.log_path)
        self._fd = open_file(self.log_path, os.O_RDWR | os.O_CREAT | os.O_APPEND | extra_flags)
        self.files.opened(self)
        return self._fd

    def close_file(self) -> None:
        """Close the descriptor (it reopens on next use)."""
        if self._fd >= 0:
            fd, self._fd = self._fd, -1
            self.files.closed(self)
            close_file(fd)

    def retire(self) -> None:
        """Replaced by another segment of the same name (log cleaning): the descriptor stays
        open — reads already planned on this segment go on from the unlinked file — until
        ``close_file``; the segment never reopens by name."""
        self._fd = self.fd  # open now, while the name is still this segment's
        self.files.closed(self)
        self.deleted = True

    # --- loading and recovery -------------------------------------------------------------

    def load_without_recovery(self) -> bool:
        """Trust the indexes of a cleanly closed segment; False if they look wrong or are missing."""
        if not (self.offset_index.load(self.size) and self.time_index.load()):
            return False
        start = self.offset_index.positions[-1] if self.offset_index.positions else 0
        last: BatchPosition | None = None
        max_timestamp = self.time_index.last_timestamp
        for batch in self.scan(start):
            last = batch
            max_timestamp = max(max_timestamp, batch.max_timestamp)
        if last is None:
            if self.size != 0:
                return False
        else:
            if last.position + last.size != self.size:
                return False
            self.next_offset = last.last_offset + 1
        self.max_timestamp = max_timestamp
        if self.time_index.offsets:
            self.offset_of_max_timestamp = self.time_index.offsets[-1]
        if max_timestamp > self.time_index.last_timestamp:
            self.offset_of_max_timestamp = self.next_offset - 1
        self.created_ms = int(os.stat(self.log_path).st_mtime * 1000)
        return True

    def recover(self, on_batch: Callable[[int, int], None] | None = None) -> int:
        """Validate every batch by CRC, rebuild both indexes, and cut a torn or corrupt tail;
        ``on_batch(partition leader epoch, base offset)`` hears of every valid batch.

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
            base, _len, epoch, _m, _crc, _attr, delta, _bts, max_ts = _SCAN.unpack_from(buf, rel)
            if base < self.next_offset:
                break  # offsets must grow; anything else is garbage from a torn write
            self._track_batch(position, size, base + delta, max_ts)
            if on_batch is not None:
                on_batch(epoch, base)
            position += size
        valid_end = position
        truncated = file_size - valid_end
        if truncated:
            truncate(self.fd, valid_end)
        self.size = valid_end
        self.torn = False
        self.txn_index.truncate_to(self.next_offset)
        return truncated

    # --- appending ------------------------------------------------------------------------

    def append(self, payload: bytes | bytearray | memoryview, batches: list[AppendedBatch]) -> None:
        """Write ``payload`` (whole batches with offsets assigned) at the end of the segment.

        All or nothing: on a failed write (a full disk, an I/O error) the file is cut back and
        the segment is unchanged; if even the cut fails, ``torn`` is set and every later append
        first retries the cut.
        """
        if self.torn:
            self.cut_torn_tail()
        start = self.size
        try:
            append_or_undo(self.fd, payload, start)
        except TornWriteError:
            self.torn = True
            raise
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

    def cut_torn_tail(self) -> None:
        """Retry cutting what a failed append left past ``size`` (raises while it still fails)."""
        truncate(self.fd, self.size)
        self.torn = False
        log.info("segment %s: the partial write left by a failed append is removed", self.log_path)

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
        # Kafka's LogSegment rule: an entry only once more than index.interval.bytes have been
        # appended since the last one (so never for a segment's first batch), pointing at the
        # batch that passes the mark.
        if self.bytes_since_index_entry > self.index_interval_bytes:
            self.offset_index.append(last_offset, position)
            self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp)
            self.bytes_since_index_entry = 0
        self.bytes_since_index_entry += size
        self.next_offset = last_offset + 1

    def on_become_inactive(self) -> None:
        """Called at roll: the time index ends with the segment's max timestamp, and both
        indexes are written (raises if they cannot be)."""
        self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp)
        self.persist_indexes()

    def persist_indexes(self) -> None:
        """Write the index entries their files lack. On failure both index files are removed
        (the next start rebuilds them from the log) and the error is raised."""
        try:
            self.time_index.persist()
            self.offset_index.persist()
        except OSError:
            self.offset_index.reset_file()
            self.time_index.reset_file()
            raise

    # --- reading --------------------------------------------------------------------------

    def scan(self, position: int = 0, end: int | None = None) -> Iterator[BatchPosition]:
        """Batch headers from ``position`` (a batch boundary) to ``end`` or the end of the valid data."""
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
        """Remove every batch whose last offset is >= ``offset``; returns bytes removed.

        The transaction index is cut first: if that fails nothing has changed."""
        position = self.position_of(offset)
        removed = self.size - position
        if removed <= 0:
            return 0
        self.txn_index.truncate_to(offset)
        truncate(self.fd, position)
        self.size = position
        self.torn = False
        self.first_batch_timestamp_ms = None  # re-read from the file (or none if now empty)
        self.offset_index.truncate_to_position(position)
        self.time_index.truncate_to_offset(offset)
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
        self.bytes_since_index_entry = 0  # as Kafka's truncateTo: counting starts again

    @property
    def is_empty(self) -> bool:
        return self.size == 0

    def largest_timestamp(self) -> int:
        """For retention: max record timestamp, or the file's mtime when none has one."""
        if self.max_timestamp >= 0:
            return self.max_timestamp
        return int(os.stat(self.log_path).st_mtime * 1000)

    def fsync(self) -> None:
        fsync(self.fd)
        self.txn_index.fsync()

    def close(self) -> None:
        """Clean close: indexes written (if that fails they are removed and rebuilt at the next
        start), descriptor closed."""
        try:
            self.persist_indexes()
        except OSError as exc:
            log.warning("indexes of %s not written (%s): they will be rebuilt at the next start",
                        self.log_path, exc)
        self.close_file()

    def delete(self) -> None:
        """Remove the files; the segment never reopens (a read still in flight fails cleanly
        instead of reading another file that took its descriptor number)."""
        self.deleted = True
        self.close_file()
        for path in (self.log_path, self.offset_index.path, self.time_index.path, self.txn_index.path):
            unlink_quietly(path)
