"""Messages in are counted from batch headers: the records-count field of every batch in a
produce partition, never by reading records."""

from __future__ import annotations

from kbroker.protocol.errors import ErrorCode
from kbroker.protocol.record_builder import build_batch

from kbroker.metrics.topic_metrics import BrokerTopicMetrics, records_in


def test_records_in_sums_every_batch_header() -> None:
    first = build_batch([(None, b"a"), (None, b"b"), (None, b"c")])
    second = build_batch([(b"k", b"v")] * 5, base_offset=3)
    assert records_in(memoryview(first + second)) == 8
    assert records_in(memoryview(b"")) == 0


def test_failed_appends_count_as_failed_requests_not_messages() -> None:
    metrics = BrokerTopicMetrics()
    batch = memoryview(build_batch([(None, b"x")] * 4))
    metrics.produced("t", batch, ErrorCode.none)
    metrics.produced("t", batch, ErrorCode.invalid_record)
    assert metrics.messages_in["t"] == 4 and metrics.bytes_in["t"] == len(batch)
    assert metrics.total_produce_requests["t"] == 2 and metrics.failed_produce_requests["t"] == 1


def test_expected_refusals_are_not_failures() -> None:
    """As Kafka's FailedProduceRequestsPerSec: a partition led elsewhere, an unknown partition,
    a record too large, a corrupt batch or a storage error is not a failure of the broker."""
    metrics = BrokerTopicMetrics()
    batch = memoryview(build_batch([(None, b"x")]))
    for error in (ErrorCode.not_leader_or_follower, ErrorCode.unknown_topic_or_partition, ErrorCode.message_too_large,
                  ErrorCode.record_list_too_large, ErrorCode.corrupt_message, ErrorCode.kafka_storage_error):
        metrics.produced("t", batch, error)
    metrics.produced("t", batch, ErrorCode.not_enough_replicas)
    assert metrics.total_produce_requests["t"] == 7 and metrics.failed_produce_requests["t"] == 1
    assert metrics.messages_in["t"] == 0
