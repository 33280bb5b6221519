"""IndexFile: the on-disk half of an in-memory segment index (``.index``, ``.timeindex``).

The index classes keep every entry in memory; this file holds the first ``persisted`` of
them, as fixed-size entries. It is opened only while entries are appended or cut, so an index
holds no descriptor. A failed append leaves the file as it was; a failed cut removes the file
(a missing index makes the next start rebuild it from the log, never trust a stale one).
"""

from __future__ import annotations

import os

from .file_io import append_or_undo, close_file, open_file, truncate, unlink_quietly


class IndexFile:
    def __init__(self, path: str, entry_size: int) -> None:
        self.path = path
        self.entry_size = entry_size
        self.persisted = 0  # entries in the file; always a prefix of the in-memory entries

    def read(self) -> bytes:
        try:
            fd = open_file(self.path, os.O_RDONLY)
        except FileNotFoundError:
            return b""
        try:
            return os.pread(fd, os.fstat(fd).st_size, 0)
        finally:
            close_file(fd)

    def append_entries(self, data: bytes, count_after: int) -> None:
        """Append encoded entries so that the file holds ``count_after`` entries (the file is
        created even when there are none: every segment has its index files)."""
        fd = open_file(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
        try:
            append_or_undo(fd, data, self.persisted * self.entry_size)
        finally:
            close_file(fd)
        self.persisted = count_after

    def truncate_entries(self, keep: int) -> None:
        if self.persisted <= keep:
            return
        try:
            fd = open_file(self.path, os.O_WRONLY)
            try:
                truncate(fd, keep * self.entry_size)
            finally:
                close_file(fd)
            self.persisted = keep
        except OSError:
            unlink_quietly(self.path)
            self.persisted = 0

    def remove(self) -> None:
        unlink_quietly(self.path)
        self.persisted = 0
