"""Transactions and offset gaps as Spark's Kafka source sees them: read_committed hides open and
aborted records, read_uncommitted shows them, neither shows control markers, LATEST is the LSO,
and gaps left by markers or compaction are skipped without a data-loss error (scenarios 25-29)."""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.streaming import StreamingQuery

from compat.clients.base import Rec, TxnProducer
from compat.harness import wait_until
from spark.tests.brokers import SparkBroker
from spark.tests.kafka_io import read_batch, read_stream, start_memory_query, table_rows

# (offset, value) of a record as a read returns it.
Seen = tuple[int, str]

COMMITTED = {"kafka.isolation.level": "read_committed"}
MARKER_WAIT_S = 15.0
# A stalled fetch fails the task after this long instead of spark.network.timeout (120 s).
QUICK_POLL = {"kafkaConsumer.pollTimeoutMs": 10000}


def _seen(df: DataFrame) -> list[Seen]:
    return sorted((r.offset, r.value) for r in df.selectExpr("offset", "CAST(value AS STRING) AS value").collect())


def _batch(spark: SparkSession, broker: SparkBroker, topic: str, extra: dict[str, Any]) -> list[Seen]:
    return _seen(read_batch(spark, broker, {"subscribe": topic, **QUICK_POLL, **extra}))


def _start(
    spark: SparkSession, broker: SparkBroker, topic: str, checkpoint: str, extra: dict[str, Any]
) -> tuple[StreamingQuery, str]:
    df = read_stream(spark, broker, {"subscribe": topic, **QUICK_POLL, **extra})
    return start_memory_query(df.selectExpr("offset", "CAST(value AS STRING) AS value"), checkpoint)


def _table(spark: SparkSession, table: str) -> list[Seen]:
    return sorted((r.offset, r.value) for r in table_rows(spark, table))


def _txn(broker: SparkBroker, test: str) -> TxnProducer:
    return broker.harness.transactional_producer(f"{test}-{uuid.uuid4().hex[:8]}")


def _send(producer: TxnProducer, topic: str, values: list[str]) -> list[Seen]:
    """Send ``values`` in the producer's open transaction; return (offset, value) of each."""
    offsets = producer.send(topic, [Rec(v.encode()) for v in values])
    assert all(isinstance(o, int) for o in offsets), offsets
    return list(zip(offsets, values, strict=True))


def _put(broker: SparkBroker, topic: str, values: list[str]) -> list[Seen]:
    """Produce ``values`` outside any transaction; return (offset, value) of each."""
    offsets = broker.harness.put(topic, [Rec(v.encode()) for v in values])
    return list(zip(offsets, values, strict=True))


def _end(broker: SparkBroker, producer: TxnProducer, topic: str, stable: int, *, commit: bool) -> None:
    """Commit or abort, then wait (bounded) until the marker is written: the LSO reaches
    ``stable``. Kafka answers EndTxn once the decision is logged and writes the markers after."""
    assert (producer.commit() if commit else producer.abort()) is None

    def lso() -> Any:
        return broker.harness.list_offsets(topic, 0, "latest", isolation="read_committed")

    met, got = wait_until(lso, lambda o: o.get("offset", -1) >= stable, MARKER_WAIT_S)
    assert met, f"{topic}: LSO {got}, waited for {stable}"


def _transaction(
    broker: SparkBroker, producer: TxnProducer, topic: str, values: list[str], *, commit: bool
) -> list[Seen]:
    """One whole transaction of ``values`` (all on partition 0), its marker written."""
    assert producer.begin() is None
    sent = _send(producer, topic, values)
    _end(broker, producer, topic, sent[-1][0] + 2, commit=commit)
    return sent


def _stop(query: StreamingQuery | None) -> None:
    if query is not None and query.isActive:
        query.stop()


def test_read_committed_hides_open_and_aborted(spark: SparkSession, broker: SparkBroker, checkpoint: str) -> None:
    """Scenario 25: under read_committed an open transaction's records are invisible to a streaming
    query and a batch read, appear once it commits, and an aborted transaction's never appear."""
    topic = broker.topic("s25")
    producer = _txn(broker, "s25")
    query = None
    try:
        assert producer.begin() is None
        first = _send(producer, topic, ["a1", "a2", "a3"])
        assert [o for o, _ in first] == [0, 1, 2]
        query, table = _start(spark, broker, topic, checkpoint, {"startingOffsets": "earliest", **COMMITTED})
        query.processAllAvailable()
        assert _table(spark, table) == []
        assert _batch(spark, broker, topic, COMMITTED) == []

        _end(broker, producer, topic, 4, commit=True)  # marker at 3
        query.processAllAvailable()
        assert _table(spark, table) == first
        assert _batch(spark, broker, topic, COMMITTED) == first

        aborted = _transaction(broker, producer, topic, ["b1", "b2"], commit=False)  # 4, 5, marker 6
        last = _transaction(broker, producer, topic, ["c1"], commit=True)  # 7, marker 8
        assert [o for o, _ in aborted + last] == [4, 5, 7]
        query.processAllAvailable()
        assert _table(spark, table) == first + last
        assert _batch(spark, broker, topic, COMMITTED) == first + last
    finally:
        _stop(query)
        producer.close()


def test_read_committed_batches_of_markers_and_aborted_records(
    spark: SparkSession, broker: SparkBroker, checkpoint: str
) -> None:
    """Scenario 26: with read_committed and ``maxOffsetsPerTrigger=3``, micro-batches that span only
    control markers and aborted records complete with no rows (no poll timeout), and the committed
    record after them is delivered. 18 offsets: 3 committed + marker, 2 x (5 aborted + marker),
    1 committed + marker."""
    topic = broker.topic("s26")
    producer = _txn(broker, "s26")
    query = None
    try:
        head = _transaction(broker, producer, topic, ["x0", "x1", "x2"], commit=True)  # 0-2, marker 3
        _transaction(broker, producer, topic, [f"ab{i}" for i in range(5)], commit=False)  # 4-8, marker 9
        _transaction(broker, producer, topic, [f"ac{i}" for i in range(5)], commit=False)  # 10-14, marker 15
        tail = _transaction(broker, producer, topic, ["y"], commit=True)  # 16, marker 17
        assert [o for o, _ in head + tail] == [0, 1, 2, 16]
        assert broker.harness.offsets(topic) == (0, 18)

        extra = {"startingOffsets": "earliest", "maxOffsetsPerTrigger": 3, **COMMITTED}
        query, table = _start(spark, broker, topic, checkpoint, extra)
        query.processAllAvailable()
        assert _table(spark, table) == head + tail
        rows_by_end: dict[int, int] = {}
        for progress in query.recentProgress:
            (source,) = progress["sources"]
            if source["endOffset"] is not None and source["startOffset"] != source["endOffset"]:
                end = json.loads(source["endOffset"]) if isinstance(source["endOffset"], str) else source["endOffset"]
                rows_by_end[end[topic]["0"]] = source["numInputRows"]
        assert rows_by_end == {3: 3, 6: 0, 9: 0, 12: 0, 15: 0, 18: 1}
    finally:
        _stop(query)
        producer.close()


def test_read_uncommitted_shows_aborted_and_open_but_no_markers(
    spark: SparkSession, broker: SparkBroker, checkpoint: str
) -> None:
    """Scenario 27: with read_uncommitted (the default) a committed, an aborted and an open
    transaction all show their records, in a batch read and a streaming query, and the control
    markers (offsets 2 and 5) never appear."""
    topic = broker.topic("s27")
    producer = _txn(broker, "s27")
    query = None
    try:
        committed = _transaction(broker, producer, topic, ["c0", "c1"], commit=True)  # 0, 1, marker 2
        aborted = _transaction(broker, producer, topic, ["a0", "a1"], commit=False)  # 3, 4, marker 5
        assert producer.begin() is None
        still_open = _send(producer, topic, ["o0", "o1"])  # 6, 7
        expected = committed + aborted + still_open
        assert [o for o, _ in expected] == [0, 1, 3, 4, 6, 7]

        uncommitted = {"kafka.isolation.level": "read_uncommitted"}
        assert _batch(spark, broker, topic, {}) == expected
        assert _batch(spark, broker, topic, uncommitted) == expected
        query, table = _start(spark, broker, topic, checkpoint, {"startingOffsets": "earliest", **uncommitted})
        query.processAllAvailable()
        assert _table(spark, table) == expected
    finally:
        _stop(query)
        producer.abort()
        producer.close()


def test_latest_under_read_committed_is_the_lso(spark: SparkSession, broker: SparkBroker, checkpoint: str) -> None:
    """Scenario 28: ListOffsets LATEST under read_committed is the last stable offset. A streaming
    query started with ``startingOffsets=latest`` during an open transaction starts at that
    transaction's first offset (3), not at the high watermark (7), so everything from the
    transaction on is delivered once it commits; a batch read meanwhile ends at the LSO."""
    topic = broker.topic("s28")
    harness = broker.harness
    producer = _txn(broker, "s28")
    query = None
    try:
        before = _put(broker, topic, ["n0", "n1", "n2"])
        assert producer.begin() is None
        in_txn = _send(producer, topic, ["t0", "t1"])  # 3, 4
        after = _put(broker, topic, ["n3", "n4"])  # 5, 6, not transactional
        assert [o for o, _ in before + in_txn + after] == [0, 1, 2, 3, 4, 5, 6]
        assert harness.list_offsets(topic, 0, "latest", isolation="read_committed")["offset"] == 3
        assert harness.list_offsets(topic, 0, "latest", isolation="read_uncommitted")["offset"] == 7

        query, table = _start(spark, broker, topic, checkpoint, {"startingOffsets": "latest", **COMMITTED})
        query.processAllAvailable()
        assert _table(spark, table) == []
        assert _batch(spark, broker, topic, COMMITTED) == before

        _end(broker, producer, topic, 8, commit=True)  # marker at 7
        query.processAllAvailable()
        assert _table(spark, table) == in_txn + after
        assert _batch(spark, broker, topic, COMMITTED) == before + in_txn + after
    finally:
        _stop(query)
        producer.close()


# Both brokers look for cleaning work every 100 ms (log.cleaner.backoff.ms in compat/targets.py).
COMPACTION_WAIT_S = 25.0


def test_compacted_gaps_are_not_data_loss(spark: SparkSession, broker: SparkBroker, checkpoint: str) -> None:
    """Scenario 29: on a compacted topic whose middle offsets the log cleaner removed (the log
    start stays 0), a batch read and a streaming query with ``failOnDataLoss=true`` return exactly
    the surviving records and raise no data-loss error.

    Every record carries a CreateTime 1 s after the previous one, so with ``segment.ms=100`` each
    append rolls a new segment (the roll compares record timestamps, not wall time): all but the
    last record sit in closed, cleanable segments."""
    topic = broker.topic(
        "s29",
        configs={
            "cleanup.policy": "compact",
            "segment.ms": "100",
            "min.cleanable.dirty.ratio": "0.01",
            "min.compaction.lag.ms": "0",
        },
    )
    keys = ["first"] + [f"k{i}" for i in range(4)] * 2 + ["last", "tail"]
    values = ["first"] + [f"old{i}" for i in range(4)] + [f"new{i}" for i in range(4)] + ["last", "tail"]
    start = int(time.time() * 1000) - 1000 * len(keys)  # the last one about now
    pairs = enumerate(zip(keys, values, strict=True))
    records = [Rec(v.encode(), key=k.encode(), timestamp=start + 1000 * i) for i, (k, v) in pairs]
    offsets = broker.harness.put(topic, records, sync=True)
    assert offsets == list(range(11))
    # Offsets 1-4 (the old values of k0-k3) are the ones compaction removes; 10 stays in the
    # active segment.
    survivors = [(0, "first")] + [(5 + i, f"new{i}") for i in range(4)] + [(9, "last"), (10, "tail")]

    deadline = time.monotonic() + COMPACTION_WAIT_S
    while True:
        got = broker.harness.consume(topic, [0], "earliest", until={0: 11}, timeout_s=5.0)
        if [(r["offset"], r["value"]) for r in got["records"]] == survivors or time.monotonic() >= deadline:
            break
        time.sleep(0.25)
    assert [(r["offset"], r["value"]) for r in got["records"]] == survivors
    assert broker.harness.offsets(topic) == (0, 11)

    strict = {"failOnDataLoss": "true"}
    assert _batch(spark, broker, topic, strict) == survivors
    query, table = _start(spark, broker, topic, checkpoint, {"startingOffsets": "earliest", **strict})
    try:
        query.processAllAvailable()
        assert _table(spark, table) == survivors
        assert query.exception() is None
    finally:
        _stop(query)
