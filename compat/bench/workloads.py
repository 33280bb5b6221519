"""The benchmark workloads and how one broker process runs all of them.

P1  1 KiB records, large batches (1 MB, linger 5 ms), acks=1, no compression
P2  100 B records, 16 KiB batches, linger 0, acks=1
P4  catch-up consume of a backlog (2 GiB of 1 KiB records in the full run), from offset 0
P5  low-rate end-to-end latency: one producer at a fixed rate (acks=1, linger 0), one consumer
P7  as P1 with LZ4-compressed batches; wire MB/s from the bytes the partition's log holds

Each workload runs with each load generator (``java``: Kafka's own tools and client;
``rdk``: librdkafka via confluent-kafka) on its own one-partition topic, with the same client
settings against both brokers. :func:`run_pair` starts a fresh kbroker and a fresh Kafka, warms
them up, and runs each workload × driver on both back to back (alternating which goes first),
returning one :class:`Sample` per workload × driver × broker, including the broker's CPU seconds
over the load generator's run (``/proc/<pid>/stat``) and the CPU other processes used meanwhile.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from compat.bench import drivers
from compat.bench.drivers import Phase
from compat.bench.payload import payload_file
from compat.bench.procstat import cpu_seconds, system_busy_seconds
from compat.targets import KafkaTarget, KbrokerTarget, Target

WORKLOADS = ("P1", "P2", "P4", "P5", "P7")
DRIVERS = ("java", "rdk")
TITLES = {
    "P1": "P1 produce 1 KiB, 1 MB batches, acks=1",
    "P2": "P2 produce 100 B, 16 KiB batches, linger 0",
    "P4": "P4 catch-up consume of the backlog",
    "P5": "P5 end-to-end latency, low rate",
    "P7": "P7 produce 1 KiB, LZ4, 1 MB batches",
}
JAVA_P1 = {"acks": "1", "linger.ms": "5", "batch.size": "1000000", "compression.type": "none",
           "enable.idempotence": "false", "buffer.memory": "268435456"}
RDK_P1 = {"acks": 1, "linger.ms": 5, "batch.size": 1_000_000, "compression.type": "none",
          "enable.idempotence": False}
JAVA_P2 = {"acks": "1", "linger.ms": "0", "batch.size": "16384", "compression.type": "none",
           "enable.idempotence": "false"}
RDK_P2 = {"acks": 1, "linger.ms": 0, "batch.size": 16384, "compression.type": "none",
          "enable.idempotence": False}


@dataclass(frozen=True)
class Scale:
    """How much each workload moves."""

    produce_bytes: int = 1 << 30  # P1 and P7, per driver
    p2_records: int = 2_000_000  # per driver
    backlog_bytes: int = 2 << 30  # P4
    latency_count: int = 3000  # P5, per driver
    latency_rate: float = 200.0  # P5 records/s
    latency_warmup: int = 400  # P5 records sent first and not timed (client JIT, connections)
    warmup_bytes: int = 256 << 20  # untimed, after each broker start
    timeout: float = 900.0  # per load-generator run

    @classmethod
    def smoke(cls) -> Scale:
        return cls(produce_bytes=4 << 20, p2_records=20_000, backlog_bytes=8 << 20, latency_count=50,
                   latency_rate=100.0, latency_warmup=10, warmup_bytes=0, timeout=120.0)


@dataclass
class Sample:
    """One workload × driver × broker × run."""

    workload: str
    driver: str
    target: str
    run: int
    records: int
    logical_bytes: int
    seconds: float
    broker_cpu_s: float
    client_cpu_s: float
    wall_s: float
    other_cpu_s: float = 0.0  # CPU busy on the machine over the phase, less broker and client
    wire_bytes: int | None = None
    latencies_us: list[int] = field(default_factory=list)

    @property
    def mb_s(self) -> float:
        return self.logical_bytes / self.seconds / 1e6

    def summary(self) -> dict[str, Any]:
        """The JSON form: everything but the raw latencies, plus derived figures."""
        out = {k: v for k, v in asdict(self).items() if k != "latencies_us"}
        if self.latencies_us:
            lat = sorted(self.latencies_us)
            out.update(p50_us=percentile(lat, 50), p99_us=percentile(lat, 99), max_us=lat[-1])
        else:
            out["mb_s"] = round(self.mb_s, 2)
            out["broker_cpu_s_per_gb"] = round(self.broker_cpu_s / (self.logical_bytes / 1e9), 3)
            if self.wire_bytes is not None:
                out["wire_mb_s"] = round(self.wire_bytes / self.seconds / 1e6, 2)
        out["broker_cpu_share"] = round(self.broker_cpu_s / self.wall_s, 3)
        out["other_cpu_share"] = round(self.other_cpu_s / self.wall_s, 3)
        return out


def percentile(ordered: list[int], pct: float) -> int:
    """Nearest-rank percentile of an ascending list."""
    rank = max(1, -(-len(ordered) * pct // 100))
    return ordered[int(rank) - 1]


def make_target(name: str, workdir: Path) -> Target:
    """A not yet started broker of kind ``name`` (``kbroker`` or ``kafka``, the Maven jars, stock JVM)."""
    if name == "kafka":
        return KafkaTarget(workdir, stock=True)
    if name == "kbroker":
        return KbrokerTarget(workdir)
    raise ValueError(f"unknown target {name!r}")


def _pid(target: Target) -> int:
    proc = getattr(target, "proc", None)
    if proc is None:
        raise RuntimeError(f"{target.name} has no local process to account CPU for")
    return int(proc.pid)


def log_bytes(target: Target, topic: str) -> int:
    """Bytes in the ``.log`` segments of ``topic``'s partition 0 (Kafka's layout, both brokers)."""
    data_dir: Path = target.data_dir  # type: ignore[attr-defined]
    return sum(p.stat().st_size for p in (data_dir / f"{topic}-0").glob("*.log"))


class Runner:
    """Runs the workloads against one started broker."""

    def __init__(self, target: Target, run: int, scale: Scale, payload_dir: Path,
                 workloads: tuple[str, ...], driver_names: tuple[str, ...], log: Callable[[str], None]) -> None:
        self.target, self.run, self.scale = target, run, scale
        self.workloads, self.driver_names, self.log = workloads, driver_names, log
        self.pid = _pid(target)
        self.b = target.bootstrap
        self.payload_1k = payload_file(payload_dir, 1024)
        self.payload_100 = payload_file(payload_dir, 100)
        self.samples: list[Sample] = []
        self.admin = drivers.admin_client(self.b)

    def topic(self, name: str) -> str:
        drivers.create_topic(self.admin, name)
        return name

    def measure(self, workload: str, driver: str, call: Callable[[], Phase], wire_topic: str | None = None) -> None:
        cpu0, busy0, wall0 = cpu_seconds(self.pid), system_busy_seconds(), time.perf_counter()
        phase = call()
        wall, cpu = time.perf_counter() - wall0, cpu_seconds(self.pid) - cpu0
        other = max(0.0, system_busy_seconds() - busy0 - cpu - phase.client_cpu_s)
        sample = Sample(workload, driver, self.target.name, self.run, phase.records, phase.bytes, phase.seconds,
                        cpu, phase.client_cpu_s, wall, other, latencies_us=phase.latencies_us,
                        wire_bytes=log_bytes(self.target, wire_topic) if wire_topic else None)
        self.samples.append(sample)
        s = sample.summary()
        figure = (f"p50 {s['p50_us']} µs p99 {s['p99_us']} µs" if sample.latencies_us
                  else f"{s['mb_s']:8.1f} MB/s" + (f" (wire {s['wire_mb_s']:.1f})" if "wire_mb_s" in s else ""))
        self.log(f"  {workload} {driver:4s} {self.target.name:7s} run {self.run}: {figure}; broker "
                 f"{cpu:.1f} CPU-s ({s['broker_cpu_share']:.0%} of a core), client {phase.client_cpu_s:.1f} CPU-s, "
                 f"others {s['other_cpu_share']:.0%} of a core")

    def warm_up(self) -> None:
        if self.scale.warmup_bytes <= 0:
            return
        topic, count = self.topic("warmup"), self.scale.warmup_bytes // 1024
        drivers.rdk_produce(self.b, topic, count, self.payload_1k, RDK_P1, self.scale.timeout)
        drivers.rdk_consume(self.b, topic, count, self.scale.timeout)
        if "java" in self.driver_names:
            drivers.java_consume(self.b, topic, min(count, 50_000), self.scale.timeout)

    def prepare(self, workload: str) -> None:
        """Untimed set-up a workload needs (the P4 backlog)."""
        if workload == "P4":
            started = time.perf_counter()
            count = self.scale.backlog_bytes // 1024
            drivers.rdk_produce(self.b, self.topic("p4-backlog"), count, self.payload_1k, RDK_P1, self.scale.timeout)
            self.log(f"  P4 backlog of {self.scale.backlog_bytes / 2**30:.2f} GiB written to {self.target.name} "
                     f"in {time.perf_counter() - started:.1f} s")

    def phase(self, workload: str, driver: str) -> tuple[Callable[[], Phase], str | None]:
        """The load-generator call for ``workload`` × ``driver`` and the topic whose log is the wire size."""
        s, t, java = self.scale, self.scale.timeout, driver == "java"
        if workload == "P4":
            fn = drivers.java_consume if java else drivers.rdk_consume
            return partial(fn, self.b, "p4-backlog", s.backlog_bytes // 1024, t), None
        topic = self.topic(f"{workload.lower()}-{driver}")
        if workload == "P5":
            fn = drivers.java_latency if java else drivers.rdk_latency
            return partial(fn, self.b, topic, s.latency_count, s.latency_rate, self.payload_1k, t,
                           s.latency_warmup), None
        size, count = (100, s.p2_records) if workload == "P2" else (1024, s.produce_bytes // 1024)
        payload = self.payload_100 if size == 100 else self.payload_1k
        java_props, rdk_config = (JAVA_P2, RDK_P2) if workload == "P2" else (JAVA_P1, RDK_P1)
        if workload == "P7":
            java_props = {**java_props, "compression.type": "lz4"}
            rdk_config = {**rdk_config, "compression.type": "lz4"}
        if java:
            call = partial(drivers.java_produce, self.b, topic, count, payload, size, java_props, t)
        else:
            call = partial(drivers.rdk_produce, self.b, topic, count, payload, rdk_config, t)
        return call, (topic if workload == "P7" else None)


def run_pair(names: list[str], run: int, scale: Scale, root: Path, payload_dir: Path, workloads: tuple[str, ...],
             driver_names: tuple[str, ...], log: Callable[[str], None]) -> list[Sample]:
    """Start fresh brokers ``names`` side by side, warm them, then run each workload × driver on one
    and at once on the other, alternating which goes first; stop them and delete their data.

    Both brokers run throughout (an idle one costs ~0-2 % of a core), so each kbroker/Kafka pair
    is measured seconds apart and drifting background load on a shared machine hits both alike.
    """
    runners: dict[str, Runner] = {}
    try:
        for name in names:
            workdir = root / f"{name}-run{run}"
            shutil.rmtree(workdir, ignore_errors=True)
            target = make_target(name, workdir)
            started = time.perf_counter()
            target.start()
            log(f"{name} run {run}: started in {time.perf_counter() - started:.1f} s on {target.bootstrap}")
            runners[name] = Runner(target, run, scale, payload_dir, workloads, driver_names, log)
        for runner in runners.values():
            runner.warm_up()
        step = run
        for workload in workloads:
            for runner in runners.values():
                runner.prepare(workload)
            for driver in driver_names:
                order = names if step % 2 == 0 else names[::-1]
                step += 1
                for name in order:
                    call, wire_topic = runners[name].phase(workload, driver)
                    runners[name].measure(workload, driver, call, wire_topic)
        return [sample for runner in runners.values() for sample in runner.samples]
    finally:
        for runner in runners.values():
            runner.target.close()
            shutil.rmtree(runner.target.workdir, ignore_errors=True)
