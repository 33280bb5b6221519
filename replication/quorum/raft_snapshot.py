"""Snapshot files of the metadata log (KIP-630): their names, their framing, and their checks.

A snapshot is named as Kafka names it, ``<end offset, 20 digits>-<epoch, 10 digits>.checkpoint``, in the
metadata log's directory, and holds record batches as Kafka writes them: a control batch with one
SnapshotHeader record (control type 3: version 0 and the last contained entry's timestamp), the
snapshot's entries as ordinary records from offset 0 stamped with the snapshot's epoch, and a control
batch with one SnapshotFooter record (control type 4). It is written to ``.checkpoint.part``, fsynced
and renamed, so a reader sees a whole snapshot or none; a file that fails the checks (a batch whose CRC
does not match, no header or no footer) is not a snapshot (``InvalidSnapshot``).
"""

from __future__ import annotations

import os
import re
import struct

from kbroker.protocol.record_builder import build_batch
from kbroker.protocol.records import CONTROL_FLAG, HEADER_SIZE, batch_size_at, crc_is_valid, iter_records, read_header
from kbroker.storage.file_io import replace_atomically

from .raft_messages import SnapshotId

SUFFIX = ".checkpoint"
PART_SUFFIX = ".checkpoint.part"
_NAME = re.compile(r"^(\d{20})-(\d{10})\.checkpoint$")
SNAPSHOT_HEADER_TYPE = 3
SNAPSHOT_FOOTER_TYPE = 4
# Payload bytes per data batch (as the metadata log's batches).
_BATCH_BYTES = 512 * 1024


class InvalidSnapshot(ValueError):
    """A snapshot file that is torn or corrupt."""


def file_name(snapshot_id: SnapshotId) -> str:
    return f"{snapshot_id.end_offset:020d}-{snapshot_id.epoch:010d}{SUFFIX}"


def snapshot_ids(directory: str) -> list[SnapshotId]:
    """The snapshots in ``directory`` by name, oldest first."""
    found = []
    for name in os.listdir(directory):
        match = _NAME.match(name)
        if match:
            found.append(SnapshotId(int(match.group(1)), int(match.group(2))))
    return sorted(found)


def _control_batch(control_type: int, value: bytes, epoch: int, now_ms: int) -> bytes:
    batch = bytearray(build_batch([(struct.pack(">hh", 0, control_type), value)], base_timestamp=now_ms,
                                  attributes=CONTROL_FLAG))
    batch[12:16] = epoch.to_bytes(4, "big", signed=True)  # partitionLeaderEpoch (outside the CRC)
    return bytes(batch)


def encode(snapshot_id: SnapshotId, payloads: list[bytes], last_timestamp_ms: int) -> bytes:
    """The bytes of a snapshot file holding ``payloads``."""
    out = bytearray(_control_batch(SNAPSHOT_HEADER_TYPE, struct.pack(">hq", 0, last_timestamp_ms),
                                   snapshot_id.epoch, last_timestamp_ms))
    offset = 0
    run: list[bytes] = []
    size = 0
    for payload in [*payloads, None]:
        if run and (payload is None or size + len(payload) > _BATCH_BYTES):
            batch = bytearray(build_batch([(None, p) for p in run], base_offset=offset,
                                          base_timestamp=last_timestamp_ms))
            batch[12:16] = snapshot_id.epoch.to_bytes(4, "big", signed=True)
            out += batch
            offset += len(run)
            run, size = [], 0
        if payload is not None:
            run.append(payload)
            size += len(payload)
    out += _control_batch(SNAPSHOT_FOOTER_TYPE, struct.pack(">h", 0), snapshot_id.epoch, last_timestamp_ms)
    return bytes(out)


def decode(data: bytes) -> list[bytes]:
    """The payloads of a snapshot file's bytes; InvalidSnapshot unless it is whole and every CRC matches."""
    view = memoryview(data)
    payloads: list[bytes] = []
    seen_header = seen_footer = False
    position = 0
    while position < len(data):
        size = batch_size_at(view, position)
        if size is None or size < HEADER_SIZE or position + size > len(data):
            raise InvalidSnapshot(f"the batch at byte {position} is cut off")
        if not crc_is_valid(view, position, size):
            raise InvalidSnapshot(f"the batch at byte {position} fails its CRC")
        header = read_header(view, position)
        batch = view[position:position + size]
        position += size
        if header.is_control:
            for record in iter_records(batch):
                control_type = struct.unpack(">hh", bytes(record.key or b"\0\0\0\0")[:4])[1]
                if control_type == SNAPSHOT_HEADER_TYPE and not payloads and not seen_header:
                    seen_header = True
                elif control_type == SNAPSHOT_FOOTER_TYPE and seen_header:
                    seen_footer = True
            continue
        if not seen_header or seen_footer:
            raise InvalidSnapshot(f"records outside header and footer before byte {position}")
        payloads.extend(record.value or b"" for record in iter_records(batch))
    if not seen_footer:
        raise InvalidSnapshot("no SnapshotFooter: the snapshot is incomplete")
    return payloads


def write(directory: str, snapshot_id: SnapshotId, data: bytes) -> str:
    """Write a snapshot file atomically (``.part``, fsync, rename, fsync of the directory); its path."""
    path = os.path.join(directory, file_name(snapshot_id))
    part = path[: -len(SUFFIX)] + PART_SUFFIX
    replace_atomically(part, data)
    os.replace(part, path)
    return path


def delete_parts(directory: str) -> None:
    """Remove snapshots whose writing a crash interrupted (never renamed into place)."""
    for name in os.listdir(directory):
        if name.endswith(PART_SUFFIX) or name.endswith(PART_SUFFIX + ".tmp"):
            os.unlink(os.path.join(directory, name))
