"""RecordBatch (magic v2) as opaque bytes: header view, validation, in-place patches.

On-disk and wire layout of one batch (big-endian)::

    0  baseOffset int64          35 maxTimestamp int64
    8  batchLength int32         43 producerId int64
    12 partitionLeaderEpoch i32  51 producerEpoch int16
    16 magic int8 (=2)           53 baseSequence int32
    17 crc uint32 (CRC32C)       57 recordCount int32
    21 attributes int16          61 records...
    23 lastOffsetDelta int32
    27 baseTimestamp int64

``batchLength`` counts the bytes after itself. The CRC covers attributes to the end, so the
base offset and leader epoch can be patched without recomputing it; the timestamp type and
max timestamp (LogAppendTime) can't. Records are only parsed where Kafka's semantics need
them (``iter_records``); the produce and fetch paths never do.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass

from crc32c import crc32c

from .compression import decompress
from .errors import ErrorCode, KafkaError

HEADER_SIZE = 61
LOG_OVERHEAD = 12  # baseOffset + batchLength: what precedes the length-counted part
MAGIC_OFFSET = 16
CRC_OFFSET = 17
ATTRIBUTES_OFFSET = 21
MAX_TIMESTAMP_OFFSET = 35

COMPRESSION_MASK = 0x07
TIMESTAMP_TYPE_LOG_APPEND = 0x08
TRANSACTIONAL_FLAG = 0x10
CONTROL_FLAG = 0x20

NO_TIMESTAMP = -1

_HEADER = struct.Struct(">qiibIhiqqqhii")
_LENGTH = struct.Struct(">qi")
_INT64 = struct.Struct(">q")
_INT32 = struct.Struct(">i")
_ATTRS_AND_MAX_TS = struct.Struct(">h")


@dataclass(slots=True, frozen=True)
class BatchHeader:
    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    record_count: int

    @property
    def size(self) -> int:
        return self.batch_length + LOG_OVERHEAD

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def compression(self) -> int:
        return self.attributes & COMPRESSION_MASK

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_FLAG)

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_FLAG)

    @property
    def is_log_append_time(self) -> bool:
        return bool(self.attributes & TIMESTAMP_TYPE_LOG_APPEND)


def read_header(buf: bytes | bytearray | memoryview, pos: int = 0) -> BatchHeader:
    return BatchHeader(*_HEADER.unpack_from(buf, pos))


def batch_size_at(buf: bytes | bytearray | memoryview, pos: int) -> int | None:
    """Total size of the batch starting at ``pos``, or None if its length prefix is cut."""
    if len(buf) - pos < LOG_OVERHEAD:
        return None
    length: int = _INT32.unpack_from(buf, pos + 8)[0]
    return length + LOG_OVERHEAD


def crc_is_valid(buf: bytes | bytearray | memoryview, pos: int, size: int) -> bool:
    stored: int = struct.unpack_from(">I", buf, pos + CRC_OFFSET)[0]
    return crc32c(memoryview(buf)[pos + ATTRIBUTES_OFFSET : pos + size]) == stored


def split_batches(records: bytes | bytearray | memoryview) -> list[tuple[int, BatchHeader]]:
    """Validate a produce payload and return (position, header) for each batch in it.

    Raises KafkaError(CORRUPT_MESSAGE) for a truncated or CRC-failing batch and
    INVALID_RECORD for a batch that is not magic v2 or whose counts disagree.
    """
    out: list[tuple[int, BatchHeader]] = []
    pos = 0
    total = len(records)
    if total == 0:
        raise KafkaError(ErrorCode.invalid_record, "produce request with no record batch")
    while pos < total:
        if total - pos < HEADER_SIZE:
            raise KafkaError(ErrorCode.corrupt_message, "truncated record batch header")
        header = read_header(records, pos)
        if header.magic != 2:
            raise KafkaError(
                ErrorCode.invalid_record, f"record batch magic {header.magic} is not supported"
            )
        size = header.size
        if header.batch_length < HEADER_SIZE - LOG_OVERHEAD or pos + size > total:
            raise KafkaError(ErrorCode.corrupt_message, "record batch length is out of bounds")
        if not crc_is_valid(records, pos, size):
            raise KafkaError(ErrorCode.corrupt_message, "record batch CRC32C mismatch")
        if header.record_count <= 0 or header.last_offset_delta != header.record_count - 1:
            raise KafkaError(
                ErrorCode.invalid_record,
                f"record count {header.record_count} does not match lastOffsetDelta "
                f"{header.last_offset_delta}",
            )
        out.append((pos, header))
        pos += size
    return out


def patch_base_offset(buf: bytearray | memoryview, pos: int, base_offset: int) -> None:
    _INT64.pack_into(buf, pos, base_offset)


def patch_leader_epoch(buf: bytearray | memoryview, pos: int, epoch: int) -> None:
    _INT32.pack_into(buf, pos + 12, epoch)


def set_log_append_time(buf: bytearray | memoryview, pos: int, size: int, now_ms: int) -> None:
    """Stamp a batch with LogAppendTime: attribute bit, max timestamp, and a fresh CRC.

    Kafka leaves record timestamps alone; readers use the batch's max timestamp instead.
    """
    (attributes,) = _ATTRS_AND_MAX_TS.unpack_from(buf, pos + ATTRIBUTES_OFFSET)
    _ATTRS_AND_MAX_TS.pack_into(buf, pos + ATTRIBUTES_OFFSET, attributes | TIMESTAMP_TYPE_LOG_APPEND)
    _INT64.pack_into(buf, pos + MAX_TIMESTAMP_OFFSET, now_ms)
    crc = crc32c(memoryview(buf)[pos + ATTRIBUTES_OFFSET : pos + size])
    struct.pack_into(">I", buf, pos + CRC_OFFSET, crc)


@dataclass(slots=True, frozen=True)
class Record:
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    """Zig-zag varint (records use signed varints)."""
    raw = 0
    shift = 0
    while True:
        byte = buf[pos]
        pos += 1
        raw |= (byte & 0x7F) << shift
        if byte < 0x80:
            break
        shift += 7
    return (raw >> 1) ^ -(raw & 1), pos


def _bytes_field(buf: bytes, pos: int) -> tuple[bytes | None, int]:
    length, pos = _varint(buf, pos)
    if length < 0:
        return None, pos
    return buf[pos : pos + length], pos + length


def iter_records(batch: bytes | memoryview) -> Iterator[Record]:
    """Decode the records of one whole batch (decompressing if needed)."""
    header = read_header(batch)
    data = decompress(header.compression, batch[HEADER_SIZE : header.size])
    pos = 0
    try:
        for _ in range(header.record_count):
            length, pos = _varint(data, pos)
            end = pos + length
            pos += 1  # record attributes, unused
            ts_delta, pos = _varint(data, pos)
            offset_delta, pos = _varint(data, pos)
            key, pos = _bytes_field(data, pos)
            value, pos = _bytes_field(data, pos)
            header_count, pos = _varint(data, pos)
            headers = []
            for _h in range(max(header_count, 0)):
                name, pos = _bytes_field(data, pos)
                hvalue, pos = _bytes_field(data, pos)
                headers.append(((name or b"").decode("utf-8", "replace"), hvalue))
            if pos != end:
                raise KafkaError(ErrorCode.corrupt_message, "record length disagrees with fields")
            timestamp = (
                header.max_timestamp
                if header.is_log_append_time
                else header.base_timestamp + ts_delta
            )
            yield Record(header.base_offset + offset_delta, timestamp, key, value, tuple(headers))
    except IndexError as exc:
        raise KafkaError(ErrorCode.corrupt_message, "record runs past the end of its batch") from exc


def control_record_type(batch: bytes | memoryview) -> int | None:
    """The type of a control batch's record (0 abort, 1 commit), or None if it has none."""
    for record in iter_records(batch):
        if record.key is None or len(record.key) < 4:
            return None
        record_type: int = struct.unpack_from(">h", record.key, 2)[0]
        return record_type
    return None
