"""P8: several producers and a consumer group at once on an RF-3 cluster, end to end.

A topic of ``partitions`` partitions (RF 3, min.insync.replicas=2); ``consumers`` processes join
one consumer group with ``subscribe()`` (librdkafka, classic protocol, auto commit) and
``producers`` processes send 1 KiB records (acks=all, idempotent, linger.ms 5) at a fixed total
``rate``, keyless, spread over every partition. Every process is its own Python process, so no
two clients share an interpreter lock. Order:

1. the consumers start and the runner waits until the group's assignment covers every partition;
2. each producer sends ``warmup_seconds`` of untimed records at the rate (connections, fetch
   sessions, JIT and page cache reach steady state on both brokers), then ``seconds`` of timed
   ones; each value carries its creation time (CLOCK_MONOTONIC), a timed flag, producer and
   sequence numbers;
3. once every producer has flushed, the consumers drain for up to ``drain_seconds`` until they
   hold every timed record, and report latency = receive time − creation time.

Reported: achieved produce rate (MB/s of values over the timed window, all producers; and over
the window plus the producers' final flush, ``acked_rate``/``acked_mb_s``, which falls below the
asked rate once the broker acknowledges more slowly than records are sent), the
consumers' e2e latency p50/p99/max over the timed records, and whether every timed record
arrived (a missing one fails the run). ``python -m compat.bench.p8 <mode> <json spec>`` is one
client process (``produce`` or ``consume``); :func:`run` drives them.
"""

from __future__ import annotations

import json
import os
import resource
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from compat.bench.workloads import percentile

HEAD = struct.Struct(">qBHq")  # creation time (monotonic ns), timed flag, producer number, sequence
GROUP = "p8-group"


def produce(spec: dict[str, Any]) -> dict[str, Any]:
    from confluent_kafka import Producer

    failures: list[str] = []
    producer = Producer({"bootstrap.servers": spec["bootstrap"], "acks": "all", "enable.idempotence": True,
                         "linger.ms": 5, "queue.buffering.max.kbytes": 1_048_576,
                         "on_delivery": lambda err, _m: err is None or failures.append(str(err))})
    producer.list_topics(spec["topic"], timeout=60)
    rate, me, filler = float(spec["rate"]), int(spec["producer"]), os.urandom(1024 - HEAD.size)
    step_s = 0.01  # records are sent in 10 ms slices of the rate: pacing each one costs a core in Python

    def paced(seconds: float, timed: int, first_seq: int) -> tuple[int, float]:
        start, sent = time.monotonic(), 0
        while (elapsed := time.monotonic() - start) < seconds:
            due = int(min(elapsed + step_s, seconds) * rate)
            while sent < due:
                value = HEAD.pack(time.monotonic_ns(), timed, me, first_seq + sent) + filler
                try:
                    producer.produce(spec["topic"], value)
                    sent += 1
                except BufferError:
                    producer.poll(0.01)
            producer.poll(max(0.0, start + (due / rate) - time.monotonic()))
        return sent, time.monotonic() - start

    untimed, _ = paced(float(spec["warmup_seconds"]), 0, 0)
    timed, seconds = paced(float(spec["seconds"]), 1, untimed)
    flush_started = time.monotonic()
    left = producer.flush(120)
    flush_s = time.monotonic() - flush_started  # the acknowledgements the broker still owed at the window's end
    if left or failures:
        raise SystemExit(f"p8 producer {me}: {left} unacknowledged, {len(failures)} failed {failures[:1]}")
    return {"producer": me, "untimed": untimed, "timed": timed, "seconds": seconds, "first_timed": untimed,
            "flush_s": flush_s}


def consume(spec: dict[str, Any]) -> dict[str, Any]:
    from confluent_kafka import Consumer

    consumer = Consumer({"bootstrap.servers": spec["bootstrap"], "group.id": GROUP, "auto.offset.reset": "earliest",
                         "enable.auto.commit": True})
    consumer.subscribe([spec["topic"]])
    stop_file, assigned_file = Path(spec["stop_file"]), Path(spec["assigned_dir"]) / f"consumer-{spec['consumer']}"
    latencies: list[int] = []
    seen: set[tuple[int, int]] = set()
    duplicates = 0
    drain_until = None
    idle_since = time.monotonic()
    while True:
        msg = consumer.poll(0.1)
        now = time.monotonic()
        if msg is None or msg.error() is not None:
            if not assigned_file.exists() and consumer.assignment():
                assigned_file.write_text(str(len(consumer.assignment())))
            if drain_until is None and stop_file.exists():
                drain_until = now + float(spec["drain_seconds"])
            # after the producers are done: stop once idle for a second, or at the drain deadline
            if drain_until is not None and (now >= drain_until or now - idle_since > 1.0):
                break
            continue
        idle_since = now
        created, timed, producer, seq = HEAD.unpack_from(msg.value())
        if not timed:
            continue
        if (producer, seq) in seen:
            duplicates += 1
            continue
        seen.add((producer, seq))
        latencies.append((time.monotonic_ns() - created) // 1000)
    consumer.close()
    return {"consumer": spec["consumer"], "received": len(seen), "duplicates": duplicates, "latencies_us": latencies}


def _spawn(mode: str, spec: dict[str, Any]) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "compat.bench.p8", mode, json.dumps(spec)],
                            stdout=subprocess.PIPE, text=True, cwd=Path(__file__).resolve().parents[2])


def _result(proc: subprocess.Popen[str], timeout: float, what: str) -> dict[str, Any]:
    """A client's RESULT line."""
    out, _ = proc.communicate(timeout=timeout)
    if proc.returncode != 0:
        raise RuntimeError(f"P8 {what} exited {proc.returncode}: {out[-2000:]}")
    line = next(line for line in out.splitlines() if line.startswith("RESULT "))
    result: dict[str, Any] = json.loads(line.removeprefix("RESULT "))
    return result


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run(bootstrap: str, topic: str, partitions: int, rate: float, seconds: float, warmup_seconds: float,
        producers: int = 3, consumers: int = 3, drain_seconds: float = 60.0, timeout: float = 300.0) -> dict[str, Any]:
    """One P8 phase against ``bootstrap`` (the topic exists); raises RuntimeError on a failed client."""
    cpu0 = _children_cpu()
    with tempfile.TemporaryDirectory(prefix="kbroker-p8-") as tmp:
        stop_file = Path(tmp) / "producers-done"
        common = {"bootstrap": bootstrap, "topic": topic, "stop_file": str(stop_file), "assigned_dir": tmp,
                  "drain_seconds": drain_seconds}
        readers = [_spawn("consume", {**common, "consumer": i}) for i in range(consumers)]
        procs = list(readers)
        try:
            deadline = time.monotonic() + timeout
            # the group's first assignment: every consumer holds partitions and they cover the topic
            while True:
                held = [Path(tmp, f"consumer-{i}") for i in range(consumers)]
                if all(p.exists() for p in held) and sum(int(p.read_text() or 0) for p in held) >= partitions:
                    break
                if time.monotonic() > deadline or any(r.poll() is not None for r in readers):
                    raise RuntimeError(f"P8: the group did not assign all {partitions} partitions to "
                                       f"{consumers} consumers in time")
                time.sleep(0.1)  # poll interval of a file written by the consumers
            writers = [_spawn("produce", {**common, "producer": i, "rate": rate / producers, "seconds": seconds,
                                          "warmup_seconds": warmup_seconds}) for i in range(producers)]
            procs += writers
            sent = [_result(w, timeout, f"producer {i}") for i, w in enumerate(writers)]
            stop_file.touch()
            got = [_result(r, timeout, f"consumer {i}") for i, r in enumerate(readers)]
        finally:
            for proc in procs:
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
    timed = sum(s["timed"] for s in sent)
    received = sum(g["received"] for g in got)
    if received < timed:
        raise RuntimeError(f"P8: consumers received {received} of {timed} timed records")
    window = max(s["seconds"] for s in sent)
    # sent and acknowledged: a broker that falls behind answers the window's records after it
    acked_window = max(s["seconds"] + s["flush_s"] for s in sent)
    lat = sorted(x for g in got for x in g["latencies_us"])
    return {"records": timed, "mb_s": round(timed * 1024 / window / 1e6, 2), "achieved_rate": round(timed / window),
            "acked_rate": round(timed / acked_window), "acked_mb_s": round(timed * 1024 / acked_window / 1e6, 2),
            "target_rate": rate, "p50_us": percentile(lat, 50), "p99_us": percentile(lat, 99), "max_us": lat[-1],
            "duplicates": sum(g["duplicates"] for g in got),
            "per_consumer": [g["received"] for g in got], "client_cpu_s": round(_children_cpu() - cpu0, 2)}


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    modes = {"produce": produce, "consume": consume}
    print("RESULT " + json.dumps(modes[args[0]](json.loads(args[1]))), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
