"""``python -m compat.bench.final_table``: one table of P2, P3, P4, P6, P7, P8 — kbroker vs Kafka 4.3.1 (stock JVM).

Runs, one after the other in one command:

- ``python -m compat.bench`` for the single-node workloads P2, P4, P7 with the librdkafka driver
  only (the Java client's figures are already at a ratio of 1.0 or more; its load generator costs
  a core of the two), each broker ``--runs`` times, alternating which goes first;
- ``python -m compat.bench.replicated`` for P3, P6 (with the restart of a broker holding every
  partition's replica until all ISRs are full again) and P8 on the 1 controller + 3 brokers
  clusters, ``--runs`` times per cluster, alternating;

at sizes chosen so that the whole takes about 25 min on this machine (2 shared cores; ``--smoke``:
the smallest sizes, one run, a few minutes, to show it works), then merges both tables into
``final.md`` / ``final.json`` in ``--out``: per metric the kbroker and Kafka medians, the
kbroker/Kafka ratio min / median / max over the runs, and the CPU other processes used meanwhile.
The sub-runs' own reports stay beside it (``single/``, ``replicated/``).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent

# (single-node flags, replicated flags) at full and smoke size
FULL = (["--workloads", "P2,P4,P7", "--drivers", "rdk", "--produce-mib", "128", "--p2-records", "300000",
         "--backlog-gib", "0.25", "--no-plot", "--no-limits"],
        ["--workloads", "P3,P6,P8", "--latency-seconds", "10", "--burst", "20000", "--warmup-seconds", "15",
         "--throughput-mib", "32", "--idle-seconds", "10", "--p8-seconds", "15"])
SMOKE = (["--workloads", "P2,P4,P7", "--drivers", "rdk", "--smoke", "--no-plot", "--no-limits"],
         ["--workloads", "P3,P6,P8", "--smoke"])


def _run(cmd: list[str], log: Path) -> int:
    print("$ " + " ".join(cmd), flush=True)
    with open(log, "w") as out:
        return subprocess.run(cmd, stdout=out, stderr=subprocess.STDOUT, cwd=HERE.parents[1], check=False).returncode


def _fmt(value: float | None) -> str:
    if value is None:
        return "–"
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.3g}"


def merge(out: Path, meta: dict[str, Any]) -> str:
    """final.md/final.json from the two sub-runs' JSON; returns the markdown."""
    rows: list[dict[str, Any]] = []
    single = json.loads((out / "single" / "results.json").read_text())
    others = single["meta"].get("other_cpu_share", {})
    for r in single["table"]:
        rows.append({"workload": r["workload"], "metric": f"{r['metric']} ({r['driver']})", "kbroker": r["kbroker"],
                     "kafka": r["kafka"], "ratio": r["ratio"], "runs": r["runs"],
                     "lower_is_better": "MB/s" not in r["metric"]})
    replicated = json.loads((out / "replicated" / "replicated.json").read_text())
    rows += [{k: r[k] for k in ("workload", "metric", "kbroker", "kafka", "ratio", "runs", "lower_is_better")}
             for r in replicated["table"]]
    shares = [s[phase]["other_cpu_share"] for s in replicated["samples"]
              for phase in ("latency", "throughput", "p8") if phase in s and "other_cpu_share" in s[phase]]
    lines = [
        "# kbroker vs Apache Kafka 4.3.1 (stock JVM) — the final table",
        "",
        f"`{meta['command']}` — {meta['started']}, {meta['duration_s'] / 60:.1f} min; failed sub-runs: "
        f"{meta['failed'] or 'none'}.",
        "",
        "Single node P2/P4/P7: `compat/bench` (librdkafka driver), details in `single/results.md`. Replicated "
        "P3/P6/P8: `compat/bench/replicated.py` (1 controller + 3 brokers), details in `replicated/replicated.md`. "
        "Kafka runs with the JVM settings of its start scripts (-Xmx1G -Xms1G, G1 MaxGCPauseMillis=20, ...). "
        "Ratio = kbroker / Kafka per run, min / median / max; numbers are medians.",
        "",
        "| workload | metric | kbroker | Kafka | ratio min / med / max | runs | better |",
        "|---|---|---:|---:|---|---:|---|",
    ]
    order = {"P2": 0, "P3": 1, "P4": 2, "P6": 3, "P7": 4, "P8": 5}
    for r in sorted(rows, key=lambda r: order.get(r["workload"], 9)):
        ratio = r["ratio"]
        ratio_s = f"{ratio['min']:.2f} / **{ratio['median']:.2f}** / {ratio['max']:.2f}" if ratio else "–"
        lines.append(f"| {r['workload']} | {r['metric']} | {_fmt(r['kbroker'])} | {_fmt(r['kafka'])} | {ratio_s} | "
                     f"{r['runs']} | {'lower' if r['lower_is_better'] else 'higher'} |")
    lines += ["", "Other load (CPU used by processes other than the brokers and the load generators, in cores, "
              "per timed phase): single node " + (", ".join(f"{k} {v}" for k, v in others.items()) or "–")
              + "; replicated " + (f"min {min(shares):.2f} median {sorted(shares)[len(shares) // 2]:.2f} max "
                                   f"{max(shares):.2f}" if shares else "–") + "."]
    text = "\n".join(lines) + "\n"
    (out / "final.md").write_text(text)
    (out / "final.json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=1) + "\n")
    return text


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m compat.bench.final_table", description=__doc__.split("\n")[0])
    parser.add_argument("--smoke", action="store_true", help="smallest sizes, one run (a few minutes)")
    parser.add_argument("--runs", type=int, help="runs per broker (3; smoke 1)")
    parser.add_argument("--out", type=Path, default=HERE / "results" / "final", help="results directory")
    parser.add_argument("--workdir", type=Path, help="where brokers keep their data (a temp dir)")
    args = parser.parse_args(argv)
    single_flags, replicated_flags = SMOKE if args.smoke else FULL
    runs = ["--runs", str(args.runs or (1 if args.smoke else 3))]
    workdir = ["--workdir", str(args.workdir)] if args.workdir else []
    args.out.mkdir(parents=True, exist_ok=True)
    started, wall0 = time.strftime("%Y-%m-%d %H:%M:%S %Z"), time.perf_counter()
    failed = []
    for name, module, flags in (("single", "compat.bench", single_flags),
                                ("replicated", "compat.bench.replicated", replicated_flags)):
        cmd = [sys.executable, "-m", module, *flags, *runs, *workdir, "--out", str(args.out / name)]
        if _run(cmd, args.out / f"{name}.log") != 0:
            failed.append(name)
    meta = {"command": "python -m compat.bench.final_table " + " ".join(sys.argv[1:] if argv is None else argv),
            "started": started, "duration_s": round(time.perf_counter() - wall0, 1), "failed": failed}
    print(merge(args.out, meta))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
