"""TransactionIndex: the aborted transactions whose markers sit in one segment (``.txnindex``).

read_committed fetches answer with the aborted transactions overlapping the fetched range;
this file is where they are found without reading the log.
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass

from .file_io import append_or_undo, close_file, fsync, open_file, truncate, unlink_quietly

_ENTRY = struct.Struct(">hqqqq")  # version, producerId, firstOffset, lastOffset, lastStableOffset
ENTRY_SIZE = _ENTRY.size  # 34 bytes
VERSION = 0


@dataclass(slots=True, frozen=True)
class AbortedTxn:
    producer_id: int
    first_offset: int
    last_offset: int  # the offset of the abort marker
    last_stable_offset: int


class TransactionIndex:
    """``<base offset, 20 digits>.txnindex``, Kafka's format: 34-byte entries, big-endian::

        version int16 (=0) | producerId int64 | firstOffset int64 | lastOffset int64
        | lastStableOffset int64

    One entry per aborted transaction whose abort marker is in the segment, in marker order
    (so ``last_offset`` grows). The file is created on the first entry; an entry is written
    with ``os.write`` (opened for that write only: the index holds no descriptor) before the
    log counts it, and a failed write leaves the file as it was. A torn trailing entry is
    dropped on load. After a crash the log replay that rebuilds producer state re-creates
    entries past the last snapshot (``append`` ignores an entry whose marker offset is not past
    the last one).
    """

    def __init__(self, path: str) -> None:
        self.path = path
        self.entries: list[AbortedTxn] = []
        self._unsynced = False
        self._load()

    def _load(self) -> None:
        try:
            with open(self.path, "rb") as fh:
                data = fh.read()
        except FileNotFoundError:
            return
        whole = len(data) - len(data) % ENTRY_SIZE
        for pos in range(0, whole, ENTRY_SIZE):
            version, pid, first, last, lso = _ENTRY.unpack_from(data, pos)
            if version != VERSION:
                whole = pos
                break
            self.entries.append(AbortedTxn(pid, first, last, lso))
        if whole != len(data):
            os.truncate(self.path, whole)

    def append(self, txn: AbortedTxn) -> None:
        if self.entries and txn.last_offset <= self.entries[-1].last_offset:
            return  # already there (replay after a crash)
        fd = open_file(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
        try:
            append_or_undo(fd, _ENTRY.pack(VERSION, txn.producer_id, txn.first_offset, txn.last_offset,
                                           txn.last_stable_offset), len(self.entries) * ENTRY_SIZE)
        finally:
            close_file(fd)
        self.entries.append(txn)
        self._unsynced = True

    def collect(self, fetch_offset: int, upper_bound: int) -> list[AbortedTxn]:
        """Entries overlapping [fetch_offset, upper_bound)."""
        return [e for e in self.entries if e.last_offset >= fetch_offset and e.first_offset < upper_bound]

    def truncate_to(self, offset: int) -> None:
        """Drop entries whose marker is at or after ``offset``."""
        keep = [e for e in self.entries if e.last_offset < offset]
        if len(keep) == len(self.entries):
            return
        self.entries = keep
        fd = open_file(self.path, os.O_WRONLY)
        try:
            truncate(fd, len(keep) * ENTRY_SIZE)
        finally:
            close_file(fd)

    def fsync(self) -> None:
        if self._unsynced:
            fd = open_file(self.path, os.O_RDONLY)
            try:
                fsync(fd)
            finally:
                close_file(fd)
            self._unsynced = False

    def delete(self) -> None:
        unlink_quietly(self.path)
