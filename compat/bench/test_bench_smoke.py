"""Smoke test of the benchmark harness: every workload, tiny, against kbroker and Apache Kafka.

It checks only that each workload × client × broker completed and produced numbers (and that the
report files were written); benchmarks never assert timings. The real run is
``python -m compat.bench`` (see compat/bench/results/).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from compat.bench.__main__ import main
from compat.bench.workloads import DRIVERS, WORKLOADS

pytestmark = pytest.mark.timeout(240)


def test_every_workload_completes_on_both_brokers(tmp_path: Path) -> None:
    out = tmp_path / "results"
    assert main(["--smoke", "--no-plot", "--out", str(out), "--workdir", str(tmp_path)]) == 0

    data = json.loads((out / "results.json").read_text())
    assert (out / "results.md").read_text().count("\n| P") == len(data["table"])
    seen = {(s["workload"], s["driver"], s["target"]) for s in data["samples"]}
    assert seen == {(w, d, t) for w in WORKLOADS for d in DRIVERS for t in ("kbroker", "kafka")}
    for s in data["samples"]:
        assert s["records"] > 0 and s["broker_cpu_s"] >= 0
        if s["workload"] == "P5":
            assert 0 < s["p50_us"] <= s["p99_us"]
        else:
            assert s["mb_s"] > 0 and s["logical_bytes"] > 0
        if s["workload"] == "P7":
            assert 0 < s["wire_mb_s"] < s["mb_s"]  # LZ4 shrinks the half-repeated payload
    assert all(row["ratio"]["median"] > 0 for row in data["table"])
    assert set(data["limits"]) >= {"tcp_loopback_mb_s", "sendfile_loopback_mb_s", "pagecache_write_mb_s"}
