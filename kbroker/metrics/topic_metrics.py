"""Kafka's BrokerTopicMetrics: messages, bytes and requests in and out, per topic and for all
topics, as plain counters the produce and fetch paths add to and /metrics reads.

Messages in are counted from each appended batch's header (its records-count field), as Kafka
counts appended records, without reading a record.
"""

from __future__ import annotations

import struct
from collections import defaultdict

from kbroker.protocol.errors import ErrorCode

# ReplicaManager.appendToLocalLog's "known exceptions", which FailedProduceRequestsPerSec leaves out
EXPECTED_PRODUCE_ERRORS = frozenset({
    ErrorCode.unknown_topic_or_partition, ErrorCode.not_leader_or_follower, ErrorCode.message_too_large,
    ErrorCode.record_list_too_large, ErrorCode.corrupt_message, ErrorCode.kafka_storage_error,
})
_INT32 = struct.Struct(">i")
_BATCH_LENGTH_AT = 8  # base offset (8) then the batch length (4)
_RECORDS_COUNT_AT = 57  # the last field of the 61-byte v2 batch header
_BATCH_OVERHEAD = 12  # base offset and length precede the bytes the length counts


def records_in(records: memoryview | bytes) -> int:
    """The records of every batch in ``records``, from the batch headers alone."""
    count = 0
    position = 0
    end = len(records)
    while position + _RECORDS_COUNT_AT + 4 <= end:
        count += _INT32.unpack_from(records, position + _RECORDS_COUNT_AT)[0]
        position += _BATCH_OVERHEAD + _INT32.unpack_from(records, position + _BATCH_LENGTH_AT)[0]
    return count


class BrokerTopicMetrics:
    """Per-topic counters (Kafka's BrokerTopicMetrics meters' counts); the all-topics value is
    their sum, summed at scrape time."""

    def __init__(self) -> None:
        self.messages_in: defaultdict[str, int] = defaultdict(int)
        self.bytes_in: defaultdict[str, int] = defaultdict(int)
        self.bytes_out: defaultdict[str, int] = defaultdict(int)
        self.replication_bytes_out: defaultdict[str, int] = defaultdict(int)
        self.total_produce_requests: defaultdict[str, int] = defaultdict(int)
        self.failed_produce_requests: defaultdict[str, int] = defaultdict(int)
        self.total_fetch_requests: defaultdict[str, int] = defaultdict(int)

    def produced(self, topic: str, records: memoryview | bytes, error: int) -> None:
        """One partition of a Produce request (or a coordinator's append) answered ``error``:
        Kafka marks the topic's produce request rate per partition, counts messages and bytes in
        only for an append that succeeded, and counts as failed only what it does not expect (not
        a partition led elsewhere, a record too large, a corrupt batch or a storage error)."""
        self.total_produce_requests[topic] += 1
        if error == ErrorCode.none:
            self.messages_in[topic] += records_in(records)
            self.bytes_in[topic] += len(records)
        elif error not in EXPECTED_PRODUCE_ERRORS:
            self.failed_produce_requests[topic] += 1


# One node per process: the produce path and /metrics share this instance.
BROKER_TOPIC_METRICS = BrokerTopicMetrics()
