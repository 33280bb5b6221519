"""The deprecated consumer-based driver (``spark.sql.streaming.kafka.useDeprecatedOffsetFetching``):
scenarios 41-43, which need the broker's classic consumer-group protocol on the driver.

The connector's timeouts and retries are small so that a broker without the group protocol
fails within seconds instead of hanging.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from pyspark.sql import SparkSession
from pyspark.sql.streaming import StreamingQuery

from compat.clients.base import Rec
from spark.tests.brokers import SparkBroker
from spark.tests.kafka_io import read_stream, start_collecting_query

DEPRECATED = "spark.sql.streaming.kafka.useDeprecatedOffsetFetching"
WAIT_S = 60.0  # bounded waits; a failed query is reported at once, not at the deadline
# Without LeaveGroup a restarted member waits for the old one's session to expire (60 s).
SESSION_TIMEOUT_MS = 60000
# Small timeouts and few retries: where there is no group coordinator the driver fails fast.
FAST = {
    "kafka.default.api.timeout.ms": "5000",
    "kafka.request.timeout.ms": "5000",
    "kafka.session.timeout.ms": str(SESSION_TIMEOUT_MS),
    "kafka.metadata.max.age.ms": "500",
    "fetchOffset.numRetries": "2",
    "fetchOffset.retryIntervalMs": "200",
}

Batches = list[tuple[int, list[Any]]]


@pytest.fixture
def deprecated(spark: SparkSession, broker: SparkBroker) -> Iterator[SparkBroker]:
    """The broker, with the consumer-based driver on for this test's queries only."""
    spark.conf.set(DEPRECATED, "true")
    try:
        yield broker
    finally:
        spark.conf.unset(DEPRECATED)


def _values(batches: Batches) -> list[str]:
    return [bytes(row.value).decode() for _, rows in list(batches) for row in rows]


def _wait(query: StreamingQuery, done: Callable[[], bool], what: str) -> None:
    """Poll ``done`` until true (bounded); a query that failed is reported immediately."""
    deadline = time.monotonic() + WAIT_S
    while not done():
        error = query.exception()
        if error is not None:
            raise AssertionError(f"query failed while waiting for {what}: {error}")
        if not query.isActive:
            raise AssertionError(f"query stopped while waiting for {what}")
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.1)


def _wait_values(query: StreamingQuery, batches: Batches, expected: list[str]) -> None:
    """Wait until ``expected`` values were delivered, then drain and check nothing else came."""
    _wait(query, lambda: len(_values(batches)) >= len(expected), f"{len(expected)} records")
    query.processAllAvailable()
    assert sorted(_values(batches)) == sorted(expected)


def _put(broker: SparkBroker, topic: str, tag: str, partitions: list[int], per_partition: int) -> list[str]:
    values = [f"{tag}-p{p}-{i}" for p in partitions for i in range(per_partition)]
    records = [Rec(v.encode(), partition=int(v.split("-p")[1].split("-")[0])) for v in values]
    broker.harness.put(topic, records)
    return values


def _stop(query: StreamingQuery | None) -> None:
    if query is not None:
        query.stop()


def _group_ids(broker: SparkBroker) -> list[str]:
    # The harness's long-lived AdminClient: a fresh one may answer ListGroups before it has
    # learnt the cluster's brokers, with an empty list.
    result = broker.harness.admin.list_consumer_groups(request_timeout=5).result(timeout=10)
    return sorted(g.group_id for g in result.valid)


def _describe(broker: SparkBroker, group: str) -> tuple[str, int]:
    """(state name, member count) of ``group``."""
    (future,) = broker.harness.admin.describe_consumer_groups([group], request_timeout=5).values()
    d = future.result(timeout=10)
    return d.state.name, len(d.members)


def test_stream_reads_with_consumer_driver(spark: SparkSession, deprecated: SparkBroker, checkpoint: str) -> None:
    """Scenario 41 (11, 12, 13 with the consumer-based driver): the backlog from earliest, records
    produced while running, and after stop/restart on the checkpoint the records produced while
    stopped, with nothing repeated or skipped; a second query from latest sees only new records."""
    broker = deprecated
    topic = broker.topic("dep-read", 2)
    expected = _put(broker, topic, "backlog", [0, 1], 3)
    options = {"subscribe": topic, "startingOffsets": "earliest", **FAST}
    query, batches = start_collecting_query(read_stream(spark, broker, options), checkpoint)
    latest = None
    try:
        _wait_values(query, batches, expected)
        latest, latest_batches = start_collecting_query(
            read_stream(spark, broker, {**options, "startingOffsets": "latest"}), checkpoint + "-latest"
        )
        latest.processAllAvailable()
        assert _values(latest_batches) == []
        live = _put(broker, topic, "live", [0, 1], 2)
        expected += live
        _wait_values(query, batches, expected)
        _wait_values(latest, latest_batches, live)
    finally:
        _stop(latest)
        _stop(query)

    expected_after = _put(broker, topic, "stopped", [0, 1], 2)
    query, batches = start_collecting_query(read_stream(spark, broker, options), checkpoint)
    try:
        _wait_values(query, batches, expected_after)
    finally:
        _stop(query)


def test_pattern_and_added_partitions_with_consumer_driver(
    spark: SparkSession, deprecated: SparkBroker, checkpoint: str
) -> None:
    """Scenario 41 (16, 17 with the consumer-based driver): a topic matching the pattern created
    while the query runs is read from offset 0, and partitions added to a subscribed topic (2 -> 4)
    deliver their records, with no data-loss error."""
    broker = deprecated
    prefix = f"dep-pat-{uuid.uuid4().hex[:6]}"
    first = broker.topic(prefix, 2)
    expected = _put(broker, first, "a", [0, 1], 2)
    options = {"subscribePattern": f"{prefix}-.*", "startingOffsets": "earliest", "failOnDataLoss": True, **FAST}
    query, batches = start_collecting_query(read_stream(spark, broker, options), checkpoint)
    try:
        _wait_values(query, batches, expected)
        assert broker.harness.create_partitions(first, 4) is None
        broker.harness.wait_topic(first, 4)
        expected += _put(broker, first, "added", [2, 3], 2)
        _wait_values(query, batches, expected)
        second = broker.topic(prefix, 1)
        expected += _put(broker, second, "new", [0], 3)
        _wait_values(query, batches, expected)
        assert {(row.topic, row.partition, row.offset) for _, rows in batches for row in rows} >= {
            (first, 2, 0), (first, 3, 0), (second, 0, 0)
        }  # fmt: skip
    finally:
        _stop(query)


def test_group_listed_while_running(spark: SparkSession, deprecated: SparkBroker, tmp_path: Any) -> None:
    """Scenario 42: with ``groupIdPrefix=P`` the broker lists a group starting with P while the
    query runs; with ``kafka.group.id=X`` it lists group X."""
    broker = deprecated
    topic = broker.topic("dep-groups", 1)
    expected = _put(broker, topic, "g", [0], 2)
    prefix = f"dep-prefix-{uuid.uuid4().hex[:6]}"
    group = f"dep-group-{uuid.uuid4().hex[:6]}"
    variants: list[tuple[dict[str, str], Callable[[str], bool]]] = [
        ({"groupIdPrefix": prefix}, lambda g: g.startswith(prefix + "-")),
        ({"kafka.group.id": group}, lambda g: g == group),
    ]
    for i, (extra, wanted) in enumerate(variants):
        options = {"subscribe": topic, "startingOffsets": "earliest", **FAST, **extra}
        query, batches = start_collecting_query(read_stream(spark, broker, options), str(tmp_path / f"cp{i}"))

        def listed(wanted: Callable[[str], bool] = wanted) -> list[str]:
            return [g for g in _group_ids(broker) if wanted(g)]

        try:
            _wait_values(query, batches, expected)
            _wait(query, lambda: bool(listed()), f"group listed for {extra}")
            assert len(listed()) == 1
        finally:
            _stop(query)


def test_stop_leaves_group_and_restart_rejoins(spark: SparkSession, deprecated: SparkBroker, checkpoint: str) -> None:
    """Scenario 43: stopping the query makes its driver consumer leave the group (LeaveGroup: the
    group is empty at once, long before the session timeout), and a restart on the same group id
    re-joins and delivers new records without waiting for ``session.timeout.ms``."""
    broker = deprecated
    topic = broker.topic("dep-leave", 1)
    group = f"dep-leave-{uuid.uuid4().hex[:6]}"
    expected = _put(broker, topic, "first", [0], 2)
    options = {"subscribe": topic, "startingOffsets": "earliest", "kafka.group.id": group, **FAST}
    query, batches = start_collecting_query(read_stream(spark, broker, options), checkpoint)
    try:
        _wait_values(query, batches, expected)
        _wait(query, lambda: _describe(broker, group) == ("STABLE", 1), f"group {group} stable with one member")
    finally:
        _stop(query)

    stopped = time.monotonic()
    deadline = stopped + SESSION_TIMEOUT_MS / 1000 / 3
    while _describe(broker, group) != ("EMPTY", 0):
        assert time.monotonic() < deadline, f"group {group} still {_describe(broker, group)} after stop"
        time.sleep(0.1)

    restarted = time.monotonic()
    query, batches = start_collecting_query(read_stream(spark, broker, options), checkpoint)
    try:
        later = _put(broker, topic, "second", [0], 2)
        _wait_values(query, batches, later)
        assert time.monotonic() - restarted < SESSION_TIMEOUT_MS / 1000 / 2
        assert _describe(broker, group) == ("STABLE", 1)
    finally:
        _stop(query)
