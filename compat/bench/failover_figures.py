"""``python -m compat.bench.failover_figures``: leader failover times of kbroker and Kafka, one quick command.

Runs ``compat.failover.run_failover`` (RF-3 topic of 6 partitions, idempotent acks=all producers;
each fault SIGKILLs a partition's leader, then restarts it once the cluster healed) on a fresh
kbroker cluster and a fresh Kafka 4.3.1 cluster (stock JVM, ``compat.cluster.StockKafkaCluster``),
``--kills`` faults each, and prints per broker the median and max of: ``leader_s`` (kill → every
surviving broker's Metadata shows a live leader for every partition), ``probe_s`` (kill → a
produce to each partition the victim led succeeded), ``isr_restore_s`` (restart → full ISR), with
the CPU the rest of the machine used meanwhile. Every run must also lose nothing (the failover
checker's anomalies are printed and fail the command). About 5 min for both at 4 kills each on
two shared cores.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from compat.bench.procstat import system_busy_seconds
from compat.cluster import make_cluster
from compat.failover import run_failover

ANOMALIES = ("lost", "duplicates", "inconsistent", "nonmonotonic", "failed_but_read")


def one_target(name: str, kills: int, root: Path, seed: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix=f"failover-{name}-", dir=root) as tmp:
        cluster = make_cluster(name, Path(tmp), stock_jvm=True)
        with cluster:
            busy0, wall0 = system_busy_seconds(), time.perf_counter()
            summary = run_failover(cluster, kills=kills, seed=seed)
            busy, wall = system_busy_seconds() - busy0, time.perf_counter() - wall0
    return {"target": name, "seed": seed, "kills": summary["kills"],
            "leader_s": summary["failover_leader_s"], "probe_s": summary["failover_probe_s"],
            "isr_restore_s": summary["isr_restore_s"], "machine_busy_cores": round(busy / wall, 2),
            **{k: summary[k] for k in ANOMALIES}}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m compat.bench.failover_figures", description=__doc__.split("\n")[0])
    parser.add_argument("--kills", type=int, default=4, help="leader kills per broker (4)")
    parser.add_argument("--targets", default="kbroker,kafka", help="in run order")
    parser.add_argument("--seed", type=int, default=7, help="the same fault choices for both (7)")
    parser.add_argument("--workdir", type=Path, help="where the clusters keep their data (a temp dir)")
    parser.add_argument("--out", type=Path, help="also write the figures as JSON here")
    args = parser.parse_args(argv)
    rows = [one_target(t.strip(), args.kills, args.workdir or Path(tempfile.gettempdir()), args.seed)
            for t in args.targets.split(",") if t.strip()]
    print("| broker | kills | leader s median / max | probe produce s median / max | ISR restore s median / max "
          "| machine busy, cores | lost / dup / inconsistent |")
    print("|---|---:|---|---|---|---:|---|")
    for r in rows:
        print(f"| {r['target']} | {r['kills']} | {r['leader_s']['median']} / {r['leader_s']['max']} | "
              f"{r['probe_s']['median']} / {r['probe_s']['max']} | {r['isr_restore_s']['median']} / "
              f"{r['isr_restore_s']['max']} | {r['machine_busy_cores']} | {r['lost']} / {r['duplicates']} / "
              f"{r['inconsistent']} |")
    if args.out:
        args.out.write_text(json.dumps(rows, indent=1) + "\n")
    return 0 if all(r[k] == 0 for r in rows for k in ANOMALIES) else 1


if __name__ == "__main__":
    sys.exit(main())
