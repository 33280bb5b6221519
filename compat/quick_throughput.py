"""Quick throughput check: one confluent-kafka producer, then one consumer, against one broker.

``python -m compat.quick_throughput --bootstrap host:port [--mb 200]`` has one job: a fast
sanity figure for kbroker's produce and consume rates. It creates a one-partition topic,
produces ``--mb`` MB of 1 KiB records (half random bytes, half one repeated byte; acks=1,
linger.ms=5, ~1 MB batches, no compression) from a single producer, then reads them all back
with a single consumer (``assign`` from offset 0, no group), and prints records/s and MB/s
(MB = 10^6 bytes of record values) for each phase.

It is not a benchmark: proper side-by-side comparisons with Apache Kafka (several clients,
partitions, codecs, warm-up, repeated runs) belong to ``compat/bench``.
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import time

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

POOL_SIZE = 4096  # distinct record values, cycled (generating random bytes per record costs)


def make_values(record_size: int) -> list[bytes]:
    """``POOL_SIZE`` values: the first half random bytes, the second half one repeated byte."""
    random_part = record_size // 2
    return [
        os.urandom(random_part) + bytes([i % 256]) * (record_size - random_part)
        for i in range(POOL_SIZE)
    ]


def create_topic(bootstrap: str, topic: str, timeout: float) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    new = NewTopic(topic, num_partitions=1, replication_factor=1)
    admin.create_topics([new], request_timeout=timeout)[topic].result(timeout)


def produce(bootstrap: str, topic: str, count: int, values: list[bytes], timeout: float) -> float:
    """Produce ``count`` records; returns the seconds from the first send to the last ack."""
    producer = Producer({
        "bootstrap.servers": bootstrap,
        "acks": 1,
        "linger.ms": 5,
        "batch.size": 1_000_000,
        "compression.type": "none",
        "queue.buffering.max.messages": 1_000_000,
    })
    failures: list[KafkaError] = []

    def on_delivery(err: KafkaError | None, _msg: object) -> None:
        if err is not None:
            failures.append(err)

    deadline = time.monotonic() + timeout
    started = time.perf_counter()
    for i in range(count):
        while True:
            try:
                producer.produce(topic, values[i % POOL_SIZE], partition=0, on_delivery=on_delivery)
                break
            except BufferError:
                # Local queue full: serve delivery reports until there is room again.
                producer.poll(0.1)
                if time.monotonic() > deadline:
                    sys.exit(f"produce: still queue-full after {timeout:.0f} s")
        if i % 10_000 == 0:
            producer.poll(0)
    remaining = producer.flush(max(deadline - time.monotonic(), 0.0))
    elapsed = time.perf_counter() - started
    if remaining:
        sys.exit(f"produce: {remaining} records not acknowledged within {timeout:.0f} s")
    if failures:
        sys.exit(f"produce: {len(failures)} delivery failures, first: {failures[0]}")
    return elapsed


def consume(bootstrap: str, topic: str, count: int, timeout: float) -> tuple[float, int]:
    """Read ``count`` records from offset 0; returns (seconds, value bytes read)."""
    consumer = Consumer({
        "bootstrap.servers": bootstrap,
        # librdkafka requires a group id; with assign() and no commits no group is joined.
        "group.id": f"{topic}-reader",
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
    })
    seen = 0
    size = 0
    deadline = time.monotonic() + timeout
    started = time.perf_counter()
    consumer.assign([TopicPartition(topic, 0, 0)])
    try:
        while seen < count:
            if time.monotonic() > deadline:
                sys.exit(f"consume: only {seen} of {count} records within {timeout:.0f} s")
            for msg in consumer.consume(10_000, timeout=1.0):
                if msg.error() is not None:
                    sys.exit(f"consume: {msg.error()}")
                size += len(msg.value())
                seen += 1
        elapsed = time.perf_counter() - started
    finally:
        consumer.close()
    return elapsed, size


def report(phase: str, count: int, nbytes: int, seconds: float) -> None:
    print(
        f"{phase:8s} {count:>10,d} records in {seconds:7.2f} s: "
        f"{count / seconds:>10,.0f} records/s  {nbytes / seconds / 1e6:8.1f} MB/s",
        flush=True,
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m compat.quick_throughput", description=__doc__.split("\n")[0])
    parser.add_argument("--bootstrap", required=True, help="host:port of the broker")
    parser.add_argument("--mb", type=float, default=200.0, help="MB (10^6 bytes) of values to produce (200)")
    parser.add_argument("--record-size", type=int, default=1024, help="bytes per record value (1024)")
    parser.add_argument("--topic", help="topic to create (default: a fresh random name)")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds allowed per phase (600)")
    args = parser.parse_args(argv)

    topic = args.topic or f"quick-throughput-{random.getrandbits(32):08x}"
    count = max(1, int(args.mb * 1e6) // args.record_size)
    values = make_values(args.record_size)
    create_topic(args.bootstrap, topic, args.timeout)
    print(f"topic {topic}: {count:,d} records of {args.record_size} bytes, one partition", flush=True)

    seconds = produce(args.bootstrap, topic, count, values, args.timeout)
    report("produce", count, count * args.record_size, seconds)
    seconds, nbytes = consume(args.bootstrap, topic, count, args.timeout)
    if nbytes != count * args.record_size:
        sys.exit(f"consume: read {nbytes} value bytes, expected {count * args.record_size}")
    report("consume", count, nbytes, seconds)
    return 0


if __name__ == "__main__":
    sys.exit(main())
