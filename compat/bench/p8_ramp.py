"""``python -m compat.bench.p8_ramp``: P8 at the highest rate each broker sustains, kbroker vs Kafka 4.3.1.

P8 (:mod:`compat.bench.p8`: 3 producer processes, acks=all, idempotent, 1 KiB records, and a
3-member consumer group over an RF-3 topic of 30 partitions, min.insync.replicas=2) is run in
steps of rising total rate on one fresh 1 controller + 3 brokers cluster per broker
(``compat.cluster``; Kafka with its start scripts' JVM settings), each step a short timed window
after a short untimed warm-up, on a fresh topic (so a step's records never mix with the last
one's). Rates: ``--start-rate`` times ``--factor`` per step, until a step is not sustained:

- fewer records sent and acknowledged than 95 % of the asked rate over the timed window (the
  window runs until the producers' last acknowledgement, so a broker that falls behind shows),
- or a timed record not delivered to the group (or a producer's delivery failure).

Then one more step halfway between the last sustained rate and the first that was not (the
ramp's resolution is otherwise the factor). Reported per broker: each step (asked rate, MB/s
sent-and-acknowledged, e2e p50/p99, the brokers' CPU and the CPU the rest of the machine used
meanwhile), its highest sustained rate in MB/s with the e2e p99 there, and kbroker/Kafka at the
highest rate both sustained. The clients (six Python processes) share the machine's cores with
the brokers, so on a small machine the ceiling is the machine's as much as the broker's: the
brokers' CPU per step says which. The brokers' ramps run one after the other (``--targets``
order; one cluster at a time, so an idle JVM never shares the cores with kbroker's steps), each
step recording the CPU the rest of the machine used meanwhile. About 4 min for both.

Results: ``p8_ramp.json`` and ``p8_ramp.md`` in ``--out`` (``compat/bench/results``).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from compat.bench import p8
from compat.bench.procstat import machine
from compat.bench.replicated import TARGETS, Meter, create_topic
from compat.cluster import make_cluster

HERE = Path(__file__).resolve().parent
SUSTAINED = 0.95  # of the asked rate, sent and acknowledged over the timed window


def sustained(step: dict[str, Any]) -> bool:
    """Every timed record delivered and at least 95 % of the asked rate acknowledged."""
    return "error" not in step and step["acked_rate"] >= SUSTAINED * step["target_rate"]


def ramp(name: str, args: argparse.Namespace, root: Path, log: Any) -> dict[str, Any]:
    """One fresh cluster of ``name`` through the rising rates; its steps and highest sustained one."""
    workdir = root / f"{name}-p8-ramp"
    shutil.rmtree(workdir, ignore_errors=True)
    cluster = make_cluster(name, workdir, stock_jvm=not args.light_jvm)
    steps: list[dict[str, Any]] = []

    def step(rate: float) -> bool:
        topic = f"p8-ramp-{len(steps)}"
        create_topic(cluster, topic, args.partitions, args.timeout)
        meter = Meter(cluster)
        try:
            res = p8.run(cluster.bootstrap, topic, args.partitions, rate, args.seconds, args.warmup_seconds,
                         drain_seconds=args.drain_seconds, timeout=args.timeout)
            s: dict[str, Any] = {**res, **meter.done(res["client_cpu_s"])}
        except RuntimeError as exc:  # a producer's failed delivery or a record the group never got
            s = {"target_rate": rate, "error": str(exc)[-500:], **meter.done()}
        s["sustained"] = sustained(s)
        steps.append(s)
        if "error" in s:
            log(f"  {name} {rate:.0f}/s: NOT sustained: {s['error'][:200]}")
        else:
            log(f"  {name} {rate:.0f}/s: {s['acked_rate']} acked/s ({s['acked_mb_s']} MB/s), e2e p50 {s['p50_us']} "
                f"µs p99 {s['p99_us']} µs; brokers {s['broker_cpu_share']:.2f} cores, clients "
                f"{s['client_cpu_s'] / s['wall_s']:.2f}, others {s['other_cpu_share']:.2f}: "
                f"{'sustained' if s['sustained'] else 'NOT sustained'}")
        return bool(s["sustained"])

    try:
        started = time.perf_counter()
        cluster.start()
        log(f"{name}: cluster up in {time.perf_counter() - started:.1f} s")
        rate, last_ok = args.start_rate, None
        while rate <= args.max_rate and step(rate):
            last_ok, rate = rate, rate * args.factor
        if last_ok is not None and rate <= args.max_rate and args.refine:
            step((last_ok + rate) / 2)
    finally:
        cluster.close()
        shutil.rmtree(workdir, ignore_errors=True)
    best = max((s for s in steps if s["sustained"]), key=lambda s: s["target_rate"], default=None)
    return {"target": name, "steps": steps, "highest": best}


def compare(results: dict[str, dict[str, Any]]) -> dict[str, Any] | None:
    """kbroker/Kafka at the highest asked rate both sustained."""
    ok = {name: {s["target_rate"]: s for s in r["steps"] if s["sustained"]} for name, r in results.items()}
    if set(ok) != set(TARGETS):
        return None
    both = set(ok["kbroker"]) & set(ok["kafka"])
    if not both:
        return None
    rate = max(both)
    k, j = ok["kbroker"][rate], ok["kafka"][rate]
    return {"rate": rate, "kbroker_mb_s": k["acked_mb_s"], "kafka_mb_s": j["acked_mb_s"],
            "mb_s_ratio": round(k["acked_mb_s"] / j["acked_mb_s"], 3), "kbroker_p99_us": k["p99_us"],
            "kafka_p99_us": j["p99_us"], "p99_ratio": round(k["p99_us"] / j["p99_us"], 3)}


def markdown(results: dict[str, dict[str, Any]], both: dict[str, Any] | None, meta: dict[str, Any]) -> str:
    lines = ["# P8 rate ramp — kbroker vs Apache Kafka 4.3.1 (stock JVM)", "",
             f"`{meta['command']}` — {meta['started']}, {meta['duration_s'] / 60:.1f} min, machine load average at "
             f"start {meta['loadavg']}, {meta['cpus']} cores (shared). Steps of {meta['seconds']:.0f} s timed after "
             f"{meta['warmup_seconds']:.0f} s untimed; sustained = every timed record delivered and ≥ 95 % of the "
             f"asked rate sent and acknowledged (window up to the producers' last acknowledgement).", "",
             "| broker | highest sustained records/s | MB/s | e2e p50 µs | e2e p99 µs | brokers' CPU, cores |",
             "|---|---:|---:|---:|---:|---:|"]
    for name, r in results.items():
        b = r["highest"]
        lines.append(f"| {name} | {b['target_rate']:.0f} | {b['acked_mb_s']} | {b['p50_us']} | {b['p99_us']} | "
                     f"{b['broker_cpu_share']:.2f} |" if b else f"| {name} | none | – | – | – | – |")
    lines.append("")
    best = {name: r["highest"] for name, r in results.items()}
    if best.get("kbroker") and best.get("kafka"):
        k, j = best["kbroker"]["acked_mb_s"], best["kafka"]["acked_mb_s"]
        lines.append(f"Highest sustained, kbroker/Kafka: {k / j:.2f} ({k} vs {j} MB/s).")
    if both:
        lines.append(f"At {both['rate']:.0f} records/s, the highest rate both sustained: kbroker/Kafka MB/s "
                     f"{both['mb_s_ratio']:.2f} ({both['kbroker_mb_s']} vs {both['kafka_mb_s']}), e2e p99 "
                     f"{both['p99_ratio']:.2f} ({both['kbroker_p99_us']} vs {both['kafka_p99_us']} µs).")
    else:
        lines.append("No rate was sustained by both brokers.")
    lines += ["", "## Steps", "",
              "| broker | asked/s | acked/s | MB/s | e2e p50 µs | e2e p99 µs | brokers' CPU | clients' CPU | "
              "other load | sustained |", "|---|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    for name, r in results.items():
        for s in r["steps"]:
            if "error" in s:
                lines.append(f"| {name} | {s['target_rate']:.0f} | – | – | – | – | {s['broker_cpu_share']:.2f} | – | "
                             f"{s['other_cpu_share']:.2f} | no: {s['error'][:120]} |")
            else:
                lines.append(f"| {name} | {s['target_rate']:.0f} | {s['acked_rate']} | {s['acked_mb_s']} | "
                             f"{s['p50_us']} | {s['p99_us']} | {s['broker_cpu_share']:.2f} | "
                             f"{s['client_cpu_s'] / s['wall_s']:.2f} | {s['other_cpu_share']:.2f} | "
                             f"{'yes' if s['sustained'] else 'no'} |")
    lines += ["", "CPU columns are cores over the step (brokers: the 3 brokers and the controller; clients: the 3 "
              "producer and 3 consumer processes; other load: the rest of the machine)."]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m compat.bench.p8_ramp", description=__doc__.split("\n")[0])
    parser.add_argument("--start-rate", type=float, default=6000.0, help="first step, records/s (6000)")
    parser.add_argument("--factor", type=float, default=1.5, help="rate multiplier per step (1.5)")
    parser.add_argument("--max-rate", type=float, default=200_000.0, help="no step above this (200000)")
    parser.add_argument("--no-refine", dest="refine", action="store_false",
                        help="no step halfway between the last sustained rate and the first that was not")
    parser.add_argument("--seconds", type=float, default=10.0, help="timed seconds per step (10)")
    parser.add_argument("--warmup-seconds", type=float, default=5.0, help="untimed seconds per step (5)")
    parser.add_argument("--drain-seconds", type=float, default=15.0, help="consumers' drain deadline per step (15)")
    parser.add_argument("--partitions", type=int, default=30, help="partitions per step's topic (30)")
    parser.add_argument("--timeout", type=float, default=120.0, help="per client process and topic creation (120)")
    parser.add_argument("--targets", default=",".join(TARGETS), help="brokers, in the order run")
    parser.add_argument("--light-jvm", action="store_true", help="Kafka with compat/cluster.py's test JVM flags")
    parser.add_argument("--out", type=Path, default=HERE / "results", help="results directory")
    parser.add_argument("--workdir", type=Path, help="where clusters keep their data (a temp dir)")
    args = parser.parse_args(argv)
    targets = [t.strip() for t in args.targets.split(",") if t.strip()]
    if set(targets) - set(TARGETS):
        parser.error(f"targets are {TARGETS}")

    def log(line: str) -> None:
        print(line, flush=True)

    started, wall0, load = time.strftime("%Y-%m-%d %H:%M:%S %Z"), time.perf_counter(), os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="kbroker-p8-ramp-", dir=args.workdir) as tmp:
        desc = machine(Path(tmp))
        results = {name: ramp(name, args, Path(tmp), log) for name in targets}
    both = compare(results)
    meta = {"command": " ".join(["python -m compat.bench.p8_ramp", *(sys.argv[1:] if argv is None else argv)]),
            "started": started, "duration_s": round(time.perf_counter() - wall0, 1), "loadavg": round(load, 2),
            "cpus": os.cpu_count(), "seconds": args.seconds, "warmup_seconds": args.warmup_seconds, "machine": desc}
    text = markdown(results, both, meta)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "p8_ramp.md").write_text(text)
    (args.out / "p8_ramp.json").write_text(json.dumps({"meta": meta, "results": results, "both": both}, indent=1)
                                           + "\n")
    log(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
