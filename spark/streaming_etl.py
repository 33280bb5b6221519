"""Pipeline 1: streaming ETL with state — JSON events → event-time windows → Kafka and Parquet.

Reads the ``generator``'s events from a topic, parses them with a schema, counts events and
sums purchase amounts per (1-minute window, kind) with a watermark, and writes each finished
window twice: as JSON to a Kafka topic (the connector's idempotent producer; at-least-once
across driver failures, as Spark documents) and to Parquet (Spark's file sink, exactly-once
through the checkpoint). Output mode is append: a window is written once, when the watermark
has passed its end. The two sinks are two queries with checkpoints under one directory.

    python -m kbroker.spark.streaming_etl --bootstrap localhost:9092 --input events \\
        --output event-windows --parquet out/event-windows --checkpoint out/checkpoint
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.streaming import StreamingQuery


def event_schema() -> object:
    from pyspark.sql import types as T

    return T.StructType([
        T.StructField("event_id", T.StringType()),
        T.StructField("user_id", T.StringType()),
        T.StructField("kind", T.StringType()),
        T.StructField("amount", T.DoubleType()),
        T.StructField("event_time", T.TimestampType()),
    ])  # fmt: skip


def parse_events(kafka_rows: DataFrame, keep: Sequence[str] = ()) -> DataFrame:
    """Kafka rows → typed events plus the ``keep`` columns of the Kafka row (rows whose value
    is not an event JSON are dropped)."""
    from pyspark.sql import functions as F

    parsed = kafka_rows.select(F.from_json(F.col("value").cast("string"), event_schema()).alias("e"), *keep)
    return parsed.select("e.*", *keep).where(F.col("event_time").isNotNull() & F.col("kind").isNotNull())


def window_totals(events: DataFrame, window: str, watermark: str) -> DataFrame:
    """Per (window, kind): number of events and the summed amount, finished windows only."""
    from pyspark.sql import functions as F

    return (
        events.withWatermark("event_time", watermark)
        .groupBy(F.window("event_time", window), F.col("kind"))
        .agg(F.count("*").alias("events"), F.round(F.sum("amount"), 2).alias("amount"))
        .select(
            F.col("window.start").alias("window_start"),
            F.col("window.end").alias("window_end"),
            "kind",
            "events",
            "amount",
        )
    )


def start(
    spark: SparkSession,
    bootstrap: str,
    input_topic: str,
    output_topic: str,
    parquet_dir: str,
    checkpoint_dir: str,
    *,
    window: str = "1 minute",
    watermark: str = "30 seconds",
    available_now: bool = False,
    max_offsets_per_trigger: int | None = None,
    source_options: dict[str, str] | None = None,
) -> list[StreamingQuery]:
    """Start the two queries (Kafka sink, Parquet sink); the caller awaits or stops them."""
    from pyspark.sql import functions as F

    queries = []
    for sink in ("kafka", "parquet"):
        reader = (
            spark.readStream.format("kafka").option("kafka.bootstrap.servers", bootstrap)
            .option("subscribe", input_topic).option("startingOffsets", "earliest")
        )  # fmt: skip
        if max_offsets_per_trigger:
            reader = reader.option("maxOffsetsPerTrigger", str(max_offsets_per_trigger))
        for key, value in (source_options or {}).items():
            reader = reader.option(key, value)
        totals = window_totals(parse_events(reader.load()), window, watermark)
        if sink == "kafka":
            out = totals.select(
                F.concat_ws("|", F.date_format("window_start", "yyyy-MM-dd'T'HH:mm:ss'Z'"), "kind").alias("key"),
                F.to_json(F.struct(*totals.columns)).alias("value"),
            )
            writer = (
                out.writeStream.queryName(f"etl-{output_topic}-to-kafka").format("kafka")
                .option("kafka.bootstrap.servers", bootstrap).option("topic", output_topic)
            )  # fmt: skip
        else:
            writer = (
                totals.writeStream.queryName(f"etl-{output_topic}-to-parquet")
                .format("parquet")
                .option("path", parquet_dir)
            )
        writer = writer.outputMode("append").option("checkpointLocation", str(Path(checkpoint_dir) / sink))
        if available_now:
            writer = writer.trigger(availableNow=True)
        queries.append(writer.start())
    return queries


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kbroker.spark.streaming_etl", description=__doc__.split("\n\n")[0])
    parser.add_argument("--bootstrap", default="localhost:9092")
    parser.add_argument("--input", default="events")
    parser.add_argument("--output", default="event-windows")
    parser.add_argument("--parquet", default="out/event-windows")
    parser.add_argument("--checkpoint", default="out/checkpoint")
    parser.add_argument("--window", default="1 minute")
    parser.add_argument("--watermark", default="30 seconds")
    parser.add_argument("--max-offsets-per-trigger", type=int, default=None)
    parser.add_argument("--available-now", action="store_true", help="process what is there, then stop")
    args = parser.parse_args(argv)

    from kbroker.spark.connector import build_session

    spark = build_session("kbroker-streaming-etl")
    spark.sparkContext.setLogLevel("WARN")
    queries = start(
        spark, args.bootstrap, args.input, args.output, args.parquet, args.checkpoint, window=args.window,
        watermark=args.watermark, available_now=args.available_now,
        max_offsets_per_trigger=args.max_offsets_per_trigger,
    )  # fmt: skip
    print(f"streaming {args.input} → {args.output} (Kafka) and {args.parquet} (Parquet); Ctrl-C stops", flush=True)
    try:
        for query in queries:
            query.awaitTermination()
    except KeyboardInterrupt:
        for query in queries:
            query.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
