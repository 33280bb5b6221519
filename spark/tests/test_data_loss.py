"""Spark's failOnDataLoss against records that vanished: retention or DeleteRecords below a
stopped query's position, a topic deleted and recreated, and a subscription to a topic that does
not exist (scenarios 30-34 and 36)."""

from __future__ import annotations

import time
import uuid
from typing import Any

from pyspark.errors import StreamingQueryException
from pyspark.sql import Row, SparkSession
from pyspark.sql.streaming import StreamingQuery

from compat.clients.base import Rec
from spark.tests.brokers import SparkBroker
from spark.tests.kafka_io import read_stream, start_collecting_query

# (topic, offset, value) of a record as a query delivered it.
Seen = tuple[str, int, str]

# Longer than a poll plus an offset lookup that both time out (QUICK), so a stalled broker shows
# as the executor's timeout error rather than as a query that is still running.
FAILURE_TIMEOUT_S = 90.0
WAIT_S = 20.0
# A stalled broker fails the task after about 30 s instead of spark.network.timeout (120 s), but
# a pause of a few seconds does not: the executor resolves the log start and end by seeking and
# calling the consumer's position(), which waits at most default.api.timeout.ms and resends a
# ListOffsets unanswered after request.timeout.ms (which also counts the wait behind the Fetch
# the consumer pipelined on the same connection). With 10 s and 5 s a loaded two-core box failed
# the DeleteRecords scenario on Kafka with "Timeout of 10000ms expired before the position for
# partition ... could be determined" (a 13 s broker pause at that call reproduces it).
QUICK = {"kafkaConsumer.pollTimeoutMs": 30000, "kafka.request.timeout.ms": 15000, "kafka.default.api.timeout.ms": 30000}
# One offset fetch attempt: the driver gives up on the first odd answer instead of retrying 3 x 1 s.
NO_RETRY = {"fetchOffset.numRetries": 1, "fetchOffset.retryIntervalMs": 10}
# Offset fetch attempts that ride out the moment a recreated topic is missing (about 4 s; the
# driver pays 3.5 s once when it sees the new topic's offsets below the old ones).
RETRY = {"fetchOffset.numRetries": 8, "fetchOffset.retryIntervalMs": 500}


def _start(
    spark: SparkSession, broker: SparkBroker, checkpoint: str, options: dict[str, Any]
) -> tuple[StreamingQuery, list[tuple[int, list[Row]]]]:
    df = read_stream(spark, broker, {"startingOffsets": "earliest", **QUICK, **options})
    return start_collecting_query(df.selectExpr("topic", "offset", "CAST(value AS STRING) AS value"), checkpoint)


def _delivered(batches: list[tuple[int, list[Row]]]) -> list[Seen]:
    """Every row every batch delivered, in delivery order (a re-delivered record appears twice)."""
    return [(r.topic, r.offset, r.value) for _, rows in batches for r in rows]


def _put(broker: SparkBroker, topic: str, values: list[str]) -> list[Seen]:
    offsets = broker.harness.put(topic, [Rec(v.encode()) for v in values])
    return [(topic, o, v) for o, v in zip(offsets, values, strict=True)]


def _run_once(spark: SparkSession, broker: SparkBroker, checkpoint: str, options: dict[str, Any]) -> list[Seen]:
    """Run a query to the end of what is there now, stop it, and return what it delivered."""
    query, batches = _start(spark, broker, checkpoint, options)
    try:
        query.processAllAvailable()
    finally:
        query.stop()
    return _delivered(batches)


def _failure(query: StreamingQuery) -> str:
    """The error the query fails with (bounded wait); an assertion error if it keeps running."""
    try:
        query.awaitTermination(FAILURE_TIMEOUT_S)
    except StreamingQueryException as exc:
        return str(exc)
    finally:
        if query.isActive:
            query.stop()
    raise AssertionError(f"query still running or stopped cleanly after {FAILURE_TIMEOUT_S} s")


def _wait_log_start(broker: SparkBroker, topic: str, expected: tuple[int, int]) -> None:
    deadline = time.monotonic() + WAIT_S
    while (got := broker.harness.offsets(topic)) != expected and time.monotonic() < deadline:
        time.sleep(0.1)
    assert got == expected


def _recreate(broker: SparkBroker, topic: str) -> None:
    harness = broker.harness
    assert harness.delete_topic(topic) is None
    assert harness.wait_topic_gone(topic)
    harness.create(topic)


def test_retention_below_stopped_query_fails_restart(spark: SparkSession, broker: SparkBroker, checkpoint: str) -> None:
    """Scenario 30 (real retention): records 5-9 arrive while the query is stopped and time-based
    retention (``retention.ms=100``, checked every 250 ms) deletes them all; the restart with
    ``failOnDataLoss=true`` fails: "Could not read records in offset [5, 10)" (the
    executor's fetch at 5 is out of range)."""
    topic = broker.topic("s30", configs={"segment.ms": "100"})
    first = _put(broker, topic, [f"v{i}" for i in range(5)])
    assert _run_once(spark, broker, checkpoint, {"subscribe": topic}) == first

    _put(broker, topic, [f"v{i}" for i in range(5, 10)])
    assert broker.harness.alter_configs(topic, [("retention.ms", "set", "100")]) is None
    _wait_log_start(broker, topic, (10, 10))

    query, batches = _start(spark, broker, checkpoint, {"subscribe": topic, "failOnDataLoss": "true"})
    message = _failure(query)
    assert f"Could not read records in offset [5, 10) for topic partition {topic}-0" in message, message
    assert "Some data may have been lost" in message, message
    assert _delivered(batches) == []


def test_deleted_records_fail_or_are_skipped(spark: SparkSession, broker: SparkBroker, checkpoint: str) -> None:
    """Scenarios 30 and 31 (DeleteRecords): records 5-9 arrive while the query is stopped and
    DeleteRecords moves the log start to 8. A restart with ``failOnDataLoss=true`` fails with
    "Could not read records in offset [5, 10)"; a restart on the same checkpoint with ``failOnDataLoss=false``
    delivers exactly 8, 9 and what is produced later, each once."""
    topic = broker.topic("s31")
    first = _put(broker, topic, [f"v{i}" for i in range(5)])
    assert _run_once(spark, broker, checkpoint, {"subscribe": topic}) == first

    second = _put(broker, topic, [f"v{i}" for i in range(5, 10)])
    assert broker.harness.delete_records(topic, 0, 8) == 8
    assert broker.harness.offsets(topic) == (8, 10)

    query, batches = _start(spark, broker, checkpoint, {"subscribe": topic, "failOnDataLoss": "true"})
    message = _failure(query)
    assert f"Could not read records in offset [5, 10) for topic partition {topic}-0" in message, message
    assert "Some data may have been lost" in message, message
    assert _delivered(batches) == []

    query, batches = _start(spark, broker, checkpoint, {"subscribe": topic, "failOnDataLoss": "false"})
    try:
        query.processAllAvailable()
        assert _delivered(batches) == second[3:]
        third = _put(broker, topic, ["v10", "v11", "v12"])
        query.processAllAvailable()
        assert _delivered(batches) == second[3:] + third
        assert query.exception() is None
    finally:
        query.stop()


def test_recreated_topic_with_fewer_records_fails_restart(
    spark: SparkSession, broker: SparkBroker, checkpoint: str
) -> None:
    """Scenario 32: the query stopped at offset 5; the topic is deleted and recreated with 2
    records. The restart with ``failOnDataLoss=true`` fails with "offset was changed from 5 to 2"."""
    topic = broker.topic("s32")
    first = _put(broker, topic, [f"v{i}" for i in range(5)])
    assert _run_once(spark, broker, checkpoint, {"subscribe": topic}) == first

    _recreate(broker, topic)
    _put(broker, topic, ["w0", "w1"])
    query, batches = _start(spark, broker, checkpoint, {"subscribe": topic, "failOnDataLoss": "true", **NO_RETRY})
    message = _failure(query)
    assert f"Partition {topic}-0 offset was changed from 5 to 2" in message, message
    assert "Some data may have been lost" in message, message
    assert _delivered(batches) == []


def test_topic_recreated_while_running(spark: SparkSession, broker: SparkBroker, checkpoint: str) -> None:
    """Scenario 33: with ``failOnDataLoss=false`` deleting and recreating the subscribed topic while
    the query runs does not fail it, and the records produced after the recreation (offsets 0-2
    again) are delivered once the query has seen the new, empty topic."""
    topic = broker.topic("s33")
    first = _put(broker, topic, [f"v{i}" for i in range(5)])
    query, batches = _start(spark, broker, checkpoint, {"subscribe": topic, "failOnDataLoss": "false", **RETRY})
    try:
        query.processAllAvailable()
        assert _delivered(batches) == first
        _recreate(broker, topic)
        query.processAllAvailable()
        assert _delivered(batches) == first
        again = _put(broker, topic, ["w0", "w1", "w2"])
        assert [o for _, o, _ in again] == [0, 1, 2]
        query.processAllAvailable()
        assert _delivered(batches) == first + again
        assert query.isActive and query.exception() is None
    finally:
        query.stop()


def test_pattern_survives_topic_swap(spark: SparkSession, broker: SparkBroker, checkpoint: str) -> None:
    """Scenario 34: a ``subscribePattern`` query with ``failOnDataLoss=false`` keeps running when
    one matching topic is deleted and another created, and delivers the new topic's records."""
    prefix = f"s34-{uuid.uuid4().hex[:8]}"
    old = broker.topic(prefix)
    first = _put(broker, old, ["a0", "a1", "a2"])
    options = {"subscribePattern": f"{prefix}-.*", "failOnDataLoss": "false"}
    query, batches = _start(spark, broker, checkpoint, options)
    try:
        query.processAllAvailable()
        assert _delivered(batches) == first
        assert broker.harness.delete_topic(old) is None
        assert broker.harness.wait_topic_gone(old)
        new = broker.topic(prefix)
        second = _put(broker, new, ["b0", "b1"])
        query.processAllAvailable()
        assert _delivered(batches) == first + second
        assert query.isActive and query.exception() is None
    finally:
        query.stop()


def test_missing_topic_fails_and_is_not_created(spark: SparkSession, broker: SparkBroker, checkpoint: str) -> None:
    """Scenario 36: subscribing to a topic that does not exist fails the query with
    UnknownTopicOrPartition (Admin offset reader), and the broker does not create the topic."""
    topic = f"s36-missing-{uuid.uuid4().hex[:8]}"
    query, batches = _start(spark, broker, checkpoint, {"subscribe": topic, **NO_RETRY})
    message = _failure(query)
    assert "UnknownTopicOrPartitionException" in message, message
    assert _delivered(batches) == []
    assert topic not in broker.harness.list_topics()
