"""The checks of record batches before a log writes them, and a leader's offset assignment in
place (Kafka's LogValidator).

``validate_batches`` refuses a payload before anything is written: a batch larger than
max.message.bytes (MESSAGE_TOO_LARGE), a control batch from a client (INVALID_RECORD), under
CreateTime a timestamp outside message.timestamp.before/after.max.ms (INVALID_TIMESTAMP), and
on a compacted topic a record without a key (INVALID_RECORD). Records are parsed only for the
last check; the rest reads batch headers.

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
    BatchHeader,
    iter_records,
    patch_base_offset,
    patch_leader_epoch,
    set_log_append_time,
)

from .log_config import LogConfig
from .segment import AppendedBatch


def validate_batches(records: memoryview, batches: list[tuple[int, BatchHeader]], config: LogConfig,
                     now_ms: int, label: str) -> None:
    """Raise the error Kafka answers for the first batch that breaks a rule (see the module
    docstring); ``label`` (topic-partition) is named in the compacted-topic message."""
    for index, (pos, header) in enumerate(batches):
        if header.size > config.max_message_bytes:
            raise KafkaError(
                ErrorCode.message_too_large,
                f"batch of {header.size} bytes exceeds max.message.bytes {config.max_message_bytes}",
            )
        if header.is_control:
            raise KafkaError(ErrorCode.invalid_record, "clients may not produce control batches")
        if not config.log_append_time:
            if header.max_timestamp > now_ms + config.timestamp_after_max_ms or (
                header.base_timestamp >= 0 and header.base_timestamp < now_ms - config.timestamp_before_max_ms
            ):
                raise InvalidRecordError(
                    ErrorCode.invalid_timestamp,
                    "record timestamp is out of the range allowed by "
                    "message.timestamp.before.max.ms / message.timestamp.after.max.ms",
                    [(index, None)],
                )
        if config.compact:
            whole = records[pos : pos + header.size]
            for i, record in enumerate(iter_records(whole)):
                if record.key is None:
                    raise InvalidRecordError(
                        ErrorCode.invalid_record,
                        f"Compacted topic cannot accept message without key in topic partition {label}.",
                        [(i, None)],
                    )


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
