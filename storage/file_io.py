"""Unbuffered file writes and atomic small-file replacement.

Every byte the broker acknowledges goes through ``write_all``: ``os.write`` straight into the
OS, never a Python buffered file, so a ``kill -9`` after the call returns loses nothing.
``replace_atomically`` is how checkpoints and metadata files change: write a temp file, fsync
it, rename over the old one, fsync the directory.
"""

from __future__ import annotations

import os


def write_all(fd: int, data: bytes | bytearray | memoryview) -> None:
    """``os.write`` until every byte is in the OS (short writes are retried, not lost)."""
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


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


def fsync_dir(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def replace_atomically(path: str, data: bytes) -> None:
    tmp = path + ".tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        write_all(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    fsync_dir(os.path.dirname(path) or ".")
