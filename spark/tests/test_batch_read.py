"""Batch reads with ``spark.read.format("kafka")`` (scenarios 1-10) and the protocol hygiene the
connector relies on (scenario 47), each asserted identically on Apache Kafka and kbroker."""

from __future__ import annotations

import json
import socket
import struct
import time
import uuid
from typing import Any

import pytest
from kio.index import load_response_schema
from kio.schema.api_versions.v4.request import ApiVersionsRequest
from kio.schema.metadata.v12.request import MetadataRequest, MetadataRequestTopic
from kio.serial import entity_reader
from pyspark.errors import IllegalArgumentException
from pyspark.sql import DataFrame, SparkSession

from compat.clients.base import Rec
from compat.harness import HarnessError, wait_until
from spark.tests.brokers import SparkBroker
from spark.tests.kafka_io import read_batch
from tests.kbroker.handlers.wire import call, request_frame

# Bound the driver's Admin calls: a broker that stops answering fails a test in seconds, not minutes.
QUICK = {"kafka.default.api.timeout.ms": 15000, "kafka.request.timeout.ms": 10000}


def _rows(df: DataFrame, *columns: str) -> list[tuple[Any, ...]]:
    """``columns`` of every row (key/value as strings, timestamp in epoch ms), by partition and offset."""
    cast = {"key": "CAST(key AS STRING) AS key", "value": "CAST(value AS STRING) AS value",
            "timestamp": "unix_millis(timestamp) AS timestamp"}  # fmt: skip
    selected = [cast.get(c, c) for c in columns]
    rows = df.selectExpr("partition AS _p", "offset AS _o", *selected).collect()  # sorted here: no shuffle
    return [tuple(r)[2:] for r in sorted(rows, key=lambda r: (r[0], r[1]))]


def _offsets(df: DataFrame) -> list[tuple[Any, ...]]:
    return _rows(df, "partition", "offset")


def _fill(broker: SparkBroker, topic: str, partitions: int, count: int) -> None:
    """``count`` records ``p<partition>-<i>`` in each partition."""
    broker.harness.put(topic, [Rec(f"p{p}-{i}".encode(), partition=p) for p in range(partitions) for i in range(count)])


def _read(spark: SparkSession, broker: SparkBroker, topic: str, **options: Any) -> DataFrame:
    return read_batch(spark, broker, {"subscribe": topic, **QUICK, **options})


def test_default_offsets_return_every_record(spark: SparkSession, broker: SparkBroker) -> None:
    """Scenario 1: default offsets (earliest..latest) over 3 partitions return exactly the
    produced values with the right topic, partition and offset columns."""
    topic = broker.topic("batch-all", partitions=3)
    _fill(broker, topic, 3, 4)
    got = _rows(_read(spark, broker, topic), "topic", "partition", "offset", "key", "value")
    assert got == [(topic, p, i, None, f"p{p}-{i}") for p in range(3) for i in range(4)]


def test_explicit_offsets_json_bound_each_partition(spark: SparkSession, broker: SparkBroker) -> None:
    """Scenario 2: startingOffsets/endingOffsets JSON with -2, -1 and explicit offsets return
    exactly the records in [start, end) of each partition."""
    topic = broker.topic("batch-range", partitions=3)
    _fill(broker, topic, 3, 5)
    start = json.dumps({topic: {"0": -2, "1": 1, "2": 3}})
    end = json.dumps({topic: {"0": 3, "1": -1, "2": 4}})
    got = _rows(_read(spark, broker, topic, startingOffsets=start, endingOffsets=end), "partition", "offset", "value")
    expected = [(0, i, f"p0-{i}") for i in range(3)] + [(1, i, f"p1-{i}") for i in range(1, 5)] + [(2, 3, "p2-3")]
    assert got == expected


def test_latest_binds_when_collected(spark: SparkSession, broker: SparkBroker) -> None:
    """Scenario 3: collecting the same batch DataFrame again after more records arrive returns
    the new records too (the "latest" end offset is resolved per execution)."""
    topic = broker.topic("batch-late", partitions=2)
    _fill(broker, topic, 2, 2)
    df = _read(spark, broker, topic)
    assert _offsets(df) == [(0, 0), (0, 1), (1, 0), (1, 1)]
    broker.harness.put(topic, [Rec(b"late-0", partition=0), Rec(b"late-1", partition=1), Rec(b"late-2", partition=1)])
    assert _rows(df, "partition", "offset", "value") == [
        (0, 0, "p0-0"), (0, 1, "p0-1"), (0, 2, "late-0"),
        (1, 0, "p1-0"), (1, 1, "p1-1"), (1, 2, "late-1"), (1, 3, "late-2"),
    ]  # fmt: skip


def test_min_partitions_splits_ranges(spark: SparkSession, broker: SparkBroker) -> None:
    """Scenario 4: minPartitions=6 on 3 equally filled Kafka partitions plans 6 Spark partitions
    (each offset range split in two) and still returns every record exactly once."""
    topic = broker.topic("batch-split", partitions=3)
    _fill(broker, topic, 3, 6)
    df = _read(spark, broker, topic, minPartitions=6)
    assert df.rdd.getNumPartitions() == 6
    got = _rows(df, "partition", "offset", "value")
    assert got == [(p, i, f"p{p}-{i}") for p in range(3) for i in range(6)]


def _timestamped(broker: SparkBroker, topic: str) -> int:
    """Partition 0 holds timestamps base+0,10,..,40 and partition 1 base+5,15,..,45 (CreateTime,
    a minute in the past so retention keeps them); returns base."""
    base = (int(time.time() * 1000) - 60_000) // 1000 * 1000
    records = [
        Rec(f"p{p}-{i}".encode(), partition=p, timestamp=base + 5 * p + 10 * i) for p in range(2) for i in range(5)
    ]
    broker.harness.put(topic, records)
    return base


def test_offsets_by_timestamp(spark: SparkSession, broker: SparkBroker) -> None:
    """Scenario 5: startingOffsetsByTimestamp/endingOffsetsByTimestamp (per partition) and
    startingTimestamp/endingTimestamp (all partitions) select from the first offset whose record
    timestamp is >= the given one, up to (excluding) the first offset >= the end timestamp."""
    topic = broker.topic("batch-ts", partitions=2)
    base = _timestamped(broker, topic)
    start = json.dumps({topic: {"0": base + 10, "1": base + 16}})
    end = json.dumps({topic: {"0": base + 30, "1": base + 45}})
    df = _read(spark, broker, topic, startingOffsetsByTimestamp=start, endingOffsetsByTimestamp=end)
    assert _rows(df, "partition", "offset", "value", "timestamp", "timestampType") == [
        (0, 1, "p0-1", base + 10, 0), (0, 2, "p0-2", base + 20, 0),
        (1, 2, "p1-2", base + 25, 0), (1, 3, "p1-3", base + 35, 0),
    ]  # fmt: skip
    df = _read(spark, broker, topic, startingTimestamp=base + 20, endingTimestamp=base + 36)
    assert _offsets(df) == [(0, 2), (0, 3), (1, 2), (1, 3)]
    df = _read(spark, broker, topic, startingTimestamp=base, endingOffsets=json.dumps({topic: {"0": 1, "1": 2}}))
    assert _offsets(df) == [(0, 0), (1, 0), (1, 1)]


def test_timestamp_without_match(spark: SparkSession, broker: SparkBroker) -> None:
    """Scenario 6: a starting timestamp later than every record fails with "No offset matched
    from request"; with startingOffsetsByTimestampStrategy=latest that partition starts at
    latest instead; an ending timestamp beyond every record resolves to latest."""
    topic = broker.topic("batch-nomatch", partitions=2)
    base = _timestamped(broker, topic)
    future = base + 3_600_000
    no_retry = {"fetchOffset.numRetries": 1, "fetchOffset.retryIntervalMs": 10}
    with pytest.raises(IllegalArgumentException, match=f"No offset matched from request of topic-partition {topic}-"):
        _read(spark, broker, topic, startingTimestamp=future, **no_retry).collect()
    by_partition = json.dumps({topic: {"0": base + 20, "1": future}})
    df = _read(
        spark, broker, topic, startingOffsetsByTimestamp=by_partition, startingOffsetsByTimestampStrategy="latest"
    )
    assert _offsets(df) == [(0, 2), (0, 3), (0, 4)]
    df = _read(spark, broker, topic, startingOffsets="earliest", endingTimestamp=future)
    assert _offsets(df) == [(p, i) for p in range(2) for i in range(5)]


def test_headers_in_order_and_null_without_headers(spark: SparkSession, broker: SparkBroker) -> None:
    """Scenario 7: with includeHeaders=true headers come back in order, repeated keys and null
    header values included; a record produced without headers has headers = null."""
    topic = broker.topic("batch-headers")
    headers = (("a", b"1"), ("b", b"2"), ("a", b"3"), ("n", None))
    broker.harness.put(topic, [Rec(b"with", headers=headers), Rec(b"without"), Rec(b"one", headers=(("a", b""),))])
    rows = sorted(_read(spark, broker, topic, includeHeaders=True).collect(), key=lambda r: r.offset)
    got = [(r.value, None if r.headers is None else [(h.key, h.value) for h in r.headers]) for r in rows]
    assert got == [
        (b"with", [("a", b"1"), ("b", b"2"), ("a", b"3"), ("n", None)]),
        (b"without", None),
        (b"one", [("a", b"")]),
    ]


def test_null_keys_values_and_timestamp_types(spark: SparkSession, broker: SparkBroker) -> None:
    """Scenario 8: null keys and/or values come back as nulls; timestampType is 0 on a
    CreateTime topic and 1 on a LogAppendTime topic (whose timestamps the broker assigned)."""
    create_time = broker.topic("batch-nulls")
    ts = (int(time.time() * 1000) - 30_000) // 1000 * 1000
    records = [Rec(b"v", key=None, timestamp=ts), Rec(None, key=b"k", timestamp=ts), Rec(None, key=None, timestamp=ts)]
    broker.harness.put(create_time, records)
    got = _rows(_read(spark, broker, create_time), "offset", "key", "value", "timestamp", "timestampType")
    assert got == [(0, None, "v", ts, 0), (1, "k", None, ts, 0), (2, None, None, ts, 0)]

    log_append = broker.topic("batch-logappend", configs={"message.timestamp.type": "LogAppendTime"})
    before = int(time.time() * 1000)
    broker.harness.put(log_append, records)
    after = int(time.time() * 1000)
    got = _rows(_read(spark, broker, log_append), "offset", "timestampType", "timestamp")
    assert [(o, t) for o, t, _ in got] == [(0, 1), (1, 1), (2, 1)]
    assert all(before <= ms <= after for _, _, ms in got), (before, after, got)


CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]


def test_every_codec_reads_back_identically(spark: SparkSession, broker: SparkBroker) -> None:
    """Scenario 9: records written uncompressed and gzip, snappy, lz4, zstd compressed (one
    batch of 3 per codec) all read back identically: the same key and binary value bytes, in
    offset order."""
    topic = broker.topic("batch-codecs")
    expected = []
    for codec in CODECS:
        records = [
            Rec(codec.encode() + bytes([i]) + bytes(range(256)) * 4, key=f"{codec}-{i}".encode()) for i in range(3)
        ]
        broker.harness.put(topic, records, codec=codec)
        expected += [(r.key, r.value) for r in records]
    rows = sorted(_read(spark, broker, topic).collect(), key=lambda r: r.offset)
    assert [r.offset for r in rows] == list(range(len(expected)))
    assert [(bytes(r.key), bytes(r.value)) for r in rows] == expected


def test_read_after_delete_records(spark: SparkSession, broker: SparkBroker) -> None:
    """Scenario 10: after DeleteRecords moves partition 0's log start to 4, a batch read returns
    only offsets >= 4 there (the other partition untouched) and does not fail."""
    topic = broker.topic("batch-deleted", partitions=2)
    _fill(broker, topic, 2, 8)
    assert broker.harness.delete_records(topic, 0, 4) == 4
    got = _rows(_read(spark, broker, topic), "partition", "offset", "value")
    assert got == [(0, i, f"p0-{i}") for i in range(4, 8)] + [(1, i, f"p1-{i}") for i in range(8)]


# --- scenario 47: protocol hygiene --------------------------------------------------------------

# Kafka 4.3's advertised ranges for the APIs the connector's default (Admin) path and its sink
# use: Produce, Fetch, ListOffsets, Metadata, FindCoordinator, ApiVersions, InitProducerId,
# DescribeTopicPartitions.
SPARK_APIS = {0: (0, 13), 1: (4, 18), 2: (1, 11), 3: (0, 13), 10: (0, 6), 18: (0, 4), 22: (0, 5), 75: (0, 0)}
TELEMETRY_APIS = {71, 72}


def _api_versions_v4(bootstrap: str) -> Any:
    """ApiVersions v4 over a raw socket; its response header is v0 even though v4 is flexible."""
    host, port = bootstrap.rsplit(":", 1)
    request = ApiVersionsRequest(client_software_name="spark-hygiene", client_software_version="1.0")
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(request_frame(request, 4, correlation_id=47))
        size = struct.unpack(">i", sock.recv(4, socket.MSG_WAITALL))[0]
        frame = sock.recv(size, socket.MSG_WAITALL)
    assert struct.unpack_from(">i", frame, 0)[0] == 47
    response, _ = entity_reader(load_response_schema(18, 4))(memoryview(frame), 4)
    return response


def _topic_id(broker: SparkBroker, topic: str) -> uuid.UUID:
    request = MetadataRequest(
        topics=(MetadataRequestTopic(topic_id=None, name=topic),),
        allow_auto_topic_creation=False,
        include_topic_authorized_operations=False,
    )
    (described,) = call(broker.bootstrap, request, 12).topics
    assert described.error_code == 0
    return described.topic_id


def _recreate(broker: SparkBroker, topic: str) -> None:
    """Delete ``topic`` and create it again (Kafka finishes a deletion asynchronously)."""
    assert broker.harness.delete_topic(topic) is None
    assert broker.harness.wait_topic_gone(topic)

    def attempt() -> bool:
        try:
            broker.harness.create(topic, 1)
        except HarnessError:
            return False
        return True

    assert wait_until(attempt, bool, 15.0)[0]


def test_protocol_hygiene(spark: SparkSession, broker: SparkBroker) -> None:
    """Scenario 47: a raw ApiVersions v4 request gets a valid answer; telemetry (71/72) is not
    advertised, and for the APIs Spark uses (Fetch up to 18 with topic ids, DescribeTopicPartitions
    v0) the advertised ranges equal Kafka 4.3's; Metadata topic ids are non-zero and change when
    the topic is deleted and recreated, and Spark reads the recreated topic's records."""
    response = _api_versions_v4(broker.bootstrap)
    assert response.error_code == 0
    table = {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}
    assert {key: table.get(key) for key in SPARK_APIS} == SPARK_APIS
    assert TELEMETRY_APIS.isdisjoint(table)

    topic = broker.topic("hygiene")
    broker.harness.put(topic, [Rec(b"old-0"), Rec(b"old-1"), Rec(b"old-2")])
    first = _topic_id(broker, topic)
    assert first != uuid.UUID(int=0)
    assert _rows(_read(spark, broker, topic), "offset", "value") == [(0, "old-0"), (1, "old-1"), (2, "old-2")]

    _recreate(broker, topic)
    second = _topic_id(broker, topic)
    assert second not in (uuid.UUID(int=0), first)
    broker.harness.put(topic, [Rec(b"new-0")])
    assert _rows(_read(spark, broker, topic), "offset", "value") == [(0, "new-0")]
