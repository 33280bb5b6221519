"""The checks of record batches before a log writes them, and a leader's offset assignment in
place (Kafka's LogValidator).

``validate_batches`` refuses a payload before anything is written: more than one batch
(INVALID_RECORD: Kafka takes one magic-v2 batch per partition), a batch larger than
max.message.bytes (MESSAGE_TOO_LARGE), a control batch from a client (INVALID_RECORD), and the
per-record errors of KIP-467: on a compacted topic every record without a key (INVALID_RECORD),
under CreateTime every timestamp outside message.timestamp.before/after.max.ms, and a batch
claiming LogAppendTime where Kafka does not take it (INVALID_TIMESTAMP). As Kafka, the whole
batch is checked and each bad record is named by its index in the batch; a key error hides that
record's timestamp error, and any timestamp error makes the partition's answer
INVALID_TIMESTAMP. Records are parsed only when one of them can fail: on a compacted topic,
or when the batch header cannot vouch for the timestamps (its max timestamp beyond the upper
bound, a finite message.timestamp.before.max.ms: a record may be older than the batch's first,
or the LogAppendTime attribute). Unlike Kafka, which recomputes a batch's max timestamp from
its records, kbroker trusts the header's max timestamp on that fast path.

``follower_batches`` checks what a follower copies from its leader: offsets already assigned,
the first batch at the follower's log end and each next one right after the previous (else
UNKNOWN_SERVER_ERROR: the fetch went wrong, nothing is written).

``assign_offsets`` patches the batches' base offsets, partition leader epoch and, under
LogAppendTime, their timestamps into the caller's buffer (the CRC covers none of the first two;
``set_log_append_time`` recomputes it) and returns what the segment indexes of each batch.
"""

from __future__ import annotations

from kbroker.protocol.errors import ErrorCode, InvalidRecordError, KafkaError
from kbroker.protocol.records import (
    NO_TIMESTAMP,
    BatchHeader,
    Record,
    iter_records,
    patch_base_offset,
    patch_leader_epoch,
    set_log_append_time,
)

from .log_config import MAX_LONG, LogConfig
from .segment import AppendedBatch

# Kafka shows at most this many record errors in the partition's error message.
SHOWN_RECORD_ERRORS = 3
_TIMESTAMP_ERROR_MESSAGE = "One or more records have been rejected due to invalid timestamp"


def _long(value: int) -> int:
    """``value`` wrapped to a Java long: Kafka's bounds arithmetic overflows, and so must ours
    for the same answer (a before.max.ms of Long.MAX_VALUE makes the lower bound negative)."""
    return (value + 2**63) % 2**64 - 2**63


class _TimestampBounds:
    """message.timestamp.before/after.max.ms at one moment, with Kafka's (wrapping) arithmetic."""

    __slots__ = ("after_ms", "before_ms", "now_ms")

    def __init__(self, config: LogConfig, now_ms: int) -> None:
        self.now_ms = now_ms
        self.before_ms = config.timestamp_before_max_ms
        self.after_ms = config.timestamp_after_max_ms

    def rejects(self, timestamp: int) -> bool:
        diff = _long(self.now_ms - timestamp)
        return diff > self.before_ms or _long(-diff) > self.after_ms

    def message(self, record: Record) -> str:
        return (f"Timestamp {record.timestamp} of message with offset {record.offset} is out of range. "
                f"The timestamp should be within [{_long(self.now_ms - self.before_ms)}, "
                f"{_long(self.now_ms + self.after_ms)}]")


def validate_batches(records: memoryview, batches: list[tuple[int, BatchHeader]], config: LogConfig,
                     now_ms: int, label: str) -> None:
    """Raise the error Kafka answers for the payload (see the module docstring); ``label``
    (topic-partition) is named in the messages that name it."""
    for _pos, header in batches:  # Kafka checks sizes first (UnifiedLog), then the batches
        if header.size > config.max_message_bytes:
            raise KafkaError(
                ErrorCode.message_too_large,
                f"batch of {header.size} bytes exceeds max.message.bytes {config.max_message_bytes}",
            )
    if len(batches) > 1:
        raise KafkaError(ErrorCode.invalid_record, "Compressed outer record has more than one batch")
    bounds = _TimestampBounds(config, now_ms)
    for pos, header in batches:
        if header.is_control:
            raise KafkaError(ErrorCode.invalid_record, "clients may not produce control batches")
        if config.compact or _timestamps_may_fail(header, config, bounds):
            _raise_record_errors(records[pos : pos + header.size], header, config, bounds, label)


def _timestamps_may_fail(header: BatchHeader, config: LogConfig, bounds: _TimestampBounds) -> bool:
    """Whether a record's timestamp could be refused, from the batch header alone."""
    if header.is_log_append_time:
        # Every record carries the header's max timestamp then; Kafka refuses the attribute
        # on a LogAppendTime topic, and on a CreateTime one for records without a timestamp.
        return config.log_append_time or header.max_timestamp == NO_TIMESTAMP or bounds.rejects(header.max_timestamp)
    if config.log_append_time:
        return False
    return config.timestamp_before_max_ms != MAX_LONG or (
        header.max_timestamp != NO_TIMESTAMP and bounds.rejects(header.max_timestamp))


def _raise_record_errors(batch: memoryview, header: BatchHeader, config: LogConfig, bounds: _TimestampBounds,
                         label: str) -> None:
    """Check every record of one batch and raise InvalidRecordError naming each bad one."""
    errors: list[tuple[int, str | None]] = []
    timestamp_error = False
    for index, decoded in enumerate(iter_records(batch)):
        record = _with_long_timestamp(decoded)
        if config.compact and record.key is None:
            errors.append((index, f"Compacted topic cannot accept message without key in topic partition {label}"))
        elif not config.log_append_time and record.timestamp != NO_TIMESTAMP:
            if bounds.rejects(record.timestamp):
                errors.append((index, bounds.message(record)))
                timestamp_error = True
        elif header.is_log_append_time:
            errors.append((index, f"Invalid timestamp type in message {_describe(record)}. "
                                  "Producer should not set timestamp type to LogAppendTime."))
            timestamp_error = True
    if not errors:
        return
    if timestamp_error:
        raise InvalidRecordError(ErrorCode.invalid_timestamp, _TIMESTAMP_ERROR_MESSAGE, errors)
    shown = ", ".join(f"RecordError(batchIndex={i}, message='{m}')" for i, m in errors[:SHOWN_RECORD_ERRORS])
    raise InvalidRecordError(
        ErrorCode.invalid_record,
        f"One or more records have been rejected due to {len(errors)} record errors in total, and only "
        f"showing the first three errors at most: [{shown}]",
        errors,
    )


def _with_long_timestamp(record: Record) -> Record:
    """The record with its timestamp as Kafka reads it: base timestamp + delta as a Java long."""
    timestamp = _long(record.timestamp)
    if timestamp == record.timestamp:
        return record
    return Record(record.offset, timestamp, record.key, record.value, record.headers)


def _describe(record: Record) -> str:
    """A record as Kafka's DefaultRecord prints itself in error messages."""
    key = 0 if record.key is None else len(record.key)
    value = 0 if record.value is None else len(record.value)
    return f"DefaultRecord(offset={record.offset}, timestamp={record.timestamp}, key={key} bytes, value={value} bytes)"


def assign_offsets(records: memoryview, batches: list[tuple[int, BatchHeader]], first_offset: int,
                   leader_epoch: int, now_ms: int, log_append_time: bool) -> list[AppendedBatch]:
    """Number the batches from ``first_offset`` in place (see the module docstring)."""
    offset = first_offset
    appended: list[AppendedBatch] = []
    for pos, header in batches:
        patch_base_offset(records, pos, offset)
        patch_leader_epoch(records, pos, leader_epoch)
        if log_append_time:
            set_log_append_time(records, pos, header.size, now_ms)
        max_ts = now_ms if log_append_time else header.max_timestamp
        appended.append(AppendedBatch(pos, offset + header.last_offset_delta, max_ts))
        offset += header.record_count
    return appended


def follower_batches(batches: list[tuple[int, BatchHeader]], log_end_offset: int, label: str) -> list[AppendedBatch]:
    """What the segment indexes of batches a leader numbered, if they continue the log at
    ``log_end_offset`` without a gap (see the module docstring)."""
    offset = log_end_offset
    appended: list[AppendedBatch] = []
    for pos, header in batches:
        if header.base_offset != offset:
            raise KafkaError(
                ErrorCode.unknown_server_error,
                f"follower append to {label}: batch at offset {header.base_offset}, "
                f"expected {offset} (log end offset {log_end_offset})",
            )
        appended.append(AppendedBatch(pos, header.last_offset, header.max_timestamp))
        offset = header.last_offset + 1
    return appended
