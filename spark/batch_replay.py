"""Pipeline 2: batch replay — read a topic by offset range or by time range into Parquet.

``spark.read.format("kafka")`` over ``[from, to)`` given either as offsets (the connector's
``startingOffsets`` / ``endingOffsets`` JSON, per partition) or as times
(``startingOffsetsByTimestamp`` / ``endingOffsetsByTimestamp``: each partition starts at its
first record whose timestamp is ≥ the time). The generator's events carry their event time as
the record timestamp, so a time range replays an event-time range. Parsed events are written
with their Kafka coordinates (partition, offset, timestamp).

    python -m kbroker.spark.batch_replay --bootstrap localhost:9092 --topic events \\
        --from-time 2026-11-22T10:00:00Z --to-time 2026-11-22T10:05:00Z --out out/replay
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING

from kbroker.spark.streaming_etl import parse_events

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


def topic_partitions(bootstrap: str, topic: str) -> list[int]:
    """The topic's partition ids (Metadata via an admin client; the topic must exist)."""
    from confluent_kafka.admin import AdminClient

    metadata = AdminClient({"bootstrap.servers": bootstrap}).list_topics(topic, timeout=15).topics.get(topic)
    if metadata is None or metadata.error is not None:
        raise SystemExit(f"topic {topic!r} not found on {bootstrap}")
    return sorted(metadata.partitions)


def per_partition(topic: str, partitions: Sequence[int], value: int) -> str:
    """The connector's per-partition JSON with one value for every partition."""
    return json.dumps({topic: {str(p): value for p in partitions}})


def read_range(
    spark: SparkSession,
    bootstrap: str,
    topic: str,
    *,
    starting_offsets: str = "earliest",
    ending_offsets: str = "latest",
    from_ms: int | None = None,
    to_ms: int | None = None,
    partitions: Sequence[int] = (),
) -> DataFrame:
    """The events in the range with their Kafka coordinates. Offsets are connector JSON (or
    earliest/latest); ``from_ms``/``to_ms`` (epoch ms) replace them per partition."""
    reader = spark.read.format("kafka").option("kafka.bootstrap.servers", bootstrap).option("subscribe", topic)
    if from_ms is not None:
        reader = reader.option("startingOffsetsByTimestamp", per_partition(topic, partitions, from_ms))
    else:
        reader = reader.option("startingOffsets", starting_offsets)
    if to_ms is not None:
        reader = reader.option("endingOffsetsByTimestamp", per_partition(topic, partitions, to_ms))
    else:
        reader = reader.option("endingOffsets", ending_offsets)
    rows = reader.load().withColumnRenamed("timestamp", "kafka_timestamp")
    return parse_events(rows, keep=("partition", "offset", "kafka_timestamp"))


def replay(spark: SparkSession, out_dir: str, events: DataFrame) -> int:
    """Write ``events`` as Parquet (replacing ``out_dir``); return the row count."""
    events.cache()
    try:
        events.write.mode("overwrite").parquet(out_dir)
        return events.count()
    finally:
        events.unpersist()


def epoch_ms(iso: str) -> int:
    return int(datetime.fromisoformat(iso).timestamp() * 1000)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kbroker.spark.batch_replay", description=__doc__.split("\n\n")[0])
    parser.add_argument("--bootstrap", default="localhost:9092")
    parser.add_argument("--topic", default="events")
    parser.add_argument("--out", default="out/replay")
    parser.add_argument("--from-offsets", default="earliest", help='"earliest" or connector JSON {"t":{"0":5}}')
    parser.add_argument("--to-offsets", default="latest", help='"latest" or connector JSON {"t":{"0":50}}')
    parser.add_argument("--from-time", default=None, help="ISO-8601; replaces --from-offsets")
    parser.add_argument("--to-time", default=None, help="ISO-8601; replaces --to-offsets")
    args = parser.parse_args(argv)

    from kbroker.spark.connector import build_session

    spark = build_session("kbroker-batch-replay")
    spark.sparkContext.setLogLevel("WARN")
    timed = args.from_time is not None or args.to_time is not None
    events = read_range(
        spark, args.bootstrap, args.topic, starting_offsets=args.from_offsets, ending_offsets=args.to_offsets,
        from_ms=epoch_ms(args.from_time) if args.from_time else None,
        to_ms=epoch_ms(args.to_time) if args.to_time else None,
        partitions=topic_partitions(args.bootstrap, args.topic) if timed else (),
    )  # fmt: skip
    print(f"{replay(spark, args.out, events)} events from {args.topic} written to {args.out}")
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
