"""ListOffsets: earliest, latest, by timestamp (exact, between, ties, past the end), max
timestamp, after DeleteRecords, on LogAppendTime topics, and for missing topics/partitions."""

from __future__ import annotations

from typing import Any

from compat.clients.base import Rec
from compat.scenarios import BASE_TS, Run, scenario

L = {"admin.list_offsets"}


def put_stamped(run: Run, stamps: list[int], **topic: Any) -> str:
    t = run.topic(**topic)
    run.harness.put(t, [Rec(f"v{i}".encode(), None, (), 0, ts) for i, ts in enumerate(stamps)])
    return t


def query(run: Run, topic: str, specs: dict[str, Any], partition: int = 0) -> dict[str, Any]:
    return {label: run.client.list_offsets(topic, partition, spec) for label, spec in specs.items()}


@scenario("offsets/empty-partition", needs=L)
def empty_partition(run: Run) -> Any:
    """Earliest and latest of an empty partition, and a timestamp query finding nothing."""
    t = run.topic()
    specs: dict[str, Any] = {"earliest": "earliest", "latest": "latest", "timestamp": BASE_TS}
    if run.supports("list_offsets.max_timestamp"):
        specs["max_timestamp"] = "max_timestamp"
    return query(run, t, specs)


@scenario("offsets/earliest-latest", needs=L)
def earliest_latest(run: Run) -> Any:
    """Ten records: earliest 0, latest 10."""
    t = put_stamped(run, [BASE_TS + i * 1000 for i in range(10)])
    return query(run, t, {"earliest": "earliest", "latest": "latest"})


@scenario("offsets/by-timestamp", needs=L)
def by_timestamp(run: Run) -> Any:
    """First offset whose timestamp is >= the query: before all, exact, between, last, past the end."""
    t = put_stamped(run, [BASE_TS + i * 1000 for i in range(10)])
    return query(run, t, {"before-all": BASE_TS - 1000, "exact-first": BASE_TS, "exact-3": BASE_TS + 3000,
                          "between-3-4": BASE_TS + 3500, "last": BASE_TS + 9000, "past-end": BASE_TS + 9001})


@scenario("offsets/timestamp-ties", needs=L)
def timestamp_ties(run: Run) -> Any:
    """Several records share a timestamp: the query answers the first of them."""
    t = put_stamped(run, [BASE_TS, BASE_TS + 1000, BASE_TS + 1000, BASE_TS + 1000, BASE_TS + 2000])
    return query(run, t, {"tied": BASE_TS + 1000, "after-tie": BASE_TS + 1001})


@scenario("offsets/out-of-order-timestamps", needs=L)
def out_of_order_timestamps(run: Run) -> Any:
    """Timestamps not increasing with offsets: a query answers the first offset at or after it."""
    t = put_stamped(run, [BASE_TS + 5000, BASE_TS + 1000, BASE_TS + 9000, BASE_TS + 3000])
    return query(run, t, {"t2000": BASE_TS + 2000, "t6000": BASE_TS + 6000, "t9500": BASE_TS + 9500})


@scenario("offsets/max-timestamp", needs=L | {"list_offsets.max_timestamp"})
def max_timestamp(run: Run) -> Any:
    """MAX_TIMESTAMP (KIP-734): the record with the largest timestamp, ties included."""
    t = put_stamped(run, [BASE_TS + 5000, BASE_TS + 1000, BASE_TS + 9000, BASE_TS + 3000, BASE_TS + 9000])
    return query(run, t, {"max": "max_timestamp"})


@scenario("offsets/after-delete-records", needs=L)
def after_delete_records(run: Run) -> Any:
    """After DeleteRecords up to 5: earliest 5; a timestamp before record 5 answers 5."""
    t = put_stamped(run, [BASE_TS + i * 1000 for i in range(10)])
    run.harness.delete_records(t, 0, 5)
    return query(run, t, {"earliest": "earliest", "latest": "latest", "t0": BASE_TS, "t7": BASE_TS + 7000})


@scenario("offsets/log-append-time", needs=L)
def log_append_time(run: Run) -> Any:
    """On a LogAppendTime topic the broker's clock decides: an old timestamp finds offset 0."""
    t = put_stamped(run, [BASE_TS, BASE_TS + 1000], configs={"message.timestamp.type": "LogAppendTime"})
    return query(run, t, {"old": BASE_TS, "latest": "latest"})


@scenario("offsets/unknown-topic", needs=L, clients=("kafka-python", "confluent", "kcat", "java", "java-cli"))
def unknown_topic(run: Run) -> Any:
    """ListOffsets for a missing topic. (aiokafka waits for the topic until its timeout.)"""
    return run.client.list_offsets(run.name("missing"), 0, "latest")


@scenario("offsets/unknown-partition", needs=L, clients=("kafka-python", "confluent", "kcat", "java-cli"))
def unknown_partition(run: Run) -> Any:
    """ListOffsets for partition 5 of a one-partition topic. (The Java Admin client and
    aiokafka wait for metadata naming the partition until their timeout, never asking.)"""
    return run.client.list_offsets(run.topic(), 5, "latest")
