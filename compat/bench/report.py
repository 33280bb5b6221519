"""Turn benchmark samples into the results: a markdown table, JSON and a PNG plot.

Ratios are kbroker/Kafka per run (run *i* of kbroker against run *i* of Kafka, which ran next
to it), then min/median/max over the runs. Throughput rows: higher is better for kbroker.
Latency rows (P5): lower is better for kbroker. CPU-s/GB is the broker process's
utime+stime over the load generator's run divided by the logical GB (10^9 bytes of record
values) it moved; % of limit compares the median MB/s with the physical limit measured in the
same run (page-cache write or loopback TCP, whichever is lower, for produce; sendfile to
loopback for consume; wire bytes for P7).
"""

from __future__ import annotations

import json
import statistics
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from compat.bench.workloads import TITLES

Row = dict[str, Any]


def _spread(values: list[float]) -> dict[str, float]:
    return {"min": min(values), "median": statistics.median(values), "max": max(values)}


def _metrics(workload: str) -> list[tuple[str, str]]:
    """(metric key in Sample.summary(), label) rows for a workload."""
    if workload == "P5":
        return [("p50_us", "p50 µs"), ("p99_us", "p99 µs")]
    if workload == "P7":
        return [("wire_mb_s", "wire MB/s"), ("mb_s", "logical MB/s")]
    return [("mb_s", "MB/s")]


def _limit(workload: str, metric: str, limits: dict[str, float]) -> float | None:
    if metric.endswith("_us") or not limits:
        return None
    if workload == "P4":
        return limits["sendfile_loopback_mb_s"]
    return min(limits["pagecache_write_mb_s"], limits["tcp_loopback_mb_s"])


def rows(samples: Iterable[dict[str, Any]], limits: dict[str, float]) -> list[Row]:
    """One row per workload × driver × metric, with per-target medians and the ratio spread.

    ``samples`` are :meth:`Sample.summary` dicts (as stored in results.json).
    """
    by_key: dict[tuple[str, str, str], dict[int, dict[str, Any]]] = {}
    for s in samples:
        by_key.setdefault((s["workload"], s["driver"], s["target"]), {})[s["run"]] = s
    out: list[Row] = []
    for workload in TITLES:
        for driver in ("java", "rdk"):
            kb, kf = by_key.get((workload, driver, "kbroker"), {}), by_key.get((workload, driver, "kafka"), {})
            if not kb or not kf:
                continue
            runs = sorted(set(kb) & set(kf))
            for metric, label in _metrics(workload):
                ratios = [kb[r][metric] / kf[r][metric] for r in runs if kf[r][metric]]
                row: Row = {
                    "workload": workload, "driver": driver, "metric": label, "runs": len(runs),
                    "kbroker": statistics.median(kb[r][metric] for r in runs),
                    "kafka": statistics.median(kf[r][metric] for r in runs),
                    "ratio": _spread(ratios) if ratios else None,
                    "kbroker_cpu_share": statistics.median(kb[r]["broker_cpu_share"] for r in runs),
                    "kafka_cpu_share": statistics.median(kf[r]["broker_cpu_share"] for r in runs),
                    "client_cpu_share": statistics.median(
                        x[r]["client_cpu_s"] / x[r]["wall_s"] for x in (kb, kf) for r in runs),
                }
                if workload != "P5":
                    row["kbroker_cpu_s_per_gb"] = statistics.median(kb[r]["broker_cpu_s_per_gb"] for r in runs)
                    row["kafka_cpu_s_per_gb"] = statistics.median(kf[r]["broker_cpu_s_per_gb"] for r in runs)
                limit = _limit(workload, metric, limits)
                if limit:
                    row["kbroker_pct_of_limit"] = 100 * row["kbroker"] / limit
                    row["kafka_pct_of_limit"] = 100 * row["kafka"] / limit
                out.append(row)
    return out


def _num(value: float | None, digits: int = 1) -> str:
    if value is None:
        return "–"
    return f"{value:,.{digits}f}" if value < 100 or digits == 0 else f"{value:,.0f}"


def markdown(table: list[Row], limits: dict[str, float], meta: dict[str, Any]) -> str:
    """The results page."""
    lines = [
        "# kbroker vs Apache Kafka 4.3.1 — side-by-side benchmarks",
        "",
        f"`{meta['command']}` — {meta['runs']} runs, each workload × client alternating between the "
        f"brokers, {meta['started']}, {meta['duration_s'] / 60:.1f} min. Scale: {meta['scale']}.",
        "",
        "Ratio = kbroker / Kafka per run pair (min / median / max). Throughput: > 1 means kbroker is "
        "faster. Latency (P5): < 1 means kbroker is faster. Broker CPU-s/GB: utime+stime of the broker "
        "process per 10^9 bytes of record values moved. CPU share: broker CPU-s / wall-s (1.0 = one "
        "core); client: the load generator's CPU share (median over both brokers). MB = 10^6 bytes of "
        "record values (logical) unless marked wire.",
        "",
        "Reading it: a ratio whose min–max range spans 1 is not a measured difference. Throughput ratios "
        "move with the load other processes put on the machine (section below) and with the load "
        "generator, which shares the cores; broker CPU-s/GB is a per-process figure and far steadier.",
        "",
        "| workload | client | metric | kbroker | Kafka | ratio min / med / max | CPU-s/GB kbroker | "
        "CPU-s/GB Kafka | CPU share kbroker / Kafka / client | % of limit kbroker / Kafka |",
        "|---|---|---|---:|---:|---|---:|---:|---|---|",
    ]
    for r in table:
        ratio = r["ratio"]
        ratio_s = f"{ratio['min']:.2f} / **{ratio['median']:.2f}** / {ratio['max']:.2f}" if ratio else "–"
        pct = (f"{r['kbroker_pct_of_limit']:.1f} % / {r['kafka_pct_of_limit']:.1f} %"
               if "kbroker_pct_of_limit" in r else "–")
        digits = 0 if r["metric"].endswith("µs") else 1
        lines.append(
            f"| {TITLES[r['workload']]} | {r['driver']} | {r['metric']} | {_num(r['kbroker'], digits)} | "
            f"{_num(r['kafka'], digits)} | {ratio_s} | {_num(r.get('kbroker_cpu_s_per_gb'), 2)} | "
            f"{_num(r.get('kafka_cpu_s_per_gb'), 2)} | {r['kbroker_cpu_share']:.2f} / {r['kafka_cpu_share']:.2f} / "
            f"{r['client_cpu_share']:.2f} | {pct} |"
        )
    lines += ["", "## Physical limits (same run, best of 3)", "", "| what | figure |", "|---|---|"]
    if limits:
        lines += [
            f"| loopback TCP, one stream (4 MiB send/recv calls) | {limits['tcp_loopback_mb_s']:,.0f} MB/s |",
            f"| `os.sendfile` page cache → loopback | {limits['sendfile_loopback_mb_s']:,.0f} MB/s at "
            f"{limits['sendfile_sender_cpu_share']:.0%} of a core |",
            "| page-cache sequential write (1 MiB `os.write`, no fsync) | "
            f"{limits['pagecache_write_mb_s']:,.0f} MB/s |",
        ]
    noise = meta.get("other_cpu_share")
    if noise:
        lines += ["", "## Other load on the machine", "",
                  "CPU used by processes other than the broker and the load generator during the timed "
                  f"phases, in cores: median {noise['median']:.2f}, max {noise['max']:.2f} (this machine is "
                  "shared; other sessions' tests may run meanwhile)."]
    lines += ["", "## Machine", ""]
    lines += [f"- {k}: {v}" for k, v in meta["machine"].items()]
    lines += ["", "## Clients and settings", ""] + [f"- {line}" for line in meta["notes"]]
    return "\n".join(lines) + "\n"


def plot(table: list[Row], path: Path) -> bool:
    """Ratio bars (median, min–max whiskers, log scale) and CPU-s/GB; False without matplotlib."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        import matplotlib.ticker
    except ImportError:
        return False
    rated = [r for r in table if r["ratio"]]
    labels = [f"{r['workload']} {r['driver']} {r['metric']}" for r in rated]
    med = [r["ratio"]["median"] for r in rated]
    err = [[m - r["ratio"]["min"] for m, r in zip(med, rated, strict=True)],
           [r["ratio"]["max"] - m for m, r in zip(med, rated, strict=True)]]
    colors = ["#c44e52" if "µs" in r["metric"] else "#4c72b0" for r in rated]
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(14, 0.45 * len(rated) + 2.5),
                                   gridspec_kw={"width_ratios": [3, 2]})
    ys = list(range(len(rated)))[::-1]
    ax1.barh(ys, med, xerr=err, color=colors, capsize=3)
    ax1.axvline(1.0, color="black", linewidth=0.8)
    ax1.set_xscale("log")
    lo, hi = ax1.get_xlim()
    ax1.set_xticks([t for t in (0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 20) if lo <= t <= hi])
    ax1.xaxis.set_major_formatter(matplotlib.ticker.FormatStrFormatter("%g"))
    ax1.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    ax1.set_yticks(ys, labels)
    ax1.set_xlabel("kbroker / Kafka (median, min–max)\n"
                   "blue: throughput, higher is better; red: latency, lower is better")
    ax1.set_title("kbroker / Apache Kafka 4.3.1")
    cpu = [r for r in table if "kbroker_cpu_s_per_gb" in r and r["metric"] != "logical MB/s"]
    ys2 = list(range(len(cpu)))[::-1]
    ax2.barh([y + 0.2 for y in ys2], [r["kbroker_cpu_s_per_gb"] for r in cpu], height=0.4, label="kbroker")
    ax2.barh([y - 0.2 for y in ys2], [r["kafka_cpu_s_per_gb"] for r in cpu], height=0.4, label="Kafka")
    ax2.set_yticks(ys2, [f"{r['workload']} {r['driver']}" for r in cpu])
    ax2.set_xlabel("broker CPU-seconds per GB (median)")
    ax2.legend()
    ax2.set_title("broker CPU cost")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def write(out_dir: Path, samples: list[dict[str, Any]], limits: dict[str, float], meta: dict[str, Any],
          with_plot: bool = True) -> dict[str, Path]:
    """Write results.md, results.json and ratios.png into ``out_dir``; returns what was written.

    ``samples`` are :meth:`Sample.summary` dicts.
    """
    out_dir.mkdir(parents=True, exist_ok=True)
    table = rows(samples, limits)
    written = {"markdown": out_dir / "results.md", "json": out_dir / "results.json"}
    shares = [s["other_cpu_share"] for s in samples]
    if shares:
        meta = {**meta, "other_cpu_share": {k: round(v, 3) for k, v in _spread(shares).items()}}
    written["markdown"].write_text(markdown(table, limits, meta))
    written["json"].write_text(json.dumps({
        "meta": meta, "limits": limits, "table": table, "samples": samples,
    }, indent=1) + "\n")
    if with_plot and plot(table, out_dir / "ratios.png"):
        written["plot"] = out_dir / "ratios.png"
    return written


def main(argv: list[str] | None = None) -> int:
    """``python -m compat.bench.report DIR``: render DIR/results.md and ratios.png again from results.json."""
    args = sys.argv[1:] if argv is None else argv
    out_dir = Path(args[0]) if args else Path(__file__).resolve().parent / "results"
    data = json.loads((out_dir / "results.json").read_text())
    written = write(out_dir, data["samples"], data["limits"], data["meta"])
    print("wrote " + ", ".join(str(p) for p in written.values()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
