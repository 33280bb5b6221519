"""Many partitions on a replicated cluster: what a broker's per-partition work costs (issue #19, P6).

On compat/cluster.py's 1 controller + 3 brokers, for Apache Kafka 4.3.1 and kbroker alternately,
with one topic of ``--partitions`` partitions at replication factor 3 (every broker holds a replica
of each), it measures:

- creation: CreateTopics answered, every partition with a leader on every broker, every ISR full;
- idle CPU per node (CPU-seconds / wall seconds) over ``--idle-seconds`` with nothing to do;
- a restart: broker 1 is killed (SIGKILL), left out of every ISR by the controller, started again,
  and timed until every ISR on every broker holds all three replicas again;
- the longest stall a client sees: a Metadata request (brokers only) is sent to each running broker
  every 20 ms throughout, and the longest answer time per phase is kept (an event loop busy with
  per-partition work answers late).

``python -m compat.partition_scale --targets kbroker,kafka --partitions 1000`` prints one JSON line
per run and a summary; the machine's other load is recorded beside each idle figure.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from compat.bench.replicated import Meter, create_topic
from compat.cluster import Cluster, make_cluster

TOPIC = "scale"
PROBE_INTERVAL_S = 0.02


class StallProbe:
    """Times a small Metadata request to every running broker, every 20 ms, in a thread."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self.longest_s = 0.0
        self.down: set[int] = set()  # brokers deliberately stopped: not probed
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> StallProbe:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def phase(self) -> float:
        """The longest answer time since the last call (and start a new phase)."""
        longest, self.longest_s = self.longest_s, 0.0
        return round(longest, 3)

    def _run(self) -> None:
        while not self._stop.wait(PROBE_INTERVAL_S):
            for broker in self.cluster.broker_ids:
                if broker in self.down:
                    continue
                started = time.perf_counter()
                try:
                    self.cluster.metadata(broker, [], timeout=10.0)
                except OSError:
                    continue  # a broker starting up; its start is not a stall
                self.longest_s = max(self.longest_s, time.perf_counter() - started)


def _isrs(cluster: Cluster, broker: int, partitions: int) -> list[list[int]] | None:
    try:
        meta = cluster.metadata(broker, [TOPIC], timeout=30.0)
    except OSError:
        return None
    parts = [p for t in meta.topics if t.name == TOPIC and t.error_code == 0 for p in t.partitions]
    return [list(p.isr_nodes) for p in parts] if len(parts) == partitions else None


def _wait(condition: Any, timeout: float, what: str) -> float:
    started = time.perf_counter()
    while not condition():
        if time.perf_counter() - started > timeout:
            raise RuntimeError(f"{what}: not within {timeout:.0f} s")
        time.sleep(0.05)  # the poll interval of a measurement
    return round(time.perf_counter() - started, 3)


def run(target: str, partitions: int, idle_s: float, workdir: Path, timeout: float) -> dict[str, Any]:
    result: dict[str, Any] = {"target": target, "partitions": partitions}
    with make_cluster(target, workdir) as cluster, StallProbe(cluster) as probe:
        probe.phase()
        result["create"] = create_topic(cluster, TOPIC, partitions, timeout)
        result["create"]["longest_stall_s"] = probe.phase()
        time.sleep(2.0)  # let creation's after-work (checkpoints, first fetch rounds) settle before idling
        probe.phase()
        meter = Meter(cluster)
        time.sleep(idle_s)  # the idle window measured
        idle = meter.done()
        result["idle"] = {"node_cpu_share": {n: round(s / idle["wall_s"], 3) for n, s in idle["node_cpu_s"].items()},
                          "other_cpu_share": idle["other_cpu_share"], "wall_s": idle["wall_s"],
                          "longest_stall_s": probe.phase()}
        brokers = cluster.broker_ids
        probe.down.add(1)
        cluster.kill(1)
        result["restart"] = {"left_isrs_s": _wait(
            lambda: all((isrs := _isrs(cluster, b, partitions)) is not None and all(1 not in i for i in isrs)
                        for b in brokers if b != 1), timeout, "broker 1 out of every ISR")}
        probe.phase()
        started = time.perf_counter()
        cluster.start_node(1)
        probe.down.discard(1)
        _wait(lambda: all((isrs := _isrs(cluster, b, partitions)) is not None and all(len(i) == 3 for i in isrs)
                          for b in brokers), timeout, "every ISR full again")
        result["restart"]["isr_full_s"] = round(time.perf_counter() - started, 3)
        result["restart"]["longest_stall_s"] = probe.phase()
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m compat.partition_scale", description=__doc__.split("\n")[0])
    parser.add_argument("--targets", default="kbroker,kafka", help="clusters, in run order")
    parser.add_argument("--partitions", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=1, help="runs per target, alternating")
    parser.add_argument("--idle-seconds", type=float, default=20.0)
    parser.add_argument("--timeout", type=float, default=300.0, help="bound of each wait")
    args = parser.parse_args(argv)
    for index in range(args.runs):
        for target in args.targets.split(","):
            with tempfile.TemporaryDirectory(prefix=f"partition-scale-{target}-") as workdir:
                print(json.dumps({"run": index, **run(target, args.partitions, args.idle_seconds, Path(workdir),
                                                        args.timeout)}), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
