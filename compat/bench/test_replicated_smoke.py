"""Smoke test of the replicated benchmark (P3, tiny) on a kbroker cluster and a Kafka cluster.

Checks only that every phase completed on both clusters with sane outputs — every record
received, positive latencies, a throughput figure, the report files written; benchmarks never
assert timings. The real run is ``python -m compat.bench.replicated`` (compat/bench/results/).
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from compat.bench import replicated
from compat.bench.replicated import Scale, run_workload, table

pytestmark = pytest.mark.timeout(240)


def test_p3_completes_on_both_clusters(tmp_path: Path) -> None:
    # the tests' light JVM flags for Kafka (CI memory); the benchmark itself runs the stock JVM
    scale = replace(Scale.smoke(), p3_partitions=10, rate=200.0, latency_seconds=2.0, stock_jvm=False)
    lines: list[str] = []
    samples = [run_workload(name, "P3", 0, scale, tmp_path, lines.append) for name in ("kbroker", "kafka")]

    for s in samples:
        assert "error" not in s, "\n".join(lines)
        assert s["create"]["leaders_s"] > 0
        lat = s["latency"]
        assert lat["received"] == lat["records"] == int(scale.rate * scale.latency_seconds)
        assert 0 < lat["min_us"] <= lat["p50_us"] <= lat["p99_us"] <= lat["max_us"]
        assert 0 < lat["ack_p50_us"] <= lat["ack_p99_us"]
        thr = s["throughput"]
        assert thr["records"] == scale.throughput_bytes // 1024 and thr["mb_s"] > 0
        assert thr["broker_cpu_s"] > 0 and set(thr["node_cpu_s"]) == {"1", "2", "3", "100"}
    rows = table(samples)
    assert {r["metric"] for r in rows} >= {"latency p50 µs", "max produce MB/s", "brokers' CPU-s/GB"}
    assert all(r["ratio"]["median"] > 0 for r in rows if r["ratio"])
    out = tmp_path / "out"
    meta = {"command": "test", "started": "now", "duration_s": 1.0, "runs": 1, "scale": "smoke",
            "machine": {}, "notes": replicated.NOTES}
    out.mkdir()
    (out / "replicated.md").write_text(replicated.markdown(rows, samples, meta))
    assert (out / "replicated.md").read_text().count("\n| P3 |") == len(rows) + len(samples)  # table + per run
    json.dumps(samples)  # the samples are what replicated.json holds


def test_p8_completes_on_both_clusters(tmp_path: Path) -> None:
    """3 producer processes and a 3-member group over 30 partitions: every timed record arrives."""
    scale = replace(Scale.smoke(), stock_jvm=False)
    lines: list[str] = []
    samples = [run_workload(name, "P8", 0, scale, tmp_path, lines.append) for name in ("kbroker", "kafka")]
    for s in samples:
        assert "error" not in s, "\n".join(lines)
        p8 = s["p8"]
        assert p8["records"] > 0 and sum(p8["per_consumer"]) >= p8["records"]
        assert all(n > 0 for n in p8["per_consumer"])  # the group spread the partitions over all three
        assert 0 < p8["p50_us"] <= p8["p99_us"] <= p8["max_us"] and p8["mb_s"] > 0
    rows = table(samples)
    assert {r["metric"] for r in rows} >= {"produce MB/s (3 producers)", "e2e p99 µs (3-member group)"}
