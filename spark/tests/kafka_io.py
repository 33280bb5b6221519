"""Reading and writing Kafka from the scenarios: the connector's options in one place.

``kafka_options`` turns keyword arguments into connector options (``kafka_bootstrap_servers``
style names are not used: pass connector option names as a dict when they contain dots).
"""

from __future__ import annotations

import uuid
from typing import Any

from pyspark.sql import DataFrame, DataFrameReader, Row, SparkSession
from pyspark.sql.streaming import DataStreamReader, StreamingQuery

from spark.tests.brokers import SparkBroker


def _configure(reader: Any, broker: SparkBroker, options: dict[str, Any]) -> Any:
    reader = reader.format("kafka").option("kafka.bootstrap.servers", broker.bootstrap)
    for key, value in options.items():
        reader = reader.option(key, str(value).lower() if isinstance(value, bool) else str(value))
    return reader


def read_batch(spark: SparkSession, broker: SparkBroker, options: dict[str, Any]) -> DataFrame:
    """``spark.read.format("kafka")`` against ``broker`` with connector ``options``."""
    reader: DataFrameReader = _configure(spark.read, broker, options)
    return reader.load()


def read_stream(spark: SparkSession, broker: SparkBroker, options: dict[str, Any]) -> DataFrame:
    """``spark.readStream.format("kafka")`` against ``broker`` with connector ``options``."""
    reader: DataStreamReader = _configure(spark.readStream, broker, options)
    return reader.load()


def start_memory_query(
    df: DataFrame, checkpoint: str, trigger: dict[str, Any] | None = None
) -> tuple[StreamingQuery, str]:
    """Start ``df`` into a memory sink with a unique table name; return (query, table)."""
    table = f"t_{uuid.uuid4().hex[:10]}"
    writer = df.writeStream.format("memory").queryName(table).option("checkpointLocation", checkpoint)
    if trigger:
        writer = writer.trigger(**trigger)
    return writer.start(), table


def table_rows(spark: SparkSession, table: str) -> list[Row]:
    return spark.sql(f"SELECT * FROM {table}").collect()


def start_collecting_query(
    df: DataFrame, checkpoint: str, trigger: dict[str, Any] | None = None
) -> tuple[StreamingQuery, list[tuple[int, list[Row]]]]:
    """Start ``df`` with a ``foreachBatch`` sink that appends ``(batch id, rows)`` to the returned
    list. Unlike the memory sink (append mode), it may restart on an existing checkpoint, and it
    shows exactly what each batch delivered (a replayed batch appears twice)."""
    batches: list[tuple[int, list[Row]]] = []

    def collect(batch: DataFrame, batch_id: int) -> None:
        batches.append((batch_id, batch.collect()))

    writer = df.writeStream.foreachBatch(collect).option("checkpointLocation", checkpoint)
    if trigger:
        writer = writer.trigger(**trigger)
    return writer.start(), batches
