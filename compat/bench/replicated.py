"""``python -m compat.bench.replicated``: P3, P6 and P8 on a 3-broker kbroker cluster and a
3-broker Apache Kafka 4.3.1 cluster (stock JVM), side by side, as kbroker/Kafka ratios.

P3  a topic of 100 partitions, RF 3, min.insync.replicas=2; an idempotent acks=all producer at a
    fixed rate of 1 KiB records with end-to-end latency (consumer receive − creation time carried
    in the value), then a max-throughput produce run (acks=all, large batches) in MB/s
P6  the same with 1000 partitions, plus the time to create the topic and for every partition to
    have a leader on every broker, each node's idle CPU over a window of no traffic, and the
    restart of a broker holding every partition's replica until all ISRs are full again
P8  3 producer processes and a 3-member consumer group over 30 partitions (:mod:`compat.bench.p8`)

Each workload × cluster gets a fresh cluster (``compat.cluster``); runs alternate which cluster
goes first. The load generator is librdkafka (:mod:`compat.bench.replicated_driver`). Broker
CPU is utime+stime from ``/proc`` summed over the three brokers and the controller; the CPU the
rest of the machine used meanwhile is recorded too (the machine is shared). Results go to
``replicated.json`` and ``replicated.md`` in ``--out``.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from compat.bench import p8
from compat.bench.payload import payload_file
from compat.bench.procstat import ToolError, cpu_seconds, machine, result_line, run_tool, system_busy_seconds
from compat.bench.workloads import percentile
from compat.cluster import Cluster, make_cluster
from compat.targets import KAFKA_STOCK_JVM

HERE = Path(__file__).resolve().parent
WORKLOADS = ("P3", "P6", "P8")
TARGETS = ("kbroker", "kafka")
PRODUCER = {"acks": "all", "enable.idempotence": True, "compression.type": "none"}
LATENCY_PRODUCER = {**PRODUCER, "linger.ms": 0}
THROUGHPUT_PRODUCER = {**PRODUCER, "linger.ms": 10, "batch.size": 1_000_000}


@dataclass(frozen=True)
class Scale:
    """How much each workload moves."""

    p3_partitions: int = 100
    p6_partitions: int = 1000
    p8_partitions: int = 30
    p8_rate: float = 6000.0  # records/s over all 3 producers (1 KiB each)
    p8_seconds: float = 30.0  # timed
    p8_warmup_seconds: float = 10.0  # untimed, at the same rate, after the group's assignment
    rate: float = 500.0  # records/s for the latency phase
    latency_seconds: float = 30.0  # timed
    warmup_seconds: float = 4.0  # untimed, at the same rate, before the timed records
    burst: int = 100_000  # untimed records sent as fast as taken before that (steady state first)
    consumer: str = "process"  # the latency consumer's place: its own process, or "thread" of the producer's
    stock_jvm: bool = True  # Kafka nodes with the start scripts' JVM settings (else compat/cluster.py's light ones)
    throughput_bytes: int = 128 << 20  # per throughput run
    idle_seconds: float = 30.0  # P6 idle-CPU window
    timeout: float = 300.0  # per client process

    @classmethod
    def smoke(cls) -> Scale:
        return cls(p3_partitions=10, p6_partitions=20, rate=200.0, latency_seconds=2.0, warmup_seconds=1.0,
                   burst=2000, throughput_bytes=2 << 20, idle_seconds=2.0, timeout=120.0, p8_rate=600.0,
                   p8_seconds=3.0, p8_warmup_seconds=2.0)

    def partitions(self, workload: str) -> int:
        return {"P3": self.p3_partitions, "P6": self.p6_partitions, "P8": self.p8_partitions}[workload]


def _node_cpu(cluster: Cluster) -> dict[int, float]:
    out = {}
    for node_id, node in cluster.nodes.items():
        if node.proc is None or node.proc.poll() is not None:
            raise RuntimeError(f"{cluster.name} node {node_id} is not running; log tail:\n{cluster.log_tail(node_id)}")
        out[node_id] = cpu_seconds(node.proc.pid)
    return out


class Meter:
    """Broker CPU per node and the machine's busy CPU across one phase."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self.cpu0, self.busy0, self.wall0 = _node_cpu(cluster), system_busy_seconds(), time.perf_counter()

    def done(self, client_cpu_s: float = 0.0) -> dict[str, Any]:
        cpu1, busy1, wall = _node_cpu(self.cluster), system_busy_seconds(), time.perf_counter() - self.wall0
        per_node = {str(n): round(cpu1[n] - self.cpu0[n], 3) for n in cpu1}
        brokers = sum(per_node.values())
        other = max(0.0, busy1 - self.busy0 - brokers - client_cpu_s)
        return {"wall_s": round(wall, 3), "broker_cpu_s": round(brokers, 3), "node_cpu_s": per_node,
                "client_cpu_s": round(client_cpu_s, 3), "broker_cpu_share": round(brokers / wall, 3),
                "other_cpu_share": round(other / wall, 3)}


def _client(spec: dict[str, Any], timeout: float) -> tuple[dict[str, Any], float]:
    cmd = [sys.executable, "-m", "compat.bench.replicated_driver", json.dumps({**spec, "timeout": timeout})]
    run = run_tool(cmd, timeout + 90, cwd=HERE.parents[1])  # past the driver's own deadline
    return json.loads(result_line(run.stdout)), run.cpu_s


def create_topic(cluster: Cluster, topic: str, partitions: int, timeout: float) -> dict[str, float]:
    """Create ``topic`` (RF 3, min.insync.replicas=2) and time it: until CreateTopics answers, until
    every broker's Metadata shows a leader for every partition, until every ISR holds 3 replicas."""
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": cluster.bootstrap, "log_level": 4})
    started = time.perf_counter()
    new = NewTopic(topic, num_partitions=partitions, replication_factor=3, config={"min.insync.replicas": "2"})
    admin.create_topics([new], request_timeout=timeout)[topic].result(timeout)
    created = time.perf_counter() - started
    deadline = time.monotonic() + timeout
    leaders_s = None
    last: str = "no answer"
    while True:
        led = full = True
        for broker in cluster.broker_ids:
            try:
                meta = cluster.metadata(broker, [topic], timeout=30.0)
            except OSError as exc:
                led = full = False
                last = f"broker {broker}: {exc!r}"
                continue
            parts = [p for t in meta.topics if t.name == topic and t.error_code == 0 for p in t.partitions]
            with_leader = [p for p in parts if p.leader_id >= 0 and p.error_code == 0]
            led &= len(with_leader) == partitions
            full &= led and all(len(p.isr_nodes) == 3 for p in with_leader)
            last = f"broker {broker}: {len(with_leader)} of {partitions} partitions with a leader"
        now = time.perf_counter() - started
        if led and leaders_s is None:
            leaders_s = now
        if full:
            return {"create_s": round(created, 3), "leaders_s": round(leaders_s or now, 3), "isr_full_s": round(now, 3)}
        if time.monotonic() > deadline:
            raise RuntimeError(f"{cluster.name}: {topic} not fully led/replicated within {timeout:.0f} s ({last})")
        time.sleep(0.05)  # poll interval of a measurement, not a synchronisation


def isr_full(cluster: Cluster, topic: str, partitions: int, brokers: list[int]) -> bool:
    """Whether every broker of ``brokers`` answers Metadata with all ``partitions`` led and ISR = 3."""
    for broker in brokers:
        try:
            meta = cluster.metadata(broker, [topic], timeout=30.0)
        except OSError:
            return False
        parts = [p for t in meta.topics if t.name == topic and t.error_code == 0 for p in t.partitions]
        if len(parts) != partitions or not all(p.leader_id >= 0 and len(p.isr_nodes) == 3 for p in parts):
            return False
    return True


def _short_isrs(cluster: Cluster, topic: str) -> str:
    """Per broker's Metadata: how many partitions have an ISR under 3, by leader, and who is missing."""
    out = []
    for broker in cluster.broker_ids:
        try:
            meta = cluster.metadata(broker, [topic], timeout=10.0)
        except OSError as exc:
            out.append(f"broker {broker}: {exc!r}")
            continue
        short: dict[tuple[int, tuple[int, ...]], int] = {}
        for t in meta.topics:
            for p in t.partitions:
                if len(p.isr_nodes) < 3:
                    key = (p.leader_id, tuple(sorted(set(p.replica_nodes) - set(p.isr_nodes))))
                    short[key] = short.get(key, 0) + 1
        out.append(f"broker {broker} sees " + (", ".join(f"{n} led by {lead} missing {miss}"
                                                          for (lead, miss), n in short.items()) or "all full"))
    return "; ".join(out)


def restart_until_isr(cluster: Cluster, topic: str, partitions: int, timeout: float) -> dict[str, Any]:
    """Stop one broker (SIGTERM: controlled shutdown) holding a replica of every partition, start it
    again, and time until every partition's ISR holds 3 replicas again on every broker's Metadata."""
    broker = cluster.broker_ids[-1]
    started = time.perf_counter()
    cluster.stop(broker)
    stopped = time.perf_counter()
    cluster.start_node(broker)
    listening = time.perf_counter()
    deadline = time.monotonic() + timeout
    while not isr_full(cluster, topic, partitions, cluster.broker_ids):
        if time.monotonic() > deadline:
            raise RuntimeError(f"{cluster.name}: ISR of {topic} not full {timeout:.0f} s after broker {broker} "
                               f"restarted: {_short_isrs(cluster, topic)}")
        time.sleep(0.05)  # poll interval of a measurement
    done = time.perf_counter()
    return {"broker": broker, "stop_s": round(stopped - started, 2), "listening_s": round(listening - stopped, 2),
            "isr_full_s": round(done - stopped, 2)}


def run_workload(name: str, workload: str, run: int, scale: Scale, root: Path, log: Callable[[str], None]) -> dict:
    """One fresh cluster of ``name``: create the topic, (P6: idle CPU), latency, throughput."""
    workdir = root / f"{name}-{workload}-run{run}"
    shutil.rmtree(workdir, ignore_errors=True)
    cluster = make_cluster(name, workdir, stock_jvm=scale.stock_jvm)
    partitions = scale.partitions(workload)
    payload = payload_file(root / "payloads", 1024)
    topic = f"{workload.lower()}-bench"
    sample: dict[str, Any] = {"workload": workload, "target": name, "run": run, "partitions": partitions}
    try:
        started = time.perf_counter()
        cluster.start()
        sample["start_s"] = round(time.perf_counter() - started, 1)
        meter = Meter(cluster)
        sample["create"] = {**create_topic(cluster, topic, partitions, scale.timeout), **meter.done()}
        log(f"{name} {workload} run {run}: cluster up in {sample['start_s']} s; {partitions} partitions created in "
            f"{sample['create']['create_s']} s, leaders {sample['create']['leaders_s']} s, "
            f"ISR=3 {sample['create']['isr_full_s']} s")
        if workload == "P8":
            meter = Meter(cluster)
            res = p8.run(cluster.bootstrap, topic, partitions, scale.p8_rate, scale.p8_seconds,
                         scale.p8_warmup_seconds, timeout=scale.timeout)
            sample["p8"] = {**res, **meter.done(res["client_cpu_s"])}
            s = sample["p8"]
            log(f"  P8 3 producers + 3-member group at {scale.p8_rate:.0f}/s: {s['mb_s']} MB/s, e2e p50 "
                f"{s['p50_us']} µs p99 {s['p99_us']} µs; brokers {s['broker_cpu_share']:.0%} of a core, "
                f"clients {s['client_cpu_s'] / s['wall_s']:.0%}, others {s['other_cpu_share']:.0%}")
            return sample
        if workload == "P6":
            meter = Meter(cluster)
            time.sleep(scale.idle_seconds)  # the measured window of no traffic
            sample["idle"] = meter.done()
            log(f"  idle {scale.idle_seconds:.0f} s: node CPU-s {sample['idle']['node_cpu_s']}")
        warmup = max(1, int(scale.rate * scale.warmup_seconds))
        count = int(scale.rate * scale.latency_seconds)
        spec = {"mode": "latency", "bootstrap": cluster.bootstrap, "topic": topic, "partitions": partitions,
                "rate": scale.rate, "count": count, "warmup": warmup, "burst": scale.burst, "consumer": scale.consumer,
                "payload": str(payload), "config": LATENCY_PRODUCER}
        meter = Meter(cluster)
        res, client_cpu = _client(spec, scale.timeout)
        lat = sorted(res.pop("latencies_us"))
        sample["latency"] = {**res, "p50_us": percentile(lat, 50), "p99_us": percentile(lat, 99), "max_us": lat[-1],
                             "min_us": lat[0], **meter.done(client_cpu)}
        s = sample["latency"]
        log(f"  latency at {scale.rate:.0f}/s (achieved {s['achieved_rate']:.0f}/s): p50 {s['p50_us']} µs p99 "
            f"{s['p99_us']} µs max {s['max_us']} µs; ack p50 {s['ack_p50_us']} µs (end of the paced warm-up "
            f"{s['warmup_ack_p50_us']} µs); brokers {s['broker_cpu_share']:.0%} of a core, "
            f"others {s['other_cpu_share']:.0%}")
        spec = {"mode": "produce", "bootstrap": cluster.bootstrap, "topic": topic, "partitions": partitions,
                "count": scale.throughput_bytes // 1024, "payload": str(payload), "config": THROUGHPUT_PRODUCER}
        meter = Meter(cluster)
        res, client_cpu = _client(spec, scale.timeout)
        usage = meter.done(client_cpu)
        sample["throughput"] = {**res, "mb_s": round(res["bytes"] / res["seconds"] / 1e6, 2),
                                "broker_cpu_s_per_gb": round(usage["broker_cpu_s"] / (res["bytes"] / 1e9), 2),
                                **usage}
        s = sample["throughput"]
        log(f"  throughput: {s['mb_s']} MB/s, {s['broker_cpu_s_per_gb']} broker CPU-s/GB, brokers "
            f"{s['broker_cpu_share']:.0%} of a core, client {s['client_cpu_s'] / s['wall_s']:.0%}, "
            f"others {s['other_cpu_share']:.0%}")
        if workload == "P6":
            # 120 s at most: Kafka needs under 10 s; a broker that never rejoins must not eat the run
            sample["restart"] = restart_until_isr(cluster, topic, partitions, min(scale.timeout, 120.0))
            log(f"  restart of broker {sample['restart']['broker']} ({partitions} replicas): stopped in "
                f"{sample['restart']['stop_s']} s, all ISR=3 again {sample['restart']['isr_full_s']} s after its start")
    except (ToolError, RuntimeError, OSError) as exc:
        sample["error"] = f"{type(exc).__name__}: {exc}"[-4000:]
        log(f"{name} {workload} run {run}: FAILED: {sample['error']}")
    finally:
        cluster.close()
        shutil.rmtree(workdir, ignore_errors=True)
    return sample


NOISY_OTHER_CORES = 0.3  # other load above which a latency phase is flagged in the report

# (section, key, label, lower is better for kbroker)
METRICS = [
    ("create", "create_s", "create topic s", True),
    ("create", "leaders_s", "all leaders s", True),
    ("create", "isr_full_s", "all ISR=3 s", True),
    ("idle", "broker_cpu_share", "idle CPU, cores (4 nodes)", True),
    ("latency", "achieved_rate", "achieved rate rec/s", False),
    ("latency", "p50_us", "latency p50 µs", True),
    ("latency", "p99_us", "latency p99 µs", True),
    ("latency", "max_us", "latency max µs", True),
    ("latency", "warmup_ack_p50_us", "produce→ack p50 µs, end of the paced warm-up", True),
    ("latency", "ack_p50_us", "produce→ack p50 µs", True),
    ("latency", "ack_p99_us", "produce→ack p99 µs", True),
    ("latency", "broker_cpu_share", "brokers' CPU at fixed rate, cores", True),
    ("throughput", "mb_s", "max produce MB/s", False),
    ("throughput", "broker_cpu_s_per_gb", "brokers' CPU-s/GB", True),
    ("restart", "isr_full_s", "restart of a broker: all ISR=3 again s", True),
    ("p8", "mb_s", "produce MB/s (3 producers)", False),
    ("p8", "p50_us", "e2e p50 µs (3-member group)", True),
    ("p8", "p99_us", "e2e p99 µs (3-member group)", True),
    ("p8", "broker_cpu_share", "brokers' CPU, cores", True),
]


def table(samples: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per workload × metric: per-cluster medians and the kbroker/Kafka ratio spread over the runs
    where both clusters have the figure."""
    # a failed sample still contributes the phases it finished (a P6 run failing in its latency
    # phase has its create and idle figures)
    ok = {(s["workload"], s["target"], s["run"]): s for s in samples}
    rows = []
    for workload in WORKLOADS:
        runs = sorted({r for (w, t, r) in ok if w == workload and t == "kbroker"}
                      & {r for (w, t, r) in ok if w == workload and t == "kafka"})
        for section, key, label, lower in METRICS:
            pairs = [(ok[workload, "kbroker", r].get(section, {}).get(key), ok[workload, "kafka", r].get(section, {})
                      .get(key)) for r in runs]
            pairs = [(a, b) for a, b in pairs if a is not None and b is not None]
            if not pairs:
                continue
            ratios = [a / b for a, b in pairs if b]
            rows.append({"workload": workload, "metric": label, "runs": len(pairs), "lower_is_better": lower,
                         "kbroker": statistics.median(a for a, _ in pairs),
                         "kafka": statistics.median(b for _, b in pairs),
                         "ratio": {"min": min(ratios), "median": statistics.median(ratios), "max": max(ratios)}
                         if ratios else None})
    return rows


def _fmt(value: float) -> str:
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.3g}"


def _brief(error: str) -> str:
    """An error for a table cell: its first line, cut, and its last line (a tool's last stderr line)."""
    lines = [line.strip() for line in error.strip().splitlines() if line.strip()]
    text = lines[0][:160] + (f" … {lines[-1][-240:]}" if len(lines) > 1 else "")
    return "`" + text.replace("|", "/").replace("`", "'") + "`"


def markdown(rows: list[dict[str, Any]], samples: list[dict[str, Any]], meta: dict[str, Any]) -> str:
    lines = [
        "# Replicated cluster benchmarks (P3, P6, P8) — kbroker vs Apache Kafka 4.3.1",
        "",
        f"`{meta['command']}` — {meta['runs']} run(s), {meta['started']}, {meta['duration_s'] / 60:.1f} min. "
        f"Scale: {meta['scale']}.",
        "",
        "Both clusters: 1 controller (node 100, 127.0.0.21) + 3 brokers (127.0.0.11-13) from `compat/cluster.py`, "
        "topic RF 3, min.insync.replicas=2; a fresh cluster per workload × run, runs alternating which cluster "
        "goes first. Ratio = kbroker / Kafka per run (min / median / max); the last column says which way is "
        "better. CPU = utime+stime from /proc summed over the 3 brokers + controller. Numbers are medians.",
        "",
        "| workload | metric | kbroker | Kafka | ratio min / med / max | better |",
        "|---|---|---:|---:|---|---|",
    ]
    for r in rows:
        ratio = r["ratio"]
        ratio_s = f"{ratio['min']:.2f} / **{ratio['median']:.2f}** / {ratio['max']:.2f}" if ratio else "–"
        lines.append(f"| {r['workload']} | {r['metric']} | {_fmt(r['kbroker'])} | {_fmt(r['kafka'])} | {ratio_s} | "
                     f"{'lower' if r['lower_is_better'] else 'higher'} |")
    # Latency on two shared cores follows the other load: kbroker's four single-threaded processes
    # queue behind it (P3 at 15fa7f9 read 117 ms p50 at 0.41 cores of others, 3 ms on a quiet machine).
    noisy = [f"{s['workload']} {s['target']} run {s['run']} ({s[phase]['other_cpu_share']:.2f})" for s in samples
             for phase in ("latency", "p8") if s.get(phase, {}).get("other_cpu_share", 0) > NOISY_OTHER_CORES]
    lines += ["", f"Latency phases with more than {NOISY_OTHER_CORES} cores of other load (their latencies measure "
              f"the machine's contention more than the broker): {', '.join(noisy) or 'none'}."]
    lines += ["", "## Per run", "", "| workload | cluster | run | start s | leaders s | idle CPU-s per node | "
              "rate | e2e p50 / p99 / max µs | ack p50 / p99 µs | MB/s | CPU-s/GB | others' CPU (lat / thr) |",
              "|---|---|---|---:|---:|---|---:|---|---|---:|---:|---|"]
    for s in samples:
        idle = s.get("idle", {}).get("node_cpu_s", "–")
        head = f"| {s['workload']} | {s['target']} | {s['run']} | {s.get('start_s', '–')} | " \
               f"{s.get('create', {}).get('leaders_s', '–')} | {idle} |"
        if "error" in s:
            lines.append(f"{head} failed: {_brief(s['error'])} | | | | | |")
            continue
        if s["workload"] == "P8":
            p = s["p8"]
            lines.append(f"{head} {p['achieved_rate']} | {p['p50_us']} / {p['p99_us']} / {p['max_us']} | – | "
                         f"{p['mb_s']} | – | {p['other_cpu_share']:.2f} |")
            continue
        lat, thr = s["latency"], s["throughput"]
        lines.append(f"{head} {lat['achieved_rate']:.0f} | {lat['p50_us']} / {lat['p99_us']} / {lat['max_us']} | "
                     f"{lat['ack_p50_us']} / {lat['ack_p99_us']} | "
                     f"{thr['mb_s']} | {thr['broker_cpu_s_per_gb']} | {lat['other_cpu_share']:.2f} / "
                     f"{thr['other_cpu_share']:.2f} |")
    lines += ["", "## Machine", ""] + [f"- {k}: {v}" for k, v in meta["machine"].items()]
    lines += ["", "## Settings", ""] + [f"- {line}" for line in meta["notes"]]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m compat.bench.replicated", description=__doc__.split("\n")[0])
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, one run")
    parser.add_argument("--runs", type=int, help="runs per cluster (2; smoke: 1)")
    parser.add_argument("--workloads", default=",".join(WORKLOADS), help="comma list of P3,P6")
    parser.add_argument("--targets", default=",".join(TARGETS), help="clusters, in first-run order")
    parser.add_argument("--rate", type=float, help="fixed rate of the latency phase, records/s (500)")
    parser.add_argument("--latency-seconds", type=float, help="timed seconds of the latency phase (30)")
    parser.add_argument("--throughput-mib", type=int, help="MiB per throughput run (128)")
    parser.add_argument("--idle-seconds", type=float, help="P6 idle-CPU window (30)")
    parser.add_argument("--warmup-seconds", type=float, help="paced untimed seconds after the burst (4); the "
                        "stock-JVM Kafka's ack latency was still falling after 4 s on this machine")
    parser.add_argument("--p8-rate", type=float, help="P8 records/s over the 3 producers (6000)")
    parser.add_argument("--p8-seconds", type=float, help="P8 timed seconds (30; untimed warm-up a third of it)")
    parser.add_argument("--burst", type=int, help="untimed records sent at full speed before the latency phase "
                        "(100000; smoke 2000; 0 = none)")
    parser.add_argument("--consumer", choices=("process", "thread"), help="latency consumer in its own process "
                        "(default) or a thread of the producer's")
    parser.add_argument("--light-jvm", action="store_true", help="Kafka with compat/cluster.py's test JVM flags "
                        "(SerialGC, C1 only, small heaps) instead of the stock start-script settings")
    parser.add_argument("--out", type=Path, default=HERE / "results", help="results directory")
    parser.add_argument("--workdir", type=Path, help="where clusters keep their data (a temp dir)")
    parser.add_argument("--render", action="store_true", help="only rewrite replicated.md from replicated.json")
    args = parser.parse_args(argv)
    if args.render:
        data = json.loads((args.out / "replicated.json").read_text())
        rows = table(data["samples"])
        (args.out / "replicated.json").write_text(json.dumps({**data, "table": rows}, indent=1) + "\n")
        (args.out / "replicated.md").write_text(markdown(rows, data["samples"], data["meta"]))
        return 0
    scale = Scale.smoke() if args.smoke else Scale()
    overrides = {"rate": args.rate, "latency_seconds": args.latency_seconds, "idle_seconds": args.idle_seconds,
                 "throughput_bytes": args.throughput_mib and args.throughput_mib << 20, "p8_rate": args.p8_rate,
                 "warmup_seconds": args.warmup_seconds,
                 "p8_seconds": args.p8_seconds, "p8_warmup_seconds": args.p8_seconds and args.p8_seconds / 3}
    scale = replace(scale, **{k: v for k, v in overrides.items() if v})
    if args.burst is not None:
        scale = replace(scale, burst=args.burst)
    scale = replace(scale, consumer=args.consumer or scale.consumer, stock_jvm=not args.light_jvm)
    runs = args.runs or (1 if args.smoke else 2)
    workloads = [w.strip().upper() for w in args.workloads.split(",") if w.strip()]
    targets = [t.strip() for t in args.targets.split(",") if t.strip()]
    if set(workloads) - set(WORKLOADS) or set(targets) - set(TARGETS):
        parser.error(f"workloads are {WORKLOADS}, targets {TARGETS}")

    def log(line: str) -> None:
        print(line, flush=True)

    started, wall0 = time.strftime("%Y-%m-%d %H:%M:%S %Z"), time.perf_counter()
    samples: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="kbroker-repl-bench-", dir=args.workdir) as tmp:
        desc = machine(Path(tmp))
        for run in range(runs):
            for index, workload in enumerate(workloads):
                # each workload alternates which cluster goes first from run to run
                order = targets if (run + index) % 2 == 0 else targets[::-1]
                samples += [run_workload(name, workload, run, scale, Path(tmp), log) for name in order]
                # results so far, so an interrupted run still leaves its figures behind
                text = write(args.out, samples, scale, runs, desc, started, time.perf_counter() - wall0, argv)
    log(text.split("\n## Per run")[0])
    log(f"wrote {args.out / 'replicated.md'}, {args.out / 'replicated.json'}")
    return 1 if any("error" in s for s in samples) else 0


def write(out: Path, samples: list[dict[str, Any]], scale: Scale, runs: int, desc: dict[str, object],
          started: str, seconds: float, argv: list[str] | None) -> str:
    """Write replicated.json and replicated.md into ``out``; returns the markdown."""
    meta = {
        "command": "python -m compat.bench.replicated " + " ".join(sys.argv[1:] if argv is None else argv),
        "started": started, "duration_s": round(seconds, 1), "runs": runs,
        "scale": ", ".join(f"{k}={v}" for k, v in asdict(scale).items()),
        "machine": {**desc, "kafka": "Apache Kafka 4.3.1 (Maven jars), compat/cluster.py, " + (
            "stock JVM (the start scripts' settings, every node): " + " ".join(KAFKA_STOCK_JVM) if scale.stock_jvm
            else "light test JVM: brokers -Xmx512m SerialGC C1-only, controller -Xmx256m")},
        "notes": NOTES,
    }
    rows = table(samples)
    out.mkdir(parents=True, exist_ok=True)
    (out / "replicated.json").write_text(json.dumps({"meta": meta, "table": rows, "samples": samples},
                                                    indent=1) + "\n")
    text = markdown(rows, samples, meta)
    (out / "replicated.md").write_text(text)
    return text


NOTES = [
    "Load generator: librdkafka through confluent-kafka (`compat/bench/replicated_driver.py`, one Python "
    "process per phase), records round-robin over all partitions by explicit partition number.",
    f"Latency phase: producer {LATENCY_PRODUCER}; values carry their creation time (CLOCK_MONOTONIC, "
    "taken just before produce()) and a sequence number; a consumer in a process of its own assign()s "
    "every partition from offset 0 (no group, no commits), librdkafka consumer defaults (fetch.wait.max.ms "
    "500). Warm-up: a burst of untimed records at full speed through the same producer and consumer, then "
    "4 s of untimed records at the rate (scale: burst, warmup_seconds); all must arrive before the timed "
    "ones are sent. Latency = consumer receive time − creation time. Every record must arrive or the run "
    "fails. produce→ack: creation time to the producer's delivery report (acks=all), which tells a slow "
    "produce path from a slow fetch path.",
    "P8: compat/bench/p8.py — 3 producer processes (acks=all, idempotent, linger.ms 5) at a fixed total "
    "rate, a 3-member consumer group (3 processes, subscribe(), auto commit); timing starts after the "
    "group's assignment covers every partition and an untimed warm-up at the rate; every timed record "
    "must arrive.",
    "P6 restart: SIGTERM (controlled shutdown) of broker 3, which holds a replica of every partition, "
    "then start it again; the figure is from its start to every partition's ISR holding 3 replicas on "
    "every broker's Metadata.",
    f"Throughput phase: producer {THROUGHPUT_PRODUCER}, 1 KiB records as fast as they are taken, into the "
    "same topic after the latency phase; MB = 10^6 bytes of record values.",
    "P6 idle CPU: per node CPU-seconds over the idle window right after every partition's ISR holds 3 "
    "replicas; the table's figure is the 4-node sum divided by the window (cores).",
    "others' CPU: machine busy CPU (/proc/stat) during the phase less the cluster and the client, in cores; "
    "the machine (2 cores) is shared with other sessions, so absolute figures move with it.",
]


if __name__ == "__main__":
    sys.exit(main())
