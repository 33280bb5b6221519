"""librdkafka load generator for the replicated benchmarks (P3/P6), one phase per process.

``python -m compat.bench.replicated_driver '<json spec>'`` prints one line ``RESULT {json}``.
Unlike :mod:`compat.bench.rdk_driver` (one partition), every mode spreads records round-robin
over all ``partitions`` of ``topic``:

- ``latency``: a producer thread sends at a fixed ``rate`` (``warmup`` untimed records, then
  ``count`` timed ones); each value starts with its creation time (``time.monotonic_ns()``, just
  before ``produce()``) and a sequence number. A consumer thread ``assign()``s every partition
  from offset 0 (no group membership, no commits: kbroker's cluster mode has no group
  coordinator yet) and records receive time − creation time. Timing starts only once the
  consumer has received every warm-up record, so each fetch session is established first.
- ``produce``: ``count`` records as fast as the producer takes them; seconds from the first
  ``produce()`` to the end of ``flush()``.

Producer settings come from ``config`` (the runner passes acks=all, idempotence on).
"""

from __future__ import annotations

import json
import struct
import sys
import threading
import time
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition

from compat.bench.payload import read_values

HEAD = struct.Struct(">qq")  # creation time (monotonic ns, one clock for the whole machine), sequence


def _fail(message: str) -> None:
    print(f"replicated_driver: {message}", file=sys.stderr, flush=True)
    sys.exit(1)


def _producer(spec: dict[str, Any], failures: list[KafkaError]) -> Producer:
    def on_delivery(err: KafkaError | None, _msg: object) -> None:
        if err is not None:
            failures.append(err)

    producer = Producer({
        "bootstrap.servers": spec["bootstrap"],
        "queue.buffering.max.messages": 1_000_000,
        "queue.buffering.max.kbytes": 1_048_576,
        "delivery.report.only.error": True,
        "on_delivery": on_delivery,
        **spec["config"],
    })
    producer.list_topics(spec["topic"], timeout=60)  # connect and learn the leaders before timing
    return producer


class Receiver(threading.Thread):
    """Consumes every partition from offset 0 and keeps one latency per sequence number."""

    def __init__(self, spec: dict[str, Any], total: int) -> None:
        super().__init__(daemon=True)
        self.total = total
        self.latency_ns: list[int | None] = [None] * total
        self.received = self.duplicates = 0
        self.errors: list[str] = []
        self.done = threading.Event()
        self.stopping = threading.Event()
        self.progress = threading.Condition()
        self.consumer = Consumer({
            "bootstrap.servers": spec["bootstrap"],
            "group.id": f"bench-{spec['topic']}",  # librdkafka requires one; assign() joins no group
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "auto.offset.reset": "earliest",
        })
        self.consumer.assign([TopicPartition(spec["topic"], p, 0) for p in range(int(spec["partitions"]))])

    def run(self) -> None:
        # poll() returns as soon as one record is there; consume(n, timeout) would hold the first
        # record until n had arrived or the timeout ran out, adding up to the timeout to every latency.
        poll, latencies = self.consumer.poll, self.latency_ns
        while not self.stopping.is_set() and self.received < self.total:
            msg = poll(0.1)
            if msg is None:
                continue
            now = time.monotonic_ns()
            if msg.error() is not None:
                self.errors.append(str(msg.error()))
                continue
            created, seq = HEAD.unpack_from(msg.value())
            if latencies[seq] is None:
                latencies[seq] = now - created
                self.received += 1
            else:
                self.duplicates += 1
            with self.progress:
                self.progress.notify_all()
        self.done.set()
        with self.progress:
            self.progress.notify_all()

    def wait_for(self, received: int, deadline: float) -> bool:
        with self.progress:
            return self.progress.wait_for(lambda: self.received >= received or self.done.is_set(),
                                          max(0.0, deadline - time.monotonic()))


def latency(spec: dict[str, Any]) -> dict[str, Any]:
    values = read_values(Path(spec["payload"]))
    topic, partitions, rate = spec["topic"], int(spec["partitions"]), float(spec["rate"])
    count, warmup = int(spec["count"]), int(spec["warmup"])
    # one deadline for the whole phase, so a stalled cluster fails here with the counts below
    # rather than being killed by the runner's timeout without them
    deadline = time.monotonic() + float(spec.get("timeout", 600))
    failures: list[KafkaError] = []
    acked_ns: list[int] = []  # produce() → acknowledgement, timed records only

    def on_ack(err: KafkaError | None, msg: Any) -> None:
        if err is not None:
            failures.append(err)
            return
        created, seq = HEAD.unpack_from(msg.value())
        if seq >= warmup:
            acked_ns.append(time.monotonic_ns() - created)

    producer = _producer({**spec, "config": {**spec["config"], "delivery.report.only.error": False}}, failures)
    receiver = Receiver(spec, count + warmup)
    receiver.start()
    interval_ns = int(1e9 / rate)

    def send(first: int, last: int) -> tuple[float, int]:
        """Records first..last-1 at the fixed rate; returns (seconds, worst lateness in ns)."""
        start = next_send = time.monotonic_ns()
        worst_late = 0
        for seq in range(first, last):
            now = time.monotonic_ns()
            while now < next_send:  # poll() serves delivery reports and may return before the timeout
                producer.poll((next_send - now) / 1e9)
                now = time.monotonic_ns()
            worst_late = max(worst_late, now - next_send)
            value = values[seq % len(values)]
            producer.produce(topic, HEAD.pack(time.monotonic_ns(), seq) + value[HEAD.size:], partition=seq % partitions,
                             on_delivery=on_ack)
            next_send += interval_ns
        return (time.monotonic_ns() - start) / 1e9, worst_late

    send(0, warmup)
    left = producer.flush(max(0.0, deadline - time.monotonic()))
    if not receiver.wait_for(warmup, deadline):
        _fail(f"latency: {left} warm-up records unacknowledged, {len(failures)} failed {failures[:1]}; consumer "
              f"received {receiver.received} of {warmup} warm-up records; consumer errors {receiver.errors[:3]}")
    seconds, worst_late = send(warmup, warmup + count)
    remaining = producer.flush(max(0.0, deadline - time.monotonic()))
    complete = receiver.wait_for(warmup + count, deadline)
    receiver.stopping.set()
    receiver.join(10)
    receiver.consumer.close()
    if remaining or failures or not complete:
        _fail(f"latency: {remaining} unacknowledged, {len(failures)} failed {failures[:1]}, received "
              f"{receiver.received} of {warmup + count}; consumer errors {receiver.errors[:3]}")
    timed = [ns // 1000 for ns in receiver.latency_ns[warmup:] if ns is not None]
    acked = sorted(ns // 1000 for ns in acked_ns)
    return {"records": count, "bytes": count * len(values[0]), "send_seconds": seconds,
            "achieved_rate": count / seconds, "worst_send_lateness_ms": worst_late / 1e6,
            "received": len(timed), "duplicates": receiver.duplicates, "latencies_us": timed,
            "ack_p50_us": acked[len(acked) // 2], "ack_p99_us": acked[(len(acked) * 99 - 1) // 100],
            "ack_max_us": acked[-1]}


def produce(spec: dict[str, Any]) -> dict[str, Any]:
    values = read_values(Path(spec["payload"]))
    topic, partitions, count = spec["topic"], int(spec["partitions"]), int(spec["count"])
    failures: list[KafkaError] = []
    producer = _producer(spec, failures)
    send, nvalues, total = producer.produce, len(values), 0
    started = time.perf_counter()
    for i in range(count):
        value = values[i % nvalues]
        total += len(value)
        try:
            send(topic, value, partition=i % partitions)
        except BufferError:  # the local queue is full: let the producer drain it
            producer.poll(0.05)
            send(topic, value, partition=i % partitions)
        if not i & 0x3FFF:
            producer.poll(0)
    remaining = producer.flush(float(spec.get("timeout", 600)))
    seconds = time.perf_counter() - started
    if remaining or failures:
        _fail(f"produce: {remaining} unacknowledged, {len(failures)} failed {failures[:1]}")
    return {"records": count, "bytes": total, "seconds": seconds}


MODES = {"latency": latency, "produce": produce}


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    spec = json.loads(args[0])
    print("RESULT " + json.dumps(MODES[spec["mode"]](spec)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
