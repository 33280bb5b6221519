"""``python -m compat.bench``: the full side-by-side benchmark, kbroker against Apache Kafka.

Measures the physical limits, then for each run starts a fresh kbroker and a fresh Kafka side by
side and runs every workload × client on both back to back, alternating which broker goes
first, and writes ``results.md``, ``results.json`` and ``ratios.png`` into ``--out``
(``compat/bench/results`` by default). ``--smoke`` runs everything tiny (a few MB, one run).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from dataclasses import asdict, replace
from pathlib import Path

from compat.bench import limits as limits_mod
from compat.bench import report
from compat.bench.procstat import machine
from compat.bench.workloads import DRIVERS, WORKLOADS, Sample, Scale, run_pair

HERE = Path(__file__).resolve().parent
NOTES = [
    "java: `org.apache.kafka.tools.ProducerPerformance` (kafka-tools 4.3.1) for P1/P2/P7; "
    "`compat/bench/BenchClient.java` on kafka-clients 4.3.1 for P4 (assign() consumer, client "
    "defaults) and P5 (ConsumerPerformance needs consumer groups, which kbroker lacks; "
    "EndToEndLatency reports whole ms). Tool JVMs: -Xmx512M, G1.",
    "rdk: librdkafka through confluent-kafka (`compat/bench/rdk_driver.py`, one Python process per "
    "phase); Debian ships no rdkafka_performance binary. For 100 B records the Python produce loop "
    "itself costs ~2 µs per record, so P2/rdk is partly client-bound.",
    "P1/P7 producer: acks=1, batch.size=1000000, linger.ms=5, idempotence off; P7 adds "
    "compression.type=lz4. P2: acks=1, batch.size=16384, linger.ms=0. P4: backlog written by the "
    "rdk producer with P1 settings (untimed), then each client reads it all from offset 0. P5: "
    "producer acks=1 linger.ms=0 at a fixed rate, consumer in the same client process with "
    "default fetch settings (fetch max wait 500 ms: a broker must answer the long poll on arrival).",
    "Payload: half random bytes (7-bit, ProducerPerformance reads its payload file as UTF-8), "
    "half one repeated letter; never zeros. 2048 distinct values per size, shared by both clients.",
    "One partition per topic, replication factor 1, both brokers from compat/targets.py with the "
    "same server.properties (Kafka: Maven jars, -Xmx1g G1; kbroker: `python -m kbroker serve`). "
    "Both brokers run side by side; every workload × client runs on one and then the other, the "
    "first broker alternating from step to step. Fresh brokers per run, each warmed with 256 MiB "
    "produced and read back before timing; P5 sends 400 untimed records (2 s) before the 3000 it "
    "times.",
    "Brokers and load generators share the machine's 2 cores: a client using a core is a core the "
    "broker cannot use, so absolute figures are lower than on separate machines.",
]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m compat.bench", description=__doc__.split("\n")[0])
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, one run (what CI runs)")
    parser.add_argument("--runs", type=int, help="runs per broker (5; smoke: 1)")
    parser.add_argument("--produce-mib", type=int, help="MiB per driver for P1 and P7 (1024)")
    parser.add_argument("--p2-records", type=int, help="records per driver for P2 (2000000)")
    parser.add_argument("--backlog-gib", type=float, help="P4 backlog in GiB (2)")
    parser.add_argument("--latency-count", type=int, help="P5 records per driver (3000)")
    parser.add_argument("--latency-rate", type=float, help="P5 records/s (200)")
    parser.add_argument("--workloads", default=",".join(WORKLOADS), help="comma list of P1,P2,P4,P5,P7")
    parser.add_argument("--drivers", default=",".join(DRIVERS), help="comma list of java,rdk")
    parser.add_argument("--targets", default="kbroker,kafka", help="brokers, in first-step order")
    parser.add_argument("--out", type=Path, default=HERE / "results", help="results directory")
    parser.add_argument("--workdir", type=Path, help="where brokers keep their data (a temp dir)")
    parser.add_argument("--no-plot", action="store_true", help="skip the PNG (matplotlib not needed)")
    parser.add_argument("--no-limits", action="store_true", help="skip the physical-limit measurements")
    args = parser.parse_args(argv)

    scale = Scale.smoke() if args.smoke else Scale()
    overrides = {
        "produce_bytes": args.produce_mib and args.produce_mib << 20,
        "p2_records": args.p2_records,
        "backlog_bytes": args.backlog_gib and int(args.backlog_gib * 2**30),
        "latency_count": args.latency_count,
        "latency_rate": args.latency_rate,
    }
    scale = replace(scale, **{k: v for k, v in overrides.items() if v})
    runs = args.runs or (1 if args.smoke else 5)
    workloads = tuple(w.strip().upper() for w in args.workloads.split(",") if w.strip())
    drivers = tuple(d.strip() for d in args.drivers.split(",") if d.strip())
    targets = [t.strip() for t in args.targets.split(",") if t.strip()]
    if set(workloads) - set(WORKLOADS) or set(drivers) - set(DRIVERS):
        parser.error(f"workloads are {WORKLOADS}, drivers {DRIVERS}")

    def log(line: str) -> None:
        print(line, flush=True)

    started, wall0 = time.strftime("%Y-%m-%d %H:%M:%S %Z"), time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="kbroker-bench-", dir=args.workdir) as tmp:
        root = Path(tmp)
        limits: dict[str, float] = {}
        if not args.no_limits:
            limits = limits_mod.measure(root / "limits", (16 << 20) if args.smoke else (2 << 30),
                                        repeats=1 if args.smoke else 3)
            log(f"physical limits: {limits}")
        samples: list[Sample] = []
        for run in range(runs):
            samples += run_pair(targets, run, scale, root, root / "payloads", workloads, drivers, log)
        desc = machine(root)
    argv_s = " ".join(sys.argv[1:] if argv is None else argv)
    meta = {
        "command": f"python -m compat.bench {argv_s}".strip(),
        "started": started,
        "duration_s": round(time.perf_counter() - wall0, 1),
        "runs": runs,
        "scale": ", ".join(f"{k}={v}" for k, v in asdict(scale).items()),
        "machine": desc,
        "notes": NOTES,
    }
    summaries = [s.summary() for s in samples]
    written = report.write(args.out, summaries, limits, meta, with_plot=not args.no_plot)
    log(report.markdown(report.rows(summaries, limits), limits, meta).split("\n## Physical")[0])
    log("wrote " + ", ".join(str(p) for p in written.values()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
