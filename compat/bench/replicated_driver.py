"""librdkafka load generator for the replicated benchmarks (P3/P6), one phase per process.

``python -m compat.bench.replicated_driver '<json spec>'`` prints one line ``RESULT {json}``.
Unlike :mod:`compat.bench.rdk_driver` (one partition), every mode spreads records round-robin
over all ``partitions`` of ``topic``:

- ``latency``: the producer first sends a ``burst`` of untimed records as fast as it can (both
  brokers reach steady state: JIT-compiled code paths, page cache, connections and fetch sessions
  of this producer and consumer), then ``warmup`` untimed records at a fixed ``rate``, then
  ``count`` timed ones at that rate; each value starts with its creation time
  (``time.monotonic_ns()``, just before ``produce()``) and a sequence number. A consumer in its
  own process (``receive`` mode; ``consumer: "thread"`` puts it in a thread of the producer's
  process instead, as this benchmark did before) ``assign()``s every partition from offset 0
  (no group membership, no commits) and records receive time − creation time (CLOCK_MONOTONIC
  is one clock for the machine). Timing starts only once the consumer has received every
  untimed record.
- ``produce``: ``count`` records as fast as the producer takes them; seconds from the first
  ``produce()`` to the end of ``flush()``.

Producer settings come from ``config`` (the runner passes acks=all, idempotence on).
"""

from __future__ import annotations

import json
import queue
import struct
import subprocess
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

    def __init__(self, spec: dict[str, Any], total: int, untimed: int) -> None:
        super().__init__(daemon=True)
        self.total, self.untimed = total, untimed
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

    def wait_untimed(self, deadline: float) -> bool:
        return self.wait_for(self.untimed, deadline)

    def finish(self, deadline: float) -> dict[str, Any]:
        """Wait for every record (or the deadline); the timed records' latencies in µs and counts."""
        self.wait_for(self.total, deadline)
        self.stopping.set()
        self.join(10)
        self.consumer.close()
        return {"latencies_us": [ns // 1000 for ns in self.latency_ns[self.untimed:] if ns is not None],
                "received": self.received, "duplicates": self.duplicates, "errors": self.errors[:3]}


class ReceiverProcess:
    """A ``Receiver`` in a process of its own (``receive`` mode), so the consumer shares no
    interpreter lock with the producer; it says ``UNTIMED`` once it has every untimed record."""

    def __init__(self, spec: dict[str, Any], total: int, untimed: int) -> None:
        child = {**spec, "mode": "receive", "total": total, "untimed": untimed}
        self.proc = subprocess.Popen([sys.executable, "-m", "compat.bench.replicated_driver", json.dumps(child)],
                                     stdout=subprocess.PIPE, text=True)
        self.lines: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line.strip())
        self.lines.put("EOF")

    def _line(self, prefix: str, deadline: float) -> str | None:
        while True:
            try:
                line = self.lines.get(timeout=max(0.001, deadline - time.monotonic()))
            except queue.Empty:
                return None
            if line.startswith(prefix):
                return line
            if line == "EOF":
                return None

    def start(self) -> None:
        """Running from construction; here for the Receiver's interface."""

    def wait_untimed(self, deadline: float) -> bool:
        return self._line("UNTIMED", deadline) is not None

    def finish(self, deadline: float) -> dict[str, Any]:
        line = self._line("RESULT ", deadline)
        if line is None:
            self.proc.kill()
            self.proc.wait()
            return {"latencies_us": [], "received": 0, "duplicates": 0, "errors": ["consumer process gave no result"]}
        self.proc.wait(30)
        result: dict[str, Any] = json.loads(line.removeprefix("RESULT "))
        return result


def receive(spec: dict[str, Any]) -> dict[str, Any]:
    """``receive`` mode: the consumer side of ``latency`` in its own process."""
    receiver = Receiver(spec, int(spec["total"]), int(spec["untimed"]))
    deadline = time.monotonic() + float(spec.get("timeout", 600))
    receiver.start()
    if receiver.wait_untimed(deadline):
        print("UNTIMED", flush=True)
    return receiver.finish(deadline)


def latency(spec: dict[str, Any]) -> dict[str, Any]:
    values = read_values(Path(spec["payload"]))
    topic, partitions, rate = spec["topic"], int(spec["partitions"]), float(spec["rate"])
    count, warmup, burst = int(spec["count"]), int(spec["warmup"]), int(spec.get("burst", 0))
    untimed = burst + warmup
    # one deadline for the whole phase, so a stalled cluster fails here with the counts below
    # rather than being killed by the runner's timeout without them
    deadline = time.monotonic() + float(spec.get("timeout", 600))
    failures: list[KafkaError] = []
    acked_ns: list[int] = []  # produce() → acknowledgement, timed records only
    warm_acked_ns: list[int] = []  # the same for the paced warm-up: was the cluster steady before timing?

    def on_ack(err: KafkaError | None, msg: Any) -> None:
        if err is not None:
            failures.append(err)
            return
        created, seq = HEAD.unpack_from(msg.value())
        if seq >= untimed:
            acked_ns.append(time.monotonic_ns() - created)
        elif seq >= burst:
            warm_acked_ns.append(time.monotonic_ns() - created)

    producer = _producer({**spec, "config": {**spec["config"], "delivery.report.only.error": False}}, failures)
    kind = Receiver if spec.get("consumer", "process") == "thread" else ReceiverProcess
    receiver = kind(spec, untimed + count, untimed)
    receiver.start()
    interval_ns = int(1e9 / rate)

    def send(first: int, last: int, paced: bool) -> tuple[float, int]:
        """Records first..last-1, at the fixed rate if ``paced``; returns (seconds, worst lateness in ns)."""
        start = next_send = time.monotonic_ns()
        worst_late = 0
        for seq in range(first, last):
            now = time.monotonic_ns()
            while paced and now < next_send:  # poll() serves delivery reports and may return before the timeout
                producer.poll((next_send - now) / 1e9)
                now = time.monotonic_ns()
            worst_late = max(worst_late, now - next_send)
            value = HEAD.pack(time.monotonic_ns(), seq) + values[seq % len(values)][HEAD.size:]
            while True:
                try:
                    producer.produce(topic, value, partition=seq % partitions, on_delivery=on_ack)
                    break
                except BufferError:  # the burst filled the local queue: let the producer drain it
                    producer.poll(0.05)
            next_send += interval_ns
        return (time.monotonic_ns() - start) / 1e9, worst_late

    send(0, burst, paced=False)
    producer.flush(max(0.0, deadline - time.monotonic()))  # the paced warm-up must not queue behind the burst
    send(burst, untimed, paced=True)
    left = producer.flush(max(0.0, deadline - time.monotonic()))
    if not receiver.wait_untimed(deadline):
        _fail(f"latency: {left} untimed records unacknowledged, {len(failures)} failed {failures[:1]}; consumer "
              f"did not receive all {untimed} untimed records in time")
    seconds, worst_late = send(untimed, untimed + count, paced=True)
    remaining = producer.flush(max(0.0, deadline - time.monotonic()))
    got = receiver.finish(deadline)
    if remaining or failures or got["received"] < untimed + count:
        _fail(f"latency: {remaining} unacknowledged, {len(failures)} failed {failures[:1]}, received "
              f"{got['received']} of {untimed + count}; consumer errors {got['errors']}")
    acked = sorted(ns // 1000 for ns in acked_ns)
    warm = sorted(ns // 1000 for ns in warm_acked_ns[len(warm_acked_ns) // 2:])  # its second half
    return {"records": count, "bytes": count * len(values[0]), "send_seconds": seconds,
            "achieved_rate": count / seconds, "worst_send_lateness_ms": worst_late / 1e6,
            "received": len(got["latencies_us"]), "duplicates": got["duplicates"],
            "latencies_us": got["latencies_us"], "ack_p50_us": acked[len(acked) // 2],
            "ack_p99_us": acked[(len(acked) * 99 - 1) // 100], "ack_max_us": acked[-1],
            "warmup_ack_p50_us": warm[len(warm) // 2] if warm else None}


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


MODES = {"latency": latency, "produce": produce, "receive": receive}


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    spec = json.loads(args[0])
    print("RESULT " + json.dumps(MODES[spec["mode"]](spec)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
