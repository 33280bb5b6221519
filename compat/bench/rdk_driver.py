"""librdkafka load generator (through confluent-kafka), run as its own process.

``python -m compat.bench.rdk_driver '<json spec>'`` runs one phase and prints one line
``RESULT {json}``. Modes:

- ``produce``: ``count`` records cycled from the payload file to partition 0 of ``topic`` with the
  producer settings in ``config``; seconds from the first ``produce()`` to the end of ``flush()``.
- ``consume``: reads ``count`` records from offset 0 (``assign``, no group membership).
- ``latency``: one producer sending at ``rate`` records/s (first 8 value bytes = send time in
  ns) and one consumer on the same partition; per-record publish→receive latency in µs for
  ``count`` records after ``warmup`` untimed ones.

The payload values are read from the file that ProducerPerformance also uses, so both clients
send the same bytes. ``rdkafka_performance`` (librdkafka's C tool) is not packaged by Debian
(its example source needs librdkafka's private headers), hence Python; for 100-byte records the
Python loop, not the broker, can be the limit, and the report says so where it matters.
"""

from __future__ import annotations

import json
import struct
import sys
import time
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition

from compat.bench.payload import read_values

STAMP = struct.Struct(">q")


def _fail(message: str) -> None:
    print(f"rdk_driver: {message}", file=sys.stderr, flush=True)
    sys.exit(1)


def produce(spec: dict[str, Any]) -> dict[str, Any]:
    values = read_values(Path(spec["payload"]))
    count, topic = int(spec["count"]), spec["topic"]
    failures: list[KafkaError] = []

    def on_error(err: KafkaError | None, _msg: object) -> None:
        if err is not None:
            failures.append(err)

    producer = Producer({
        "bootstrap.servers": spec["bootstrap"],
        "queue.buffering.max.messages": 1_000_000,
        "queue.buffering.max.kbytes": 1_048_576,
        "delivery.report.only.error": True,
        "on_delivery": on_error,
        **spec["config"],
    })
    producer.list_topics(topic, timeout=30)  # connect and learn the leader before timing
    nvalues = len(values)
    send = producer.produce
    total = 0
    started = time.perf_counter()
    for i in range(count):
        value = values[i % nvalues]
        total += len(value)
        try:
            send(topic, value, partition=0)
        except BufferError:
            producer.poll(0.05)
            send(topic, value, partition=0)
        if not i & 0x3FFF:
            producer.poll(0)
    remaining = producer.flush(float(spec.get("timeout", 600)))
    seconds = time.perf_counter() - started
    if remaining or failures:
        _fail(f"produce: {remaining} unacknowledged, {len(failures)} failed {failures[:1]}")
    return {"records": count, "bytes": total, "seconds": seconds}


def _consumer(spec: dict[str, Any]) -> Consumer:
    return Consumer({
        "bootstrap.servers": spec["bootstrap"],
        "group.id": f"bench-{spec['topic']}",  # required by librdkafka; assign() joins no group
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
        **spec.get("config", {}),
    })


def consume(spec: dict[str, Any]) -> dict[str, Any]:
    count, topic = int(spec["count"]), spec["topic"]
    consumer = _consumer(spec)
    deadline = time.monotonic() + float(spec.get("timeout", 600))
    seen = total = 0
    started = time.perf_counter()
    consumer.assign([TopicPartition(topic, 0, 0)])
    while seen < count:
        if time.monotonic() > deadline:
            _fail(f"consume: {seen} of {count} records before the timeout")
        for msg in consumer.consume(10_000, timeout=1.0):
            if msg.error() is not None:
                _fail(f"consume: {msg.error()}")
            total += len(msg)
            seen += 1
    seconds = time.perf_counter() - started
    consumer.close()
    return {"records": seen, "bytes": total, "seconds": seconds}


def latency(spec: dict[str, Any]) -> dict[str, Any]:
    values = read_values(Path(spec["payload"]))
    wanted, topic, rate = int(spec["count"]), spec["topic"], float(spec["rate"])
    warmup = int(spec.get("warmup", 0))
    count = wanted + warmup
    producer = Producer({"bootstrap.servers": spec["bootstrap"], "acks": 1, "linger.ms": 0})
    consumer = _consumer(spec)
    consumer.assign([TopicPartition(topic, 0, -1)])  # OFFSET_END
    deadline = time.monotonic() + 30
    got_sentinel = False
    while not got_sentinel:  # prove the consumer is positioned before timing anything
        producer.produce(topic, b"sentinel", partition=0)
        producer.flush(10)
        msg = consumer.poll(1.0)
        got_sentinel = msg is not None and msg.error() is None and msg.value() == b"sentinel"
        if time.monotonic() > deadline:
            _fail("latency: consumer never saw the sentinel")
    latencies: list[int] = []
    interval_ns = int(1e9 / rate)
    next_send = time.perf_counter_ns()
    sent = 0
    deadline = time.monotonic() + count / rate + 60
    while len(latencies) < count and time.monotonic() < deadline:
        now = time.perf_counter_ns()
        if sent < count and now >= next_send:
            value = values[sent % len(values)]
            producer.produce(topic, STAMP.pack(time.perf_counter_ns()) + value[8:], partition=0)
            producer.poll(0)
            sent += 1
            next_send += interval_ns
            continue
        wait = (next_send - now) / 1e9 if sent < count else 0.1
        msg = consumer.poll(max(wait, 0.0))
        if msg is not None and msg.error() is None and len(msg) >= 8 and msg.value() != b"sentinel":
            latencies.append((time.perf_counter_ns() - STAMP.unpack_from(msg.value())[0]) // 1000)
    producer.flush(10)
    consumer.close()
    if len(latencies) < count:
        _fail(f"latency: received {len(latencies)} of {count}")
    return {"records": wanted, "bytes": wanted * len(values[0]), "latencies_us": latencies[warmup:]}


MODES = {"produce": produce, "consume": consume, "latency": latency}


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    spec = json.loads(args[0])
    result = MODES[spec["mode"]](spec)
    print("RESULT " + json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
