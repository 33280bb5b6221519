"""Streaming reads with Spark's Kafka source: where a query starts, what it subscribes to, and
that it resumes from its checkpoint exactly where it stopped (scenarios 11-17, 21 and 45)."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.streaming import StreamingQuery

from compat.clients.base import Rec
from spark.tests.brokers import SparkBroker
from spark.tests.kafka_io import read_stream, start_collecting_query, start_memory_query, table_rows

# (topic, partition, offset, value) as a query's memory table holds them.
Row4 = tuple[str, int, int, str]
POLL_TIMEOUT_S = 60.0


def _columns(df: DataFrame) -> DataFrame:
    return df.selectExpr("topic", "partition", "offset", "CAST(value AS STRING) AS value")


def _rows(spark: SparkSession, table: str) -> list[Row4]:
    """The table's rows sorted, duplicates kept (a re-emitted record shows up twice)."""
    return sorted((r.topic, r.partition, r.offset, r.value) for r in table_rows(spark, table))


def _put(broker: SparkBroker, topic: str, values: Iterable[tuple[int, str]]) -> list[Row4]:
    """Produce ``(partition, value)`` pairs; return the rows they become, with their offsets."""
    values = list(values)
    offsets = broker.harness.put(topic, [Rec(v.encode(), partition=p) for p, v in values])
    return [(topic, p, o, v) for (p, v), o in zip(values, offsets, strict=True)]


def _spread(partitions: int, per_partition: int, tag: str) -> list[tuple[int, str]]:
    return [(p, f"{tag}-{p}-{i}") for p in range(partitions) for i in range(per_partition)]


def _process_until(
    query: StreamingQuery, spark: SparkSession, table: str, done: Callable[[list[Row4]], bool]
) -> list[Row4]:
    """Let the query run until its table satisfies ``done`` (bounded): for what the driver only
    notices on a later trigger (new topics, new partitions)."""
    deadline = time.monotonic() + POLL_TIMEOUT_S
    while True:
        query.processAllAvailable()
        rows = _rows(spark, table)
        if done(rows) or time.monotonic() >= deadline:
            return rows
        time.sleep(0.1)


def _stop(*queries: StreamingQuery | None) -> None:
    for query in queries:
        if query is not None and query.isActive:
            query.stop()


def test_latest_sees_only_records_after_start(spark: SparkSession, broker: SparkBroker, checkpoint: str) -> None:
    """Scenario 11: ``startingOffsets=latest`` skips the backlog and delivers only records produced
    after the query started; processAllAvailable returns them."""
    topic = broker.topic("s11", partitions=2)
    _put(broker, topic, _spread(2, 3, "old"))
    query, table = start_memory_query(
        _columns(read_stream(spark, broker, {"subscribe": topic, "startingOffsets": "latest"})), checkpoint
    )
    try:
        query.processAllAvailable()
        assert _rows(spark, table) == []
        new = _put(broker, topic, _spread(2, 2, "new"))
        query.processAllAvailable()
        assert _rows(spark, table) == sorted(new)
        assert {r[2] for r in new} == {3, 4}
    finally:
        _stop(query)


def test_restart_on_checkpoint_neither_repeats_nor_skips(
    spark: SparkSession, broker: SparkBroker, checkpoint: str
) -> None:
    """Scenarios 12 and 13: ``startingOffsets=earliest`` reads the backlog; after a stop, records
    added while stopped are delivered on restart from the same checkpoint, and nothing read
    before the stop is delivered again (each batch's rows are checked, so a replay would show)."""
    topic = broker.topic("s12", partitions=3)
    backlog = _put(broker, topic, _spread(3, 2, "backlog"))
    options = {"subscribe": topic, "startingOffsets": "earliest"}
    first: StreamingQuery | None = None
    second: StreamingQuery | None = None
    try:
        first, batches1 = start_collecting_query(_columns(read_stream(spark, broker, options)), checkpoint)
        first.processAllAvailable()
        assert _delivered(batches1) == sorted(backlog)
        live = _put(broker, topic, _spread(3, 1, "live"))
        first.processAllAvailable()
        assert _delivered(batches1) == sorted(backlog + live)
        first.stop()
        last_batch = max(b for b, _ in batches1)

        while_stopped = _put(broker, topic, _spread(3, 2, "stopped"))
        # startingOffsets only applies to a fresh checkpoint: "earliest" must not re-read.
        second, batches2 = start_collecting_query(_columns(read_stream(spark, broker, options)), checkpoint)
        second.processAllAvailable()
        assert _delivered(batches2) == sorted(while_stopped)
        assert sorted(r[2] for r in while_stopped) == [3, 3, 3, 4, 4, 4]
        assert min(b for b, _ in batches2) > last_batch
        after = _put(broker, topic, _spread(3, 1, "after"))
        second.processAllAvailable()
        assert _delivered(batches2) == sorted(while_stopped + after)
    finally:
        _stop(first, second)


def _delivered(batches: list[tuple[int, list[Any]]]) -> list[Row4]:
    """Every row of every batch a foreachBatch query delivered, sorted, duplicates kept."""
    return sorted((r.topic, r.partition, r.offset, r.value) for _, rows in list(batches) for r in rows)


def test_json_starting_offsets_per_partition(spark: SparkSession, broker: SparkBroker, checkpoint: str) -> None:
    """Scenario 14: ``startingOffsets`` as JSON starts each partition at exactly its offset."""
    topic = broker.topic("s14", partitions=3)
    backlog = _put(broker, topic, _spread(3, 5, "b"))
    starts = {0: 2, 1: 0, 2: 4}
    options = {"subscribe": topic, "startingOffsets": json.dumps({topic: {str(p): o for p, o in starts.items()}})}
    query, table = start_memory_query(_columns(read_stream(spark, broker, options)), checkpoint)
    try:
        query.processAllAvailable()
        expected = sorted(r for r in backlog if r[2] >= starts[r[1]])
        assert _rows(spark, table) == expected
        assert [(r[1], r[2]) for r in expected] == [(0, o) for o in (2, 3, 4)] + [(1, o) for o in range(5)] + [(2, 4)]
        more = _put(broker, topic, _spread(3, 1, "m"))
        query.processAllAvailable()
        assert _rows(spark, table) == sorted(expected + more)
    finally:
        _stop(query)


def test_assign_subscribe_and_pattern(spark: SparkSession, broker: SparkBroker, tmp_path: Path) -> None:
    """Scenario 15: ``assign`` reads only the listed partitions; ``subscribe`` (a list) and
    ``subscribePattern`` read every partition of every matching topic and nothing else."""
    prefix = f"s15-{time.monotonic_ns() % 10**9}"
    first = broker.topic(f"{prefix}-a", partitions=3)
    second = broker.topic(f"{prefix}-b", partitions=2)
    other = broker.topic("s15other", partitions=1)
    rows_first = _put(broker, first, _spread(3, 2, "a"))
    rows_second = _put(broker, second, _spread(2, 2, "b"))
    _put(broker, other, _spread(1, 2, "o"))
    readers: dict[str, dict[str, Any]] = {
        "assign": {"assign": json.dumps({first: [0, 2], second: [1]})},
        "subscribe": {"subscribe": f"{first},{second}"},
        "pattern": {"subscribePattern": re.escape(prefix) + "-.*"},
    }
    expected = {
        "assign": sorted(r for r in rows_first + rows_second if (r[0], r[1]) in {(first, 0), (first, 2), (second, 1)}),
        "subscribe": sorted(rows_first + rows_second),
        "pattern": sorted(rows_first + rows_second),
    }
    queries: dict[str, tuple[StreamingQuery, str]] = {}
    try:
        for name, options in readers.items():
            df = _columns(read_stream(spark, broker, {**options, "startingOffsets": "earliest"}))
            queries[name] = start_memory_query(df, str(tmp_path / name))
        for name, (query, table) in queries.items():
            query.processAllAvailable()
            assert _rows(spark, table) == expected[name], name
        assert len(expected["assign"]) == 6
    finally:
        _stop(*(q for q, _ in queries.values()))


def test_pattern_picks_up_new_topic_from_offset_zero(spark: SparkSession, broker: SparkBroker, checkpoint: str) -> None:
    """Scenario 16: ``subscribePattern`` delivers a matching topic created after the query started
    from its offset 0 (even though the query started at latest), without failing."""
    prefix = f"s16-{time.monotonic_ns() % 10**9}"
    existing = broker.topic(prefix, partitions=1)
    _put(broker, existing, [(0, "before-start")])
    options = {
        "subscribePattern": re.escape(prefix) + "-.*",
        "startingOffsets": "latest",
        "kafka.metadata.max.age.ms": "500",
    }
    query, table = start_memory_query(_columns(read_stream(spark, broker, options)), checkpoint)
    try:
        query.processAllAvailable()
        assert _rows(spark, table) == []
        live = _put(broker, existing, [(0, "live")])
        created = broker.topic(prefix, partitions=2)
        new_rows = _put(broker, created, _spread(2, 2, "new"))
        rows = _process_until(query, spark, table, lambda got: len(got) >= len(live) + len(new_rows))
        assert rows == sorted(live + new_rows)
        assert sorted((r[1], r[2]) for r in new_rows) == [(0, 0), (0, 1), (1, 0), (1, 1)]
        assert query.isActive and query.exception() is None
    finally:
        _stop(query)


def test_added_partitions_are_read_from_offset_zero(spark: SparkSession, broker: SparkBroker, checkpoint: str) -> None:
    """Scenario 17: growing a subscribed topic from 5 to 10 partitions while the query runs
    delivers the records of the new partitions from offset 0, with no data-loss error (the
    default failOnDataLoss=true)."""
    topic = broker.topic("s17", partitions=5)
    options = {"subscribe": topic, "startingOffsets": "earliest", "kafka.metadata.max.age.ms": "500"}
    before = _put(broker, topic, _spread(5, 1, "before"))
    query, table = start_memory_query(_columns(read_stream(spark, broker, options)), checkpoint)
    try:
        query.processAllAvailable()
        assert _rows(spark, table) == sorted(before)
        assert broker.harness.create_partitions(topic, 10) is None
        broker.harness.wait_topic(topic, 10)
        after = _put(broker, topic, _spread(10, 2, "after"))
        rows = _process_until(query, spark, table, lambda got: len(got) >= len(before) + len(after))
        assert rows == sorted(before + after)
        assert sorted((r[1], r[2]) for r in after if r[1] >= 5) == [(p, o) for p in range(5, 10) for o in (0, 1)]
        assert query.isActive and query.exception() is None
    finally:
        _stop(query)


def test_two_sources_in_one_query(spark: SparkSession, broker: SparkBroker, checkpoint: str) -> None:
    """Scenario 21: a union of two Kafka sources progresses on both, and each batch's
    ``numInputRows`` is the sum of its two sources' counts."""
    left = broker.topic("s21l", partitions=2)
    right = broker.topic("s21r", partitions=1)
    left_rows = _put(broker, left, _spread(2, 2, "l"))
    right_rows = _put(broker, right, _spread(1, 3, "r"))
    df = _columns(read_stream(spark, broker, {"subscribe": left, "startingOffsets": "earliest"})).unionByName(
        _columns(read_stream(spark, broker, {"subscribe": right, "startingOffsets": "earliest"}))
    )
    query, table = start_memory_query(df, checkpoint)
    try:
        query.processAllAvailable()
        assert _rows(spark, table) == sorted(left_rows + right_rows)
        more = _put(broker, left, _spread(2, 1, "l2")) + _put(broker, right, [(0, "r2")])
        query.processAllAvailable()
        assert _rows(spark, table) == sorted(left_rows + right_rows + more)

        progress = [p for p in query.recentProgress if p["numInputRows"] > 0]
        per_batch = {p["batchId"]: p for p in progress}
        assert len(per_batch) == len(progress)
        for p in progress:
            counts = {_source_topic(s["description"]): s["numInputRows"] for s in p["sources"]}
            assert set(counts) == {left, right}
            assert p["numInputRows"] == sum(counts.values())
        first = per_batch[min(per_batch)]
        assert {_source_topic(s["description"]): s["numInputRows"] for s in first["sources"]} == {left: 4, right: 3}
        assert sum(p["numInputRows"] for p in progress) == 10
    finally:
        _stop(query)


def _source_topic(description: str) -> str:
    """The topic in a Kafka source's progress description, e.g. ``KafkaV2[Subscribe[t]]``."""
    match = re.search(r"Subscribe\[([^\]]+)\]", description)
    assert match, description
    return match.group(1)


def test_two_queries_each_get_every_record(spark: SparkSession, broker: SparkBroker, tmp_path: Path) -> None:
    """Scenario 45: two concurrent queries on one topic with different checkpoints each receive
    every record, the backlog and what arrives while both run."""
    topic = broker.topic("s45", partitions=3)
    backlog = _put(broker, topic, _spread(3, 2, "b"))
    queries: list[tuple[StreamingQuery, str]] = []
    try:
        for name in ("one", "two"):
            df = _columns(read_stream(spark, broker, {"subscribe": topic, "startingOffsets": "earliest"}))
            queries.append(start_memory_query(df, str(tmp_path / name)))
        live = _put(broker, topic, _spread(3, 2, "live"))
        for query, table in queries:
            query.processAllAvailable()
            assert _rows(spark, table) == sorted(backlog + live)
    finally:
        _stop(*(q for q, _ in queries))
