"""How much each micro-batch of Spark's Kafka source reads, and when it runs: rate limits
(maxOffsetsPerTrigger, minOffsetsPerTrigger with maxTriggerDelay), availableNow, real-time mode,
the source's lag metrics, a record bigger than the fetch size, idle pooled connections and a
query running under constant produce.

Batch sizes and offsets come from ``query.recentProgress`` (each batch's source ``endOffset``),
which needs no extra Spark job; the rows themselves from the memory sink.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from datetime import datetime
from typing import Any

from pyspark.sql import SparkSession
from pyspark.sql.streaming import StreamingQuery

from compat.clients.base import Rec
from compat.harness import wait_until
from spark.tests.brokers import SparkBroker
from spark.tests.kafka_io import read_stream, start_memory_query

WAIT_S = 60.0  # upper bound for anything a scenario waits for; a healthy run needs a fraction


def data_batches(query: StreamingQuery) -> list[dict[str, Any]]:
    """Progress of the batches that read records, oldest first (one entry per batch id)."""
    by_id = {p["batchId"]: p for p in query.recentProgress if p["numInputRows"] > 0}
    return [by_id[k] for k in sorted(by_id)]


def wait_rows_read(query: StreamingQuery, total: int, timeout_s: float = WAIT_S) -> list[dict[str, Any]]:
    """Wait until the query's batches have read ``total`` records; return their progress."""

    def probe() -> list[dict[str, Any]]:
        if not query.isActive:
            raise AssertionError(f"query stopped: {query.exception()}")
        return data_batches(query)

    ok, batches = wait_until(probe, lambda got: sum(p["numInputRows"] for p in got) >= total, timeout_s)
    assert ok, f"read {sum(p['numInputRows'] for p in batches)} of {total} records"
    return batches


def splits(batches: list[dict[str, Any]], topic: str, partitions: int) -> list[tuple[int, ...]]:
    """Records each batch read per partition, from successive end offsets (the topic starts at 0)."""
    previous = [0] * partitions
    out = []
    for p in batches:
        end = end_offsets(p)[topic]
        current = [int(end[str(i)]) for i in range(partitions)]
        out.append(tuple(c - b for c, b in zip(current, previous, strict=True)))
        previous = current
    return out


def end_offsets(progress: dict[str, Any]) -> dict[str, dict[str, int]]:
    """The batch's end offsets {topic: {partition: offset}} (progress carries them as JSON text)."""
    end = progress["sources"][0]["endOffset"]
    return json.loads(end) if isinstance(end, str) else end


def last_end(query: StreamingQuery, topic: str, partitions: int) -> list[int] | None:
    """The end offsets of the query's latest batch, per partition (None before the first)."""
    last = query.lastProgress
    end = end_offsets(last).get(topic) if last and last["sources"][0]["endOffset"] else None
    return None if end is None else [int(end[str(i)]) for i in range(partitions)]


def epoch_ms(progress: dict[str, Any]) -> int:
    """A progress entry's trigger start as epoch milliseconds."""
    return int(datetime.fromisoformat(progress["timestamp"].replace("Z", "+00:00")).timestamp() * 1000)


def values(spark: SparkSession, table: str) -> list[tuple[int, int, str]]:
    rows = spark.sql(f"SELECT partition, offset, CAST(value AS STRING) AS v FROM {table}").collect()
    return sorted((r.partition, r.offset, r.v) for r in rows)


def test_max_offsets_per_trigger_splits_in_proportion(
    spark: SparkSession, broker: SparkBroker, checkpoint: str
) -> None:
    """Scenario 18: maxOffsetsPerTrigger=10 over partitions holding 101, 11 and 1 records gives
    batches of at most 10, each split in proportion to the partitions' remaining backlog (a share
    below 1 is rounded up so small partitions are not starved, larger shares rounded down)."""
    topic = broker.topic("rate", partitions=3)
    for partition, count in ((0, 101), (1, 11), (2, 1)):
        broker.harness.put(topic, [Rec(f"{partition}-{i}".encode(), partition=partition) for i in range(count)])
    df = read_stream(spark, broker, {"subscribe": topic, "startingOffsets": "earliest", "maxOffsetsPerTrigger": 10})
    query, table = start_memory_query(df, checkpoint)
    try:
        batches = wait_rows_read(query, 113)
        assert splits(batches, topic, 3) == [(8, 1, 1)] + [(9, 1, 0)] * 10 + [(3, 0, 0)]
        assert [p["numInputRows"] for p in batches] == [10] * 11 + [3]
        expected = [(p, i, f"{p}-{i}") for p, count in ((0, 101), (1, 11), (2, 1)) for i in range(count)]
        assert values(spark, table) == expected
    finally:
        query.stop()


def test_min_offsets_per_trigger_released_by_max_trigger_delay(
    spark: SparkSession, broker: SparkBroker, checkpoint: str
) -> None:
    """Scenario 19: with minOffsetsPerTrigger=5 and maxTriggerDelay=2s, two records (fewer than
    5) are held back and delivered by one batch once 2 s have passed since the previous batch."""
    topic = broker.topic("delay")
    broker.harness.put(topic, [Rec(b"first")])
    options = {"subscribe": topic, "startingOffsets": "earliest", "minOffsetsPerTrigger": 5, "maxTriggerDelay": "2s"}
    query, table = start_memory_query(read_stream(spark, broker, options), checkpoint)
    try:
        # The first trigger has no previous batch to measure the delay from: it runs at once.
        first = wait_rows_read(query, 1)
        broker.harness.put(topic, [Rec(b"a"), Rec(b"b")])
        batches = wait_rows_read(query, 3)
        assert splits(batches, topic, 1) == [(1,), (2,)]
        # The source restarts its delay clock when it plans a batch (in latestOffset, after the
        # trigger's start timestamp), and plans the held batch only once 2 s have passed since.
        planned = epoch_ms(batches[1]) + batches[1]["durationMs"]["latestOffset"]
        assert planned - epoch_ms(first[0]) >= 1990, [(p["timestamp"], p["durationMs"]) for p in batches]
        assert values(spark, table) == [(0, 0, "first"), (0, 1, "a"), (0, 2, "b")]
    finally:
        query.stop()


def test_min_offsets_per_trigger_waits_for_enough_records(
    spark: SparkSession, broker: SparkBroker, checkpoint: str
) -> None:
    """Scenario 19: with minOffsetsPerTrigger=5 and a delay far longer than the test
    (maxTriggerDelay=10m), 3 new records are held back (triggers run and find nothing to do) and
    the batch runs as soon as 5 have arrived, reading all 5 at once."""
    topic = broker.topic("min")
    broker.harness.put(topic, [Rec(b"first")])
    options = {"subscribe": topic, "startingOffsets": "earliest", "minOffsetsPerTrigger": 5, "maxTriggerDelay": "10m"}
    query, table = start_memory_query(read_stream(spark, broker, options), checkpoint)
    try:
        wait_rows_read(query, 1)
        broker.harness.put(topic, [Rec(f"r{i}".encode()) for i in range(3)])
        # processAllAvailable returns once a trigger found nothing to run; the second call's
        # trigger started after the first returned, so after the 3 records were written.
        query.processAllAvailable()
        query.processAllAvailable()
        assert splits(data_batches(query), topic, 1) == [(1,)]
        broker.harness.put(topic, [Rec(f"r{i}".encode()) for i in range(3, 5)])
        batches = wait_rows_read(query, 6)
        assert splits(batches, topic, 1) == [(1,), (5,)]
        assert values(spark, table) == [(0, 0, "first")] + [(0, i + 1, f"r{i}") for i in range(5)]
    finally:
        query.stop()


def test_available_now_with_rate_limit_runs_three_batches(
    spark: SparkSession, broker: SparkBroker, checkpoint: str
) -> None:
    """Scenario 20: trigger(availableNow=True) with maxOffsetsPerTrigger=5 on 15 records runs
    exactly 3 batches of 5 and then terminates by itself."""
    topic = broker.topic("now")
    broker.harness.put(topic, [Rec(f"v{i}".encode()) for i in range(15)])
    df = read_stream(spark, broker, {"subscribe": topic, "startingOffsets": "earliest", "maxOffsetsPerTrigger": 5})
    query, table = start_memory_query(df, checkpoint, {"availableNow": True})
    try:
        assert query.awaitTermination(WAIT_S) is True
        assert query.exception() is None
        progress = query.recentProgress
        assert [p["batchId"] for p in progress] == [0, 1, 2]
        assert splits(progress, topic, 1) == [(5,), (5,), (5,)]
        assert values(spark, table) == [(0, i, f"v{i}") for i in range(15)]
    finally:
        query.stop()


def test_offsets_behind_latest_metrics(spark: SparkSession, broker: SparkBroker, tmp_path: Any) -> None:
    """Scenario 22: the source metrics in recentProgress report how far each batch ended behind
    the latest offset: 20, 10, 0 for 30 records read 10 at a time, and 0 without a rate limit."""
    topic = broker.topic("lag")
    broker.harness.put(topic, [Rec(f"v{i}".encode()) for i in range(30)])

    def metrics(options: dict[str, Any], checkpoint: str) -> list[dict[str, str]]:
        df = read_stream(spark, broker, {"subscribe": topic, "startingOffsets": "earliest", **options})
        query, _ = start_memory_query(df, checkpoint)
        try:
            return [p["sources"][0]["metrics"] for p in wait_rows_read(query, 30)]
        finally:
            query.stop()

    def lag(behind: int) -> dict[str, str]:
        return {
            "avgOffsetsBehindLatest": f"{behind}.0",
            "maxOffsetsBehindLatest": str(behind),
            "minOffsetsBehindLatest": str(behind),
        }

    assert metrics({"maxOffsetsPerTrigger": 10}, str(tmp_path / "limited")) == [lag(20), lag(10), lag(0)]
    assert metrics({}, str(tmp_path / "unlimited")) == [lag(0)]


def test_record_bigger_than_fetch_size(spark: SparkSession, broker: SparkBroker, checkpoint: str) -> None:
    """Scenario 23: a 10 MiB record, far bigger than kafka.max.partition.fetch.bytes (64 KiB), is
    still delivered intact between two small ones (KIP-74: a fetch returns at least one batch)."""
    big = bytes(range(256)) * (10 * 1024 * 1024 // 256)
    limit = str(12 * 1024 * 1024)
    topic = broker.topic("big", configs={"max.message.bytes": limit})
    broker.harness.put(topic, [Rec(b"before"), Rec(big), Rec(b"after")], extra={"message.max.bytes": limit})
    options = {"subscribe": topic, "startingOffsets": "earliest", "kafka.max.partition.fetch.bytes": 65536}
    query, table = start_memory_query(read_stream(spark, broker, options), checkpoint)
    try:
        wait_rows_read(query, 3)
        rows = spark.sql(f"SELECT offset, length(value) AS n, sha2(value, 256) AS h FROM {table}").collect()
        got = sorted((r.offset, r.n, r.h) for r in rows)
        assert got == [
            (0, 6, hashlib.sha256(b"before").hexdigest()),
            (1, len(big), hashlib.sha256(big).hexdigest()),
            (2, 5, hashlib.sha256(b"after").hexdigest()),
        ]
    finally:
        query.stop()


def test_idle_longer_than_connections_max_idle(spark: SparkSession, broker: SparkBroker, checkpoint: str) -> None:
    """Scenario 24: the query stays idle for twice kafka.connections.max.idle.ms (1.5 s), so the
    clients close their idle connections; it keeps running without errors, and records written
    afterwards are delivered over new connections."""
    topic = broker.topic("idle")
    broker.harness.put(topic, [Rec(b"a"), Rec(b"b")])
    options = {"subscribe": topic, "startingOffsets": "earliest", "kafka.connections.max.idle.ms": 1500}
    query, table = start_memory_query(read_stream(spark, broker, options), checkpoint)
    try:
        wait_rows_read(query, 2)
        time.sleep(3.0)  # elapsed idle time is what this scenario is about
        assert query.isActive and query.exception() is None
        broker.harness.put(topic, [Rec(b"c"), Rec(b"d")])
        batches = wait_rows_read(query, 4)
        assert query.exception() is None
        assert sum(p["numInputRows"] for p in batches) == 4
        assert values(spark, table) == [(0, 0, "a"), (0, 1, "b"), (0, 2, "c"), (0, 3, "d")]
    finally:
        query.stop()


def test_constant_produce_never_moves_latest_back(spark: SparkSession, broker: SparkBroker, checkpoint: str) -> None:
    """Scenario 35: records are produced without pause to 3 partitions while the query runs
    several batches. ListOffsets LATEST never decreases between polls, the query never fails
    ("offset was changed"), and every record is delivered exactly once."""
    topic = broker.topic("steady", partitions=3)
    df = read_stream(spark, broker, {"subscribe": topic, "startingOffsets": "earliest"})
    query, table = start_memory_query(df, checkpoint)
    produced: list[tuple[int, int, str]] = []
    failure: list[BaseException] = []
    stop = threading.Event()

    def produce() -> None:
        try:
            n = 0
            while not stop.is_set():
                records = [Rec(f"v{n + i}".encode(), partition=(n + i) % 3) for i in range(6)]
                offsets = broker.harness.put(topic, records)
                produced.extend(
                    (r.partition or 0, o, str(r.value, "utf-8")) for r, o in zip(records, offsets, strict=True)
                )
                n += len(records)
        except BaseException as exc:  # reported by the test thread
            failure.append(exc)

    producer = threading.Thread(target=produce, daemon=True)
    try:
        producer.start()
        latest = [0, 0, 0]
        deadline = time.monotonic() + 3.0
        while time.monotonic() < deadline or len(data_batches(query)) < 3:
            assert time.monotonic() < deadline + WAIT_S, "fewer than 3 batches under constant produce"
            for p in range(3):
                now = broker.harness.offsets(topic, p)[1]
                assert now >= latest[p], f"partition {p}: latest went from {latest[p]} to {now}"
                latest[p] = now
            assert query.exception() is None
            time.sleep(0.1)
        stop.set()
        producer.join(WAIT_S)
        assert not failure, failure
        # Wait on end offsets: under constant produce there can be more batches than
        # recentProgress keeps, so summing their numInputRows could fall short.
        ends = [sum(1 for record in produced if record[0] == p) for p in range(3)]
        ok, got = wait_until(lambda: last_end(query, topic, 3), lambda end: end == ends, WAIT_S)
        assert ok, (got, ends)
        assert query.exception() is None
        assert len(data_batches(query)) >= 3
        assert values(spark, table) == sorted(produced)
    finally:
        stop.set()
        query.stop()


def test_real_time_mode_delivers_within_the_batch(spark: SparkSession, broker: SparkBroker, tmp_path: Any) -> None:
    """Scenario 46: trigger(realTime="5 seconds") with kafka.fetch.max.wait.ms=20000 delivers a
    record produced mid-batch within that same batch, and each batch still ends on time: the
    broker answers the waiting Fetch as soon as the record arrives instead of holding it 20 s.

    The memory sink cannot be used: Spark 4.2 refuses it in real-time mode
    (STREAMING_REAL_TIME_MODE.OPERATOR_OR_SINK_NOT_IN_ALLOWLIST, bypassed only by turning the
    allowlist check off "at your own risk"), and 5 s is the smallest batch duration
    (spark.sql.streaming.realTimeMode.minBatchDuration). The query writes to a second topic with
    the Kafka sink, which real-time mode supports; each output record's CreateTime is stamped by
    Spark's producer when the record is written, so it shows when the record was delivered."""
    source = broker.topic("rt-in")
    sink = broker.topic("rt-out")
    broker.harness.put(source, [Rec(b"backlog")])
    options = {"subscribe": source, "startingOffsets": "earliest", "kafka.fetch.max.wait.ms": 20000}
    query = (
        read_stream(spark, broker, options)
        .select("value")
        .writeStream.format("kafka")
        .option("kafka.bootstrap.servers", broker.bootstrap)
        .option("topic", sink)
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .outputMode("update")
        .trigger(realTime="5 seconds")
        .start()
    )
    try:
        ok, _ = wait_until(lambda: len(query.recentProgress), lambda n: n >= 1, WAIT_S)
        assert ok and query.exception() is None, query.exception()
        time.sleep(1.5)  # into the second batch, past its readers' start-up: the record arrives mid-batch
        broker.harness.put(source, [Rec(b"live")])
        ok, _ = wait_until(lambda: len(query.recentProgress), lambda n: n >= 2, WAIT_S)
        assert ok and query.exception() is None, query.exception()
        first, second = query.recentProgress[:2]
        assert (first["batchId"], first["numInputRows"]) == (0, 1)
        assert (second["batchId"], second["numInputRows"]) == (1, 1)
        assert end_offsets(second) == {source: {"0": 2}}
        # A real-time batch runs for its 5 s (plus planning and commit); a Fetch held for
        # fetch.max.wait.ms would show as a 20 s batch or as the record landing in a later one.
        assert 5000 <= second["batchDuration"] < 10000, second["durationMs"]
        sent = broker.harness.consume(source, [0], "earliest", until={0: 2})["records"]
        out = broker.harness.consume(sink, [0], "earliest", until={0: 2})["records"]
        assert [r["value"] for r in out] == ["backlog", "live"]
        delivered_ms = out[1]["timestamp"]
        assert epoch_ms(second) <= sent[1]["timestamp"] <= delivered_ms
        assert delivered_ms - sent[1]["timestamp"] < 2500, (sent[1], out[1])
        assert delivered_ms < epoch_ms(second) + second["batchDuration"]
    finally:
        query.stop()
