"""Start-up recovery of a log cleaning that a crash interrupted (Kafka's ``.cleaned`` / ``.swap`` scheme).

``storage/log_cleaner.py`` replaces old segments in three steps: write and fsync
``<base>.log.cleaned``, ``.index.cleaned``, ``.timeindex.cleaned`` and ``.txnindex.cleaned``;
rename all four to ``.swap``; unlink the old segments; rename the ``.swap`` files into place,
``.log.swap`` last. So at start-up:

- ``*.cleaned`` (and Kafka's ``*.deleted``) files are leftovers of an unfinished cleaning: deleted;
  the old segments are intact.
- ``<base>.log.swap`` means the cleaned data is committed: every old segment whose base offset
  lies in [base, end of the swap file) is deleted (``<base>.txnindex`` only while
  ``<base>.txnindex.swap`` still exists: otherwise it is already the new one), the ``.swap``
  files are renamed into place and the segment's indexes rebuilt by a CRC-checked scan.
- The ``.index`` / ``.timeindex`` (and their ``.swap``) of that base are deleted and rebuilt.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator

from kbroker.protocol.records import HEADER_SIZE, read_header

from .file_io import fsync_dir, pread_exact, unlink_quietly
from .segment import LogSegment, segment_file_name

log = logging.getLogger(__name__)

CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"
DELETED_SUFFIX = ".deleted"
# The files of one segment, in the order they are renamed to .swap; renamed back into place in
# reverse, so the .log comes last.
SEGMENT_SUFFIXES = (".log", ".index", ".timeindex", ".txnindex")


def complete_interrupted_cleaning(directory: str, index_interval_bytes: int) -> None:
    """Finish or roll back a replacement a crash interrupted (see the module docstring)."""
    names = os.listdir(directory)
    leftovers = [n for n in names if n.endswith(CLEANED_SUFFIX) or n.endswith(DELETED_SUFFIX)]
    for name in leftovers:
        os.unlink(os.path.join(directory, name))
    if leftovers:
        log.warning("recovery: removed %d files of an unfinished log cleaning in %s", len(leftovers), directory)
    swaps = sorted(int(n[:20]) for n in names if n.endswith(".log" + SWAP_SUFFIX))
    for base in swaps:
        swap_log = os.path.join(directory, segment_file_name(base, ".log") + SWAP_SUFFIX)
        swap_txn = os.path.join(directory, segment_file_name(base, ".txnindex") + SWAP_SUFFIX)
        end = base + 1
        for batch_end in _batch_ends(swap_log):
            end = max(end, batch_end)
        for name in os.listdir(directory):
            if not name.endswith(".log") or not name[:-4].isdigit():
                continue
            old = int(name[:-4])
            if base <= old < end:
                suffixes = [".log", ".index", ".timeindex"]
                if old != base or os.path.exists(swap_txn):
                    suffixes.append(".txnindex")
                for suffix in suffixes:
                    unlink_quietly(os.path.join(directory, segment_file_name(old, suffix)))
        if os.path.exists(swap_txn):
            os.replace(swap_txn, os.path.join(directory, segment_file_name(base, ".txnindex")))
        for suffix in (".index", ".timeindex"):  # rebuilt below, whichever version is there
            unlink_quietly(os.path.join(directory, segment_file_name(base, suffix)))
            unlink_quietly(os.path.join(directory, segment_file_name(base, suffix) + SWAP_SUFFIX))
        os.replace(swap_log, os.path.join(directory, segment_file_name(base, ".log")))
        fsync_dir(directory)
        segment = LogSegment(directory, base, index_interval_bytes)
        segment.recover()
        segment.time_index.maybe_append(segment.max_timestamp, segment.offset_of_max_timestamp)
        segment.close()
        log.warning("recovery: completed an interrupted log cleaning swap of segment %d in %s", base, directory)
    # Without a .log.swap the swap had finished; anything else left is stray (never expected).
    for name in os.listdir(directory):
        if name.endswith(SWAP_SUFFIX):
            os.unlink(os.path.join(directory, name))


def _batch_ends(path: str) -> Iterator[int]:
    """last offset + 1 of every whole batch of a log file (header scan)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        size = os.fstat(fd).st_size
        position = 0
        while position + HEADER_SIZE <= size:
            header = read_header(pread_exact(fd, HEADER_SIZE, position))
            if header.size < HEADER_SIZE or position + header.size > size:
                return
            yield header.last_offset + 1
            position += header.size
    finally:
        os.close(fd)
