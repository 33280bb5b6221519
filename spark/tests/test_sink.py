"""The Kafka sink (``df.write`` / ``df.writeStream`` with ``format("kafka")``): scenarios 37-40.

Each test writes with Spark's stock producer (idempotence on by default: InitProducerId, acks=all,
sequence numbers) and reads the target topic back, asserting exactly which records landed where.
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import ArrayType, BinaryType, IntegerType, StringType, StructField, StructType

from compat.partitioner import murmur2_partition
from spark.tests.brokers import SparkBroker, start_target
from spark.tests.kafka_io import read_batch

HEADER = StructType([StructField("key", StringType()), StructField("value", BinaryType())])
SINK_SCHEMA = StructType([
    StructField("key", StringType()),
    StructField("value", StringType()),
    StructField("headers", ArrayType(HEADER)),
])  # fmt: skip
PARTITIONED_SCHEMA = StructType([
    StructField("key", StringType()),
    StructField("value", StringType()),
    StructField("partition", IntegerType()),
])  # fmt: skip


def write_batch(df: DataFrame, broker: SparkBroker, options: dict[str, str]) -> None:
    writer = df.write.format("kafka").option("kafka.bootstrap.servers", broker.bootstrap)
    for key, value in options.items():
        writer = writer.option(key, value)
    writer.save()


def read_back(spark: SparkSession, broker: SparkBroker, topic: str) -> list[tuple]:
    """(partition, offset, key, value, headers) of every record in ``topic``, in offset order."""
    rows = read_batch(spark, broker, {"subscribe": topic, "includeHeaders": True}).collect()
    out = []
    for row in rows:
        headers = None if row.headers is None else [(h.key, bytes(h.value)) for h in row.headers]
        key = None if row.key is None else bytes(row.key).decode()
        out.append((row.partition, row.offset, key, bytes(row.value).decode(), headers))
    return sorted(out, key=lambda r: (r[0], r[1]))


def test_batch_write_with_topic_option(spark: SparkSession, broker: SparkBroker) -> None:
    """Scenario 37: a batch write with the ``topic`` option and default (idempotent) producer
    settings succeeds, and every record reads back exactly once with its key, value and headers."""
    topic = broker.topic("sink-batch", 1)
    rows = [
        ("k0", "v0", [("h1", b"a"), ("h2", b"b"), ("h1", b"c")]),
        (None, "v1", None),
        ("k2", "v2", [("only", b"x")]),
        ("k3", "v3", None),
    ]
    write_batch(spark.createDataFrame(rows, SINK_SCHEMA).coalesce(1), broker, {"topic": topic})

    assert read_back(spark, broker, topic) == [
        (0, 0, "k0", "v0", [("h1", b"a"), ("h2", b"b"), ("h1", b"c")]),
        (0, 1, None, "v1", None),
        (0, 2, "k2", "v2", [("only", b"x")]),
        (0, 3, "k3", "v3", None),
    ]
    assert broker.harness.offsets(topic, 0) == (0, 4)


def _write_files(directory: Path, first: int, count: int, per_file: int = 4) -> list[str]:
    """``count`` text files of ``per_file`` lines each, named in order; returns the lines."""
    lines = []
    for f in range(first, first + count):
        content = [f"r{f:02d}-{i}" for i in range(per_file)]
        staging = directory.parent / f"part-{f:02d}.txt"
        staging.write_text("".join(line + "\n" for line in content))
        shutil.move(str(staging), str(directory / staging.name))  # appear atomically
        lines += content
    return lines


def test_streaming_write_restart_no_duplicates(
    spark: SparkSession, broker: SparkBroker, checkpoint: str, tmp_path: Path
) -> None:
    """Scenario 38: a streaming write from a deterministic file source runs several micro-batches,
    stops cleanly and restarts from its checkpoint; the target holds every record exactly once, in
    order per partition, and the idempotent producer never hits OUT_OF_ORDER_SEQUENCE (the query
    would fail)."""
    topic = broker.topic("sink-stream", 2)
    source = tmp_path / "source"
    source.mkdir()
    expected = _write_files(source, 0, 3)

    def run() -> int:
        df = spark.readStream.option("maxFilesPerTrigger", 1).text(str(source))
        query = (
            df.selectExpr("value AS key", "value")
            .writeStream.format("kafka")
            .option("kafka.bootstrap.servers", broker.bootstrap)
            .option("topic", topic)
            .option("checkpointLocation", checkpoint)
            .start()
        )
        try:
            query.processAllAvailable()
            assert query.exception() is None
            return sum(1 for p in query.recentProgress if p["numInputRows"] > 0)
        finally:
            query.stop()

    assert run() == 3
    expected += _write_files(source, 3, 2)
    assert run() == 2

    got = read_back(spark, broker, topic)
    values = [r[3] for r in got]
    assert sorted(values) == sorted(expected)
    assert len(values) == len(set(values)) == 20
    for partition in (0, 1):
        in_partition = [r[3] for r in got if r[0] == partition]
        assert sorted(in_partition) == sorted(v for v in expected if murmur2_partition(v.encode(), 2) == partition)
        assert [r[1] for r in got if r[0] == partition] == list(range(len(in_partition)))
        for f in range(5):  # the files' order is the source's choice, the lines' order within one is not
            lines = [v for v in in_partition if v.startswith(f"r{f:02d}-")]
            assert lines == sorted(lines)


def test_partition_column_and_keyed_fallback(spark: SparkSession, broker: SparkBroker) -> None:
    """Scenario 39: a ``partition`` column forces the target partition; a null partition falls
    back to murmur2 keyed partitioning, spreading 5 distinct keys over more than one partition."""
    topic = broker.topic("sink-part", 4)
    forced = [(f"f{i}", f"forced-{i}", p) for i, p in enumerate([3, 0, 3, 1])]
    keys = [f"key-{i}" for i in range(5)]
    keyed = [(k, f"keyed-{k}", None) for k in keys]
    write_batch(spark.createDataFrame(forced + keyed, PARTITIONED_SCHEMA).coalesce(1), broker, {"topic": topic})

    where = {r[3]: r[0] for r in read_back(spark, broker, topic)}
    assert {v: where[v] for _, v, _ in forced} == {"forced-0": 3, "forced-1": 0, "forced-2": 3, "forced-3": 1}
    expected_keyed = {f"keyed-{k}": murmur2_partition(k.encode(), 4) for k in keys}
    assert {v: where[v] for _, v, _ in keyed} == expected_keyed
    assert expected_keyed == {"keyed-key-0": 1, "keyed-key-1": 0, "keyed-key-2": 2, "keyed-key-3": 3, "keyed-key-4": 1}
    assert len(where) == 9


def test_write_to_missing_topic(spark: SparkSession, broker: SparkBroker, tmp_path: Path) -> None:
    """Scenario 40: with auto-create off, writing to a missing topic aborts the job within about
    ``kafka.max.block.ms`` and creates nothing; on a broker with auto-create on, the same write
    succeeds and the topic appears with the broker's default partition count."""
    missing = f"sink-missing-{time.monotonic_ns()}"
    df = spark.createDataFrame([("k", "v", None)], SINK_SCHEMA).coalesce(1)
    started = time.monotonic()
    with pytest.raises(Exception) as failure:
        write_batch(df, broker, {"topic": missing, "kafka.max.block.ms": "2000"})
    elapsed = time.monotonic() - started
    text = str(failure.value)
    assert "Job aborted" in text
    assert f"Topic {missing} not present in metadata after 2000 ms" in text
    assert elapsed < 30, elapsed
    assert broker.harness.partition_leaders(missing) is None

    auto_create = {"auto.create.topics.enable": "true", "num.partitions": "2"}
    extra = SparkBroker(start_target(broker.name, tmp_path / "autocreate", auto_create), tmp_path / "autocreate-work")
    try:
        write_batch(df, extra, {"topic": missing, "kafka.max.block.ms": "20000"})
        partitions = extra.harness.describe_topic(missing)["partitions"]
        assert [p["partition"] for p in partitions] == [0, 1]
        assert [(r[2], r[3], r[4]) for r in read_back(spark, extra, missing)] == [("k", "v", None)]
    finally:
        extra.close()
