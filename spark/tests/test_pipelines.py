"""The three pipelines of kbroker.spark end to end, on Kafka and on kbroker: the generator's
events through the streaming ETL (in-process, and as a driver process killed mid-run and
restarted from its checkpoint), and the batch replay by offset and by time range."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from kbroker.spark import batch_replay, generator, streaming_etl
from pyspark.sql import SparkSession

from spark.tests.brokers import SparkBroker
from spark.tests.kafka_io import read_batch

WINDOW_S, WATERMARK_S = 60, 30
# Recent event times: the records' timestamps are their event times, and the brokers check
# retention (7 days by default) every 250 ms, so old event times would be deleted at once.
START_MS = (int(time.time()) // 60 - 15) * 60_000


def produce_events(broker: SparkBroker, topic: str, count: int, interval_ms: int) -> list[generator.Event]:
    events = list(generator.generate(count, seed=7, start_ms=START_MS, interval_ms=interval_ms))
    acked = generator.produce(broker.bootstrap, topic, iter(events), count, progress=False)
    assert acked == count
    return events


def expected_windows(events: list[generator.Event]) -> dict[tuple[datetime, str], tuple[int, float]]:
    """What append mode must emit: windows whose end is at or below the final watermark
    (the latest event time minus the delay), with their event count and amount."""
    watermark_ms = max(e.event_time_ms for e in events) - WATERMARK_S * 1000
    totals: dict[tuple[datetime, str], list[float]] = {}
    for e in events:
        start_ms = e.event_time_ms - e.event_time_ms % (WINDOW_S * 1000)
        if start_ms + WINDOW_S * 1000 <= watermark_ms:
            key = (datetime.fromtimestamp(start_ms / 1000, UTC).replace(tzinfo=None), e.kind)
            total = totals.setdefault(key, [0, 0.0])
            total[0] += 1
            total[1] += e.amount
    return {k: (int(n), amount) for k, (n, amount) in totals.items()}


def as_windows(rows: list) -> dict[tuple[datetime, str], tuple[int, float]]:
    keys = [(r["window_start"], r["kind"]) for r in rows]
    assert len(keys) == len(set(keys)), f"duplicate windows: {[k for k, n in Counter(keys).items() if n > 1]}"
    return {(r["window_start"], r["kind"]): (r["events"], r["amount"]) for r in rows}


def assert_same_windows(got: dict, expected: dict) -> None:
    assert sorted(got) == sorted(expected)
    for key, (count, amount) in expected.items():
        assert got[key][0] == count, key
        assert got[key][1] == pytest.approx(amount, abs=0.011), key


def kafka_windows(spark: SparkSession, broker: SparkBroker, topic: str) -> list[dict]:
    rows = read_batch(spark, broker, {"subscribe": topic}).collect()
    out = []
    for r in rows:
        value = json.loads(r.value)
        value["window_start"] = datetime.fromisoformat(value["window_start"].replace("Z", "")).replace(tzinfo=None)
        out.append(value)
    return out


def test_streaming_etl_writes_every_finished_window_to_kafka_and_parquet(spark, broker, tmp_path):
    """Pipeline 1 with availableNow: the Parquet sink and the Kafka sink both hold exactly the
    windows the watermark closed, with the right counts and amounts."""
    source, sink = broker.topic("events", 3), broker.topic("event-windows", 1)
    events = produce_events(broker, source, 3000, interval_ms=100)  # 5 minutes of event time
    queries = streaming_etl.start(
        spark, broker.bootstrap, source, sink, str(tmp_path / "parquet"), str(tmp_path / "checkpoint"),
        window=f"{WINDOW_S} seconds", watermark=f"{WATERMARK_S} seconds", available_now=True,
    )  # fmt: skip
    for query in queries:
        assert query.awaitTermination(240), "availableNow did not finish"
        assert query.exception() is None
    expected = expected_windows(events)
    assert len(expected) >= 16  # at least four finished minutes x four kinds
    assert_same_windows(as_windows(spark.read.parquet(str(tmp_path / "parquet")).collect()), expected)
    assert_same_windows(as_windows(kafka_windows(spark, broker, sink)), expected)


def run_etl_driver(broker: SparkBroker, source: str, sink: str, tmp_path: Path, *extra: str) -> subprocess.Popen:
    """The pipeline as its own driver process (its own process group, so a kill takes the JVM too)."""
    args = [sys.executable, "-m", "kbroker.spark.streaming_etl", "--bootstrap", broker.bootstrap, "--input", source,
            "--output", sink, "--parquet", str(tmp_path / "parquet"), "--checkpoint", str(tmp_path / "checkpoint"),
            "--window", f"{WINDOW_S} seconds", "--watermark", f"{WATERMARK_S} seconds", *extra]  # fmt: skip
    log = open(tmp_path / "driver.log", "ab")
    try:
        return subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    finally:
        log.close()


def test_streaming_etl_restarted_after_driver_kill_is_exactly_once_in_parquet(spark, broker, tmp_path):
    """The driver is killed (SIGKILL, whole process group) after its first Parquet batch; the
    restart on the same checkpoint leaves Parquet with no duplicate and no missing window. The
    Kafka sink is at-least-once: every window is there, duplicates only from the replayed batch."""
    source, sink = broker.topic("events", 3), broker.topic("event-windows", 1)
    events = produce_events(broker, source, 6000, interval_ms=50)
    driver = run_etl_driver(broker, source, sink, tmp_path, "--max-offsets-per-trigger", "600")
    first_commit = tmp_path / "checkpoint" / "parquet" / "commits" / "1"
    deadline = time.monotonic() + 120
    while not first_commit.exists() and driver.poll() is None and time.monotonic() < deadline:
        time.sleep(0.1)
    os.killpg(driver.pid, signal.SIGKILL)
    driver.wait()
    assert first_commit.exists(), (tmp_path / "driver.log").read_text()[-3000:]
    batches_before_kill = len(list((tmp_path / "checkpoint" / "parquet" / "commits").glob("[0-9]*")))
    assert batches_before_kill < 10, "the first run finished before the kill; nothing was tested"

    restarted = run_etl_driver(broker, source, sink, tmp_path, "--available-now")
    assert restarted.wait(180) == 0, (tmp_path / "driver.log").read_text()[-3000:]

    expected = expected_windows(events)
    assert_same_windows(as_windows(spark.read.parquet(str(tmp_path / "parquet")).collect()), expected)
    kafka_rows = kafka_windows(spark, broker, sink)
    seen = Counter((r["window_start"], r["kind"]) for r in kafka_rows)
    assert set(seen) == set(expected)
    duplicates = sum(n - 1 for n in seen.values())
    print(f"{broker.name}: Kafka sink after driver kill: {len(kafka_rows)} rows, {duplicates} duplicates")


def test_batch_replay_by_offsets_and_by_time(spark, broker, tmp_path):
    """Pipeline 2: an offset range returns exactly the records in [start, end) per partition;
    a time range starts each partition at its first record with timestamp >= from and ends
    before its first record with timestamp >= to."""
    topic = broker.topic("events", 3)
    events = produce_events(broker, topic, 900, interval_ms=100)
    everything = batch_replay.read_range(spark, broker.bootstrap, topic).collect()
    assert sorted(r.event_id for r in everything) == sorted(e.event_id for e in events)
    by_partition: dict[int, list] = {}
    for r in sorted(everything, key=lambda r: (r.partition, r.offset)):
        by_partition.setdefault(r.partition, []).append(r)

    start = {p: 3 * p + 1 for p in by_partition}
    end = {p: len(rows) - 2 * p - 1 for p, rows in by_partition.items()}
    offsets_out = str(tmp_path / "by-offsets")
    ranged = batch_replay.read_range(
        spark, broker.bootstrap, topic,
        starting_offsets=json.dumps({topic: {str(p): o for p, o in start.items()}}),
        ending_offsets=json.dumps({topic: {str(p): o for p, o in end.items()}}),
    )  # fmt: skip
    written = batch_replay.replay(spark, offsets_out, ranged)
    expected = {(p, r.offset) for p, rows in by_partition.items() for r in rows if start[p] <= r.offset < end[p]}
    assert written == len(expected)
    assert {(r.partition, r.offset) for r in spark.read.parquet(offsets_out).collect()} == expected

    from_ms, to_ms = START_MS + 20_000, START_MS + 50_000
    time_out = str(tmp_path / "by-time")
    timed = batch_replay.read_range(spark, broker.bootstrap, topic, from_ms=from_ms, to_ms=to_ms,
                                    partitions=sorted(by_partition))  # fmt: skip
    batch_replay.replay(spark, time_out, timed)

    def first_at(rows: list, ms: int) -> int:
        return next((r.offset for r in rows if r.kafka_timestamp >= to_datetime(ms)), rows[-1].offset + 1)

    expected = {
        (p, r.offset) for p, rows in by_partition.items() for r in rows
        if first_at(rows, from_ms) <= r.offset < first_at(rows, to_ms)
    }  # fmt: skip
    assert {(r.partition, r.offset) for r in spark.read.parquet(time_out).collect()} == expected
    assert 250 < len(expected) < 350  # ~30 s of events at 10/s


def to_datetime(epoch_ms: int) -> datetime:
    return datetime(1970, 1, 1) + timedelta(milliseconds=epoch_ms)


def test_generator_command_creates_the_topic_and_reports_acknowledged_events(broker):
    """Pipeline 3 as its one command: creates the topic with the requested partitions and
    every event is acknowledged."""
    topic = f"generated-{os.getpid()}-{broker.name}"
    result = subprocess.run(
        [sys.executable, "-m", "kbroker.spark.generator", "--bootstrap", broker.bootstrap, "--topic", topic,
         "--events", "500", "--partitions", "2"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert f"created topic {topic} with 2 partitions" in result.stdout
    assert f"500 events acknowledged on {topic}" in result.stdout
    assert "500/500" in result.stderr  # the progress bar reached the end
    broker.harness.wait_topic(topic, 2)
    assert sum(broker.harness.offsets(topic, p)[1] for p in (0, 1)) == 500

