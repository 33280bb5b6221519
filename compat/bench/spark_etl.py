"""``python -m compat.bench.spark_etl``: pipeline 1's end-to-end throughput on kbroker and on
Apache Kafka in one run.

For each round and each broker (alternating which goes first): a fresh topic of 3 partitions is
filled with ``--events`` generator events (untimed), then the streaming ETL
(``kbroker.spark.streaming_etl``, both sinks, availableNow) processes the whole backlog; the
figure is events / wall seconds from starting the queries to both terminating. Both brokers run
from ``compat.targets`` with the same server.properties; one SparkSession (local[2]) serves all
runs, and a warm-up run on each broker comes first so JIT warm-up is not billed to either.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

from kbroker.spark import generator, streaming_etl
from kbroker.spark.connector import build_session

from compat.harness import Harness
from compat.targets import KbrokerTarget, Target, kafka_target


def run_once(spark: object, target: Target, workdir: Path, events: int) -> float:
    """Fill a fresh topic, run the pipeline over it; return events per second."""
    harness = Harness(target.bootstrap, workdir / "harness")
    try:
        source = f"events-{uuid.uuid4().hex[:8]}"
        harness.create(source, 3)
        harness.create(f"{source}-windows", 1)
    finally:
        harness.close()
    start_ms = (int(time.time()) // 60 - 60) * 60_000
    generator.produce(target.bootstrap, source, generator.generate(events, start_ms=start_ms, interval_ms=20),
                      events, progress=False)  # fmt: skip
    out = workdir / source
    started = time.monotonic()
    queries = streaming_etl.start(
        spark, target.bootstrap, source, f"{source}-windows", str(out / "parquet"), str(out / "checkpoint"),
        available_now=True,
    )  # fmt: skip
    for query in queries:
        query.awaitTermination()
        if query.exception() is not None:
            raise RuntimeError(f"pipeline failed on {target.name}: {query.exception()}")
    return events / (time.monotonic() - started)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m compat.bench.spark_etl", description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=200_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / "results" / "spark_etl.json")
    args = parser.parse_args(argv)
    workdir = Path(tempfile.mkdtemp(prefix="kbroker-spark-bench-"))
    targets = {"kafka": kafka_target(workdir / "kafka"), "kbroker": KbrokerTarget(workdir / "kbroker")}
    spark = build_session("kbroker-spark-etl-bench")
    spark.sparkContext.setLogLevel("ERROR")
    rates: dict[str, list[float]] = {name: [] for name in targets}
    try:
        for target in targets.values():
            target.start()
            run_once(spark, target, workdir / target.name, min(args.events, 20_000))  # warm-up, not counted
        for round_no in range(args.rounds):
            order = list(targets) if round_no % 2 == 0 else list(reversed(targets))
            for name in order:
                rate = run_once(spark, targets[name], workdir / name, args.events)
                rates[name].append(rate)
                print(f"round {round_no + 1} {name}: {rate:,.0f} events/s", flush=True)
    finally:
        spark.stop()
        for target in targets.values():
            target.close()
    summary = {
        "events": args.events, "rounds": args.rounds,
        "events_per_s": rates,
        "median": {name: statistics.median(r) for name, r in rates.items()},
    }  # fmt: skip
    summary["ratio_kbroker_to_kafka"] = summary["median"]["kbroker"] / summary["median"]["kafka"]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(summary, indent=1))
    print(f"median events/s: kafka {summary['median']['kafka']:,.0f}, kbroker {summary['median']['kbroker']:,.0f}, "
          f"ratio {summary['ratio_kbroker_to_kafka']:.2f}; written to {args.out}")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
