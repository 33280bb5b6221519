"""``python -m compat.metrics_overhead``: what serving /metrics costs the produce and fetch path.

Two kbroker nodes run side by side with the same server.properties, one without an HTTP
listener (metrics off: the Dispatcher's observer is only the request logger) and one with
``kbroker.http.listeners`` (metrics on: request counters and timing histograms on every request,
BrokerTopicMetrics, the event-loop probe, and a scrape of /metrics every ``--scrape-s`` seconds
as Prometheus would do). Each run starts both fresh, warms them, then runs P1 (produce 1 KiB
records, 1 MB batches) and P4 (read a backlog from offset 0) with the rdk driver on one and then
the other, alternating which goes first (compat/bench's Runner). It prints each pair and the
median ratio on/off of throughput and of broker CPU per GB, with the other load on the machine.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import threading
import urllib.request
from dataclasses import replace
from pathlib import Path

from compat.bench.workloads import Runner, Sample, Scale
from compat.targets import HOST, KbrokerTarget, free_port

WORKLOADS = ("P1", "P4")


class Scraper:
    """GETs /metrics every ``interval`` seconds until stopped (a Prometheus server's load)."""

    def __init__(self, url: str, interval: float) -> None:
        self.url, self.interval = url, interval
        self.stopped = threading.Event()
        self.scrapes = 0
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self.stopped.wait(self.interval):
            with urllib.request.urlopen(self.url, timeout=10) as response:
                response.read()
            self.scrapes += 1


def one_run(run: int, scale: Scale, root: Path, payload_dir: Path, scrape_s: float) -> dict[str, list[Sample]]:
    http = f"{HOST}:{free_port()}"
    targets = {"off": KbrokerTarget(root / f"off-{run}"),
               "on": KbrokerTarget(root / f"on-{run}", extra={"kbroker.http.listeners": f"http://{http}"})}
    runners: dict[str, Runner] = {}
    scraper = Scraper(f"http://{http}/metrics", scrape_s)
    try:
        for name, target in targets.items():
            target.start()
            runners[name] = Runner(target, run, scale, payload_dir, WORKLOADS, ("rdk",), lambda line: None)
        scraper.thread.start()
        for runner in runners.values():
            runner.warm_up()
        step = run
        for workload in WORKLOADS:
            for runner in runners.values():
                runner.prepare(workload)
            order = ["off", "on"] if step % 2 == 0 else ["on", "off"]
            step += 1
            for name in order:
                call, wire_topic = runners[name].phase(workload, "rdk")
                runners[name].measure(workload, "rdk", call, wire_topic)
        with urllib.request.urlopen(f"http://{http}/metrics", timeout=10) as response:
            text = response.read().decode()
        assert "kafka_server_brokertopicmetrics_messagesin_total" in text, "metrics were not counting"
        return {name: runner.samples for name, runner in runners.items()}
    finally:
        scraper.stopped.set()
        for target in targets.values():
            target.close()
            shutil.rmtree(target.workdir, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m compat.metrics_overhead", description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--produce-mib", type=int, default=256, help="P1 MiB per run")
    parser.add_argument("--backlog-mib", type=int, default=256, help="P4 backlog MiB")
    parser.add_argument("--scrape-s", type=float, default=1.0, help="seconds between scrapes of /metrics")
    args = parser.parse_args(argv)
    scale = replace(Scale(), produce_bytes=args.produce_mib << 20, backlog_bytes=args.backlog_mib << 20,
                    warmup_bytes=32 << 20, timeout=600.0)
    ratios: dict[str, list[float]] = {w: [] for w in WORKLOADS}
    cpu_ratios: dict[str, list[float]] = {w: [] for w in WORKLOADS}
    with tempfile.TemporaryDirectory(prefix="kbroker-metrics-overhead-") as tmp:
        root = Path(tmp)
        payload_dir = root / "payload"
        payload_dir.mkdir()
        for run in range(args.runs):
            samples = one_run(run, scale, root, payload_dir, args.scrape_s)
            for off, on in zip(samples["off"], samples["on"], strict=True):
                off_s, on_s = off.summary(), on.summary()
                ratios[off.workload].append(on.mb_s / off.mb_s)
                cpu_ratios[off.workload].append(on_s["broker_cpu_s_per_gb"] / off_s["broker_cpu_s_per_gb"])
                print(f"run {run} {off.workload} rdk: off {off.mb_s:7.1f} MB/s ({off_s['broker_cpu_s_per_gb']:.2f} "
                      f"CPU-s/GB, others {off_s['other_cpu_share']:.0%}), on {on.mb_s:7.1f} MB/s "
                      f"({on_s['broker_cpu_s_per_gb']:.2f} CPU-s/GB, others {on_s['other_cpu_share']:.0%}): "
                      f"on/off {on.mb_s / off.mb_s:.3f}", flush=True)
    for workload in WORKLOADS:
        print(f"{workload} rdk metrics on/off over {args.runs} runs: throughput median "
              f"{statistics.median(ratios[workload]):.3f} (each {', '.join(f'{r:.3f}' for r in ratios[workload])}); "
              f"broker CPU per GB median {statistics.median(cpu_ratios[workload]):.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
