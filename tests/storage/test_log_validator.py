"""validate_batches: Kafka's per-record errors (KIP-467) for a whole batch, with the codes and
texts Kafka 4.3.1 answers (seen side by side with raw Produce v9 requests), and the header-only
fast path of the common valid batch."""

from __future__ import annotations

import pytest
from kbroker.protocol.errors import ErrorCode, InvalidRecordError, KafkaError
from kbroker.protocol.record_builder import build_batch
from kbroker.protocol.records import TIMESTAMP_TYPE_LOG_APPEND, split_batches
from kbroker.storage import log_validator
from kbroker.storage.log_config import LogConfig
from kbroker.storage.log_validator import validate_batches

NOW = 1_795_712_140_022
HOUR = 3_600_000
LABEL = "t-0"
KEYLESS = "Compacted topic cannot accept message without key in topic partition t-0"


def check(payload: bytes, **config: object) -> None:
    records = memoryview(bytearray(payload))
    validate_batches(records, split_batches(records), LogConfig(**config), NOW, LABEL)  # type: ignore[arg-type]


def refusal(payload: bytes, **config: object) -> InvalidRecordError:
    with pytest.raises(InvalidRecordError) as caught:
        check(payload, **config)
    return caught.value


def test_every_keyless_record_of_a_compacted_batch_is_named():
    records = [(None if i % 5 == 0 else b"k%d" % i, b"v%d" % i) for i in range(20)]
    err = refusal(build_batch(records, base_timestamp=NOW), compact=True)
    assert err.code == ErrorCode.invalid_record
    assert err.record_errors == [(i, KEYLESS) for i in (0, 5, 10, 15)]
    shown = ", ".join(f"RecordError(batchIndex={i}, message='{KEYLESS}')" for i in (0, 5, 10))
    assert err.message == ("One or more records have been rejected due to 4 record errors in total, and only "
                           f"showing the first three errors at most: [{shown}]")


def test_every_out_of_range_timestamp_is_named_even_before_the_batch_first():
    stamps = [NOW, NOW - 2 * HOUR, NOW + 2 * HOUR, NOW, -1, NOW - 3 * HOUR]
    err = refusal(build_batch([(b"k", b"v")] * 6, timestamps=stamps), timestamp_before_max_ms=HOUR)
    assert err.code == ErrorCode.invalid_timestamp
    assert err.message == "One or more records have been rejected due to invalid timestamp"
    assert [i for i, _m in err.record_errors] == [1, 2, 5]
    assert err.record_errors[0][1] == (f"Timestamp {NOW - 2 * HOUR} of message with offset 1 is out of range. "
                                       f"The timestamp should be within [{NOW - HOUR}, {NOW + HOUR}]")


def test_default_lower_bound_is_now_minus_long_max():
    err = refusal(build_batch([(b"k", b"v")] * 2, timestamps=[NOW, NOW + 2 * HOUR]))
    assert err.record_errors == [(1, f"Timestamp {NOW + 2 * HOUR} of message with offset 1 is out of range. "
                                     f"The timestamp should be within [{NOW - (2**63 - 1)}, {NOW + HOUR}]")]


def test_a_key_error_hides_the_timestamp_error_and_timestamps_decide_the_code():
    stamps = [NOW + 2 * HOUR, NOW + 2 * HOUR, NOW, NOW]
    err = refusal(build_batch([(None, b"v"), (b"k", b"v"), (None, b"v"), (b"k", b"v")], timestamps=stamps),
                  compact=True)
    assert err.code == ErrorCode.invalid_timestamp
    assert [(i, m.split(" ")[0]) for i, m in err.record_errors] == [(0, "Compacted"), (1, "Timestamp"),
                                                                      (2, "Compacted")]


def test_log_append_time_attribute_from_a_producer():
    claimed = build_batch([(b"k", b"v")] * 2, timestamps=[NOW, NOW], attributes=TIMESTAMP_TYPE_LOG_APPEND)
    err = refusal(claimed, log_append_time=True)
    assert err.code == ErrorCode.invalid_timestamp
    assert err.record_errors[1] == (1, f"Invalid timestamp type in message DefaultRecord(offset=1, timestamp={NOW}, "
                                       "key=1 bytes, value=1 bytes). Producer should not set timestamp type to "
                                       "LogAppendTime.")
    check(claimed)  # CreateTime topic, timestamps in range: Kafka takes it
    untimed = build_batch([(b"k", b"v")], timestamps=[-1], attributes=TIMESTAMP_TYPE_LOG_APPEND)
    assert refusal(untimed).code == ErrorCode.invalid_timestamp


def test_more_than_one_batch_is_invalid():
    one = build_batch([(b"k", b"v")], base_timestamp=NOW)
    with pytest.raises(KafkaError) as caught:
        check(one + one)
    assert caught.value.code == ErrorCode.invalid_record
    with pytest.raises(KafkaError) as caught:  # sizes are checked first, as Kafka's UnifiedLog does
        check(one + build_batch([(b"k", b"v" * 2000)], base_timestamp=NOW), max_message_bytes=1000)
    assert caught.value.code == ErrorCode.message_too_large


def test_valid_batch_with_default_bounds_is_not_parsed(monkeypatch):
    """The hot path stays opaque: header checks only, unless a record could fail."""
    def no_parsing(_batch: object) -> None:
        raise AssertionError("records parsed")

    monkeypatch.setattr(log_validator, "iter_records", no_parsing)
    check(build_batch([(None, b"v")] * 100, timestamps=[NOW - 10 * HOUR + i for i in range(100)]))
    check(build_batch([(None, b"v")] * 3, timestamps=[NOW] * 3), log_append_time=True)
