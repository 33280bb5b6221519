"""Build magic-v2 record batches: what the broker writes itself (and what tests produce).

The inverse of ``records.iter_records``; output is a whole batch with a valid CRC32C.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence

from crc32c import crc32c

from .records import (
    ATTRIBUTES_OFFSET,
    CONTROL_FLAG,
    CRC_OFFSET,
    TIMESTAMP_TYPE_LOG_APPEND,
    TRANSACTIONAL_FLAG,
    BatchHeader,
    Record,
)

_HEADER = struct.Struct(">qiibIhiqqqhii")


def _zigzag(value: int) -> bytes:
    raw = (value << 1) ^ (value >> 63)
    out = bytearray()
    while raw >= 0x80:
        out.append((raw & 0x7F) | 0x80)
        raw >>= 7
    out.append(raw)
    return bytes(out)


def _field(data: bytes | None) -> bytes:
    return _zigzag(-1) if data is None else _zigzag(len(data)) + data


def encode_record(
    offset_delta: int,
    timestamp_delta: int,
    key: bytes | None,
    value: bytes | None,
    headers: Sequence[tuple[str, bytes | None]] = (),
) -> bytes:
    body = b"\x00" + _zigzag(timestamp_delta) + _zigzag(offset_delta) + _field(key) + _field(value)
    body += _zigzag(len(headers))
    for name, hvalue in headers:
        body += _field(name.encode()) + _field(hvalue)
    return _zigzag(len(body)) + body


def build_batch(
    records: Sequence[tuple[bytes | None, bytes | None]],
    *,
    base_offset: int = 0,
    timestamps: Sequence[int] | None = None,
    base_timestamp: int = 0,
    attributes: int = 0,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    leader_epoch: int = -1,
    compressed_records: bytes | None = None,
) -> bytes:
    """A batch of (key, value) records; ``compressed_records`` overrides the encoded body."""
    stamps = list(timestamps) if timestamps is not None else [base_timestamp] * len(records)
    first_ts = stamps[0] if stamps else base_timestamp
    body = b"".join(
        encode_record(i, stamps[i] - first_ts, key, value) for i, (key, value) in enumerate(records)
    )
    if compressed_records is not None:
        body = compressed_records
    header = _HEADER.pack(
        base_offset, 0, leader_epoch, 2, 0, attributes, len(records) - 1, first_ts,
        max(stamps) if stamps else first_ts, producer_id, producer_epoch, base_sequence, len(records),
    )
    batch = bytearray(header + body)
    struct.pack_into(">i", batch, 8, len(batch) - 12)
    struct.pack_into(">I", batch, CRC_OFFSET, crc32c(bytes(batch[ATTRIBUTES_OFFSET:])))
    return bytes(batch)


CONTROL_ABORT = 0
CONTROL_COMMIT = 1


def build_end_txn_marker(producer_id: int, producer_epoch: int, commit: bool, coordinator_epoch: int,
                         timestamp: int) -> bytes:
    """A control batch ending a transaction: attributes control + transactional, one record
    whose key is (version 0 int16, type int16: 0 abort, 1 commit) and whose value is
    (version 0 int16, coordinator epoch int32), as Kafka's EndTransactionMarker."""
    key = struct.pack(">hh", 0, CONTROL_COMMIT if commit else CONTROL_ABORT)
    value = struct.pack(">hi", 0, coordinator_epoch)
    return build_batch(
        [(key, value)], base_timestamp=timestamp, attributes=CONTROL_FLAG | TRANSACTIONAL_FLAG,
        producer_id=producer_id, producer_epoch=producer_epoch, base_sequence=-1,
    )


def rebuild_batch(header: BatchHeader, records: Sequence[Record], attributes: int, base_timestamp: int,
                  max_timestamp: int) -> bytes:
    """An uncompressed batch holding ``records`` (decoded from the batch ``header`` describes) with
    that batch's base offset, last offset delta, leader epoch and producer fields: what log
    compaction writes when a batch keeps only some of its records (or none: an empty header).
    Record offset deltas stay relative to the original base offset; timestamp deltas are taken
    against ``base_timestamp`` (which holds the delete horizon when attribute bit 0x40 is set)."""
    log_append_time = bool(attributes & TIMESTAMP_TYPE_LOG_APPEND)  # records carry no own timestamps then
    body = b"".join(
        encode_record(r.offset - header.base_offset, 0 if log_append_time else r.timestamp - base_timestamp,
                      r.key, r.value, r.headers)
        for r in records
    )
    batch = bytearray(_HEADER.pack(
        header.base_offset, 0, header.partition_leader_epoch, 2, 0, attributes, header.last_offset_delta,
        base_timestamp, max_timestamp, header.producer_id, header.producer_epoch, header.base_sequence, len(records),
    ) + body)
    struct.pack_into(">i", batch, 8, len(batch) - 12)
    struct.pack_into(">I", batch, CRC_OFFSET, crc32c(bytes(batch[ATTRIBUTES_OFFSET:])))
    return bytes(batch)
