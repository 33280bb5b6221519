"""A streaming query across a broker crash and restart (scenario 44): it reconnects and loses or
repeats nothing, while an idempotent producer keeps writing through the outage."""

from __future__ import annotations

import threading
import time
from typing import Any

from confluent_kafka import Producer
from pyspark.sql import SparkSession
from pyspark.sql.streaming import StreamingQuery

from spark.tests.brokers import SparkBroker
from spark.tests.kafka_io import read_stream, start_collecting_query

WAIT_S = 90.0
PARTITIONS = 2
# The connector rides out the outage: many quick offset-fetch retries on the driver, and short
# reconnect back-off for its Admin client and executor consumers.
RETRYING = {
    "failOnDataLoss": True,
    "fetchOffset.numRetries": "120",
    "fetchOffset.retryIntervalMs": "250",
    "kafka.default.api.timeout.ms": "10000",
    "kafka.request.timeout.ms": "5000",
    "kafka.reconnect.backoff.ms": "50",
    "kafka.reconnect.backoff.max.ms": "250",
}


class SteadyProducer:
    """An idempotent acks=all producer writing ``v00000``, ``v00001``, … round-robin over the
    partitions, a few records per flush, from a thread until stopped; it counts deliveries."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.producer = Producer({
            "bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all", "linger.ms": 5,
            "message.timeout.ms": 120000, "reconnect.backoff.max.ms": 250,
        })  # fmt: skip
        self.topic = topic
        self.sent: list[str] = []
        self.delivered = 0
        self.errors: list[str] = []
        self.stopping = threading.Event()
        self.thread: threading.Thread | None = None

    def _on_delivery(self, error: Any, _msg: Any) -> None:
        if error is not None:
            self.errors.append(str(error))
        else:
            self.delivered += 1

    def produce(self, count: int) -> None:
        for _ in range(count):
            value = f"v{len(self.sent):05d}"
            partition = len(self.sent) % PARTITIONS
            self.producer.produce(self.topic, value=value.encode(), partition=partition, on_delivery=self._on_delivery)
            self.sent.append(value)
        self.producer.flush(120)

    def _run(self) -> None:
        while not self.stopping.is_set():
            self.produce(4)

    def start(self) -> None:
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def stop(self) -> None:
        self.stopping.set()
        if self.thread is not None:
            self.thread.join(150)
        self.producer.flush(120)


def _wait(query: StreamingQuery, done: Any, what: str) -> None:
    deadline = time.monotonic() + WAIT_S
    while not done():
        assert query.exception() is None, f"query failed while waiting for {what}: {query.exception()}"
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


def test_query_continues_across_broker_crash(spark: SparkSession, broker: SparkBroker, checkpoint: str) -> None:
    """Scenario 44: kill -9 the broker and start it again on the same port and data while a
    ``failOnDataLoss=true`` query runs and an idempotent acks=all producer keeps writing; the query
    reconnects and its output is exactly the produced records: none lost, none repeated, each
    partition's offsets contiguous from 0."""
    topic = broker.topic("restart", PARTITIONS)
    producer = SteadyProducer(broker.bootstrap, topic)
    options = {"subscribe": topic, "startingOffsets": "earliest", **RETRYING}
    query, batches = start_collecting_query(read_stream(spark, broker, options), checkpoint)
    try:
        producer.produce(20)
        query.processAllAvailable()
        producer.start()
        _wait(query, lambda: producer.delivered >= 40, "deliveries before the crash")
        broker.restart(crash=True)
        after = producer.delivered
        _wait(query, lambda: producer.delivered >= after + 20, "deliveries after the restart")
        producer.stop()
        assert producer.errors == []
        assert producer.delivered == len(producer.sent)

        def rows() -> list[Any]:
            return [row for _, batch in list(batches) for row in batch]

        _wait(query, lambda: len(rows()) >= len(producer.sent), f"{len(producer.sent)} records")
        query.processAllAvailable()
        got = rows()
        assert sorted(bytes(r.value).decode() for r in got) == producer.sent
        for p in range(PARTITIONS):
            in_p = sorted((r.offset, bytes(r.value).decode()) for r in got if r.partition == p)
            assert [o for o, _ in in_p] == list(range(len(in_p)))
            assert [v for _, v in in_p] == producer.sent[p::PARTITIONS]
        assert query.exception() is None
    finally:
        producer.stopping.set()
        query.stop()
