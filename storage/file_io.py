"""Every write-side file operation of the broker's storage, and the failpoints that make them fail.

Every byte the broker acknowledges goes through ``write_all``: ``os.write`` straight into the
OS, never a Python buffered file, so a ``kill -9`` after the call returns loses nothing.
``append_or_undo`` is the append that either lands whole or leaves the file as it was (a full
disk or an I/O error must never leave a torn tail that later appends go after).
``replace_atomically`` is how checkpoints and metadata files change: write a temp file, fsync
it, rename over the old one, fsync the directory; on failure the temp file is removed and the
old file is untouched.

Failpoints are the fault-injection seam the storage tests use: ``inject(FailPoint(...))`` makes
the Nth matching call of an operation (``open``, ``write``, ``truncate``, ``fsync``,
``rename``, ``mkdir``) raise ``OSError(errno)`` — or, for ``write``, write only some bytes first
(a short write, as a disk filling mid-write does). With none injected the check is one falsy
test per call.
"""

from __future__ import annotations

import errno
import os
from dataclasses import dataclass

FILE_MODE = 0o644
OPERATIONS = ("open", "write", "truncate", "fsync", "rename", "mkdir")


@dataclass(slots=True)
class FailPoint:
    """Fail the ``nth`` (1-based) call of ``operation`` on a path containing ``path_contains``,
    and the ``times - 1`` matching calls after it (``times=0``: every one until cleared).
    ``written`` bytes reach the file before a failing ``write`` raises (a short write)."""

    operation: str
    error: int = errno.ENOSPC
    nth: int = 1
    times: int = 1
    path_contains: str = ""
    written: int = 0
    seen: int = 0
    fired: int = 0

    def __post_init__(self) -> None:
        if self.operation not in OPERATIONS:
            raise ValueError(f"unknown file operation {self.operation!r}; one of {OPERATIONS}")

    def fires(self, operation: str, path: str) -> bool:
        if operation != self.operation or self.path_contains not in path:
            return False
        self.seen += 1
        if self.seen < self.nth or (self.times and self.fired >= self.times):
            return False
        self.fired += 1
        return True


_failpoints: list[FailPoint] = []
_paths: dict[int, str] = {}  # open descriptor -> path, so failpoints can match by file


def inject(failpoint: FailPoint) -> FailPoint:
    _failpoints.append(failpoint)
    return failpoint


def clear_failpoints() -> None:
    _failpoints.clear()


def _check(operation: str, path: str) -> FailPoint | None:
    for failpoint in _failpoints:
        if failpoint.fires(operation, path):
            return failpoint
    return None


def _fail(failpoint: FailPoint, path: str) -> OSError:
    return OSError(failpoint.error, f"{os.strerror(failpoint.error)} (failpoint)", path)


# --- descriptors ---------------------------------------------------------------------------


def open_file(path: str, flags: int) -> int:
    if _failpoints and (fp := _check("open", path)) is not None:
        raise _fail(fp, path)
    fd = os.open(path, flags, FILE_MODE)
    _paths[fd] = path
    return fd


def close_file(fd: int) -> None:
    _paths.pop(fd, None)
    os.close(fd)


def write_all(fd: int, data: bytes | bytearray | memoryview) -> None:
    """``os.write`` until every byte is in the OS (short writes are retried, not lost)."""
    view = memoryview(data)
    if _failpoints and (fp := _check("write", _paths.get(fd, ""))) is not None:
        if fp.written:
            os.write(fd, view[: fp.written])
        raise _fail(fp, _paths.get(fd, ""))
    while view:
        written = os.write(fd, view)
        view = view[written:]


def append_or_undo(fd: int, data: bytes | bytearray | memoryview, size_before: int) -> None:
    """Append ``data`` to a file of ``size_before`` bytes, or cut it back to that size and raise.

    If the cut fails too, ``TornWriteError`` says the file holds a partial write past
    ``size_before`` (the caller must not append after it until a later ``truncate`` succeeds).
    """
    try:
        write_all(fd, data)
    except OSError as exc:
        try:
            truncate(fd, size_before)
        except OSError as undo_exc:
            raise TornWriteError(exc, undo_exc) from exc
        raise


class TornWriteError(OSError):
    """A failed append whose undo (truncation) failed as well."""

    def __init__(self, write_error: OSError, undo_error: OSError) -> None:
        super().__init__(write_error.errno, f"{write_error.strerror}; undo failed: {undo_error.strerror}",
                         write_error.filename)


def truncate(fd: int, size: int) -> None:
    if _failpoints and (fp := _check("truncate", _paths.get(fd, ""))) is not None:
        raise _fail(fp, _paths.get(fd, ""))
    os.ftruncate(fd, size)


def fsync(fd: int) -> None:
    if _failpoints and (fp := _check("fsync", _paths.get(fd, ""))) is not None:
        raise _fail(fp, _paths.get(fd, ""))
    os.fsync(fd)


def pread_exact(fd: int, size: int, position: int) -> bytes:
    """Read ``size`` bytes at ``position``, or fewer at end of file."""
    chunks = []
    while size > 0:
        chunk = os.pread(fd, size, position)
        if not chunk:
            break
        chunks.append(chunk)
        size -= len(chunk)
        position += len(chunk)
    return b"".join(chunks)


# --- paths ---------------------------------------------------------------------------------


def make_dirs(path: str) -> None:
    if _failpoints and (fp := _check("mkdir", path)) is not None:
        raise _fail(fp, path)
    os.makedirs(path, exist_ok=True)


def rename(source: str, target: str) -> None:
    """``os.replace``: atomic within a file system."""
    if _failpoints and (fp := _check("rename", target)) is not None:
        raise _fail(fp, target)
    os.replace(source, target)


def unlink_quietly(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


def fsync_dir(path: str) -> None:
    fd = open_file(path, os.O_RDONLY)
    try:
        fsync(fd)
    finally:
        close_file(fd)


def write_file(path: str, data: bytes, *, durable: bool) -> None:
    """Create or replace ``path`` with ``data`` in place (no rename); removed again if the write
    fails, so a full disk leaves no partial file behind."""
    fd = open_file(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    try:
        write_all(fd, data)
        if durable:
            fsync(fd)
    except OSError:
        close_file(fd)
        unlink_quietly(path)
        raise
    close_file(fd)


def replace_atomically(path: str, data: bytes, *, durable: bool = True) -> None:
    """Readers see the old file or the new one, never a mix. ``durable=False`` skips both fsyncs:
    for files whose content recovery can rebuild, so that creating or leading thousands of
    partitions costs no fsync each (the file is made durable later, see ``fsync_file``)."""
    tmp = path + ".tmp"
    write_file(tmp, data, durable=durable)
    try:
        rename(tmp, path)
    except OSError:
        unlink_quietly(tmp)
        raise
    if durable:
        fsync_dir(os.path.dirname(path) or ".")


def fsync_file(path: str) -> None:
    """fsync an existing file and its directory (a ``replace_atomically(durable=False)`` made durable)."""
    fd = open_file(path, os.O_RDONLY)
    try:
        fsync(fd)
    finally:
        close_file(fd)
    fsync_dir(os.path.dirname(path) or ".")
