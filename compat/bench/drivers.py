"""Load generators: Kafka's Java tools and librdkafka (confluent-kafka), one call per phase.

Every function takes the broker's bootstrap address and returns a :class:`Phase` holding what
the client measured (records, value bytes, seconds or latencies) and the client's own CPU time.

- Java: ``org.apache.kafka.tools.ProducerPerformance`` from the kafka-tools 4.3.1 jar for
  producing; :file:`BenchClient.java` (compiled once with ``javac``) for assign-based consuming
  and end-to-end latency, because ConsumerPerformance needs consumer groups and EndToEndLatency
  reports whole milliseconds.
- librdkafka: :mod:`compat.bench.rdk_driver` in its own Python process.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from compat.bench.procstat import ToolError, result_line, run_tool
from compat.deps import kafka_classpath

HERE = Path(__file__).resolve().parent
TOOL_JVM = ["-Xmx512M", "-XX:+UseG1GC", "-Djava.awt.headless=true"]  # the kafka-*-perf-test.sh heap
PERF_LINE = re.compile(
    r"(\d+) records sent, ([\d.]+) records/sec \(([\d.]+) MB/sec\), ([\d.]+) ms avg latency, "
    r"([\d.]+) ms max latency, (\d+) ms 50th, (\d+) ms 95th, (\d+) ms 99th"
)


@dataclass
class Phase:
    """What one load-generator run measured."""

    records: int
    bytes: int
    seconds: float = 0.0
    client_cpu_s: float = 0.0
    latencies_us: list[int] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)


def _bench_classes() -> Path:
    """Directory holding the compiled BenchClient (compiled on first use, keyed by source hash)."""
    source = HERE / "BenchClient.java"
    digest = hashlib.sha256(source.read_bytes()).hexdigest()[:16]
    out = Path.home() / ".cache" / "kbroker" / f"bench-classes-{digest}"
    if not (out / "BenchClient.class").exists():
        javac = shutil.which("javac")
        if javac is None:
            raise ToolError("javac (a JDK 17+) is needed to compile compat/bench/BenchClient.java")
        tmp = out.with_name(out.name + ".tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        subprocess.run([javac, "-nowarn", "-cp", kafka_classpath(), "-d", str(tmp), str(source)],
                       check=True, capture_output=True, timeout=300)
        shutil.rmtree(out, ignore_errors=True)
        tmp.rename(out)
    return out


def java_produce(bootstrap: str, topic: str, count: int, payload: Path, record_size: int,
                 props: dict[str, str], timeout: float) -> Phase:
    """ProducerPerformance: ``count`` records from ``payload`` with producer ``props``, unthrottled."""
    cmd = ["java", *TOOL_JVM, "-cp", kafka_classpath(), "org.apache.kafka.tools.ProducerPerformance",
           "--bootstrap-server", bootstrap, "--topic", topic, "--num-records", str(count),
           "--throughput", "-1", "--payload-file", str(payload),
           "--command-property", *[f"{k}={v}" for k, v in props.items()]]
    run = run_tool(cmd, timeout)
    summaries = list(PERF_LINE.finditer(run.stdout))  # progress lines, then the final summary
    match = summaries[-1] if summaries else None
    if match is None or int(match.group(1)) != count:
        raise ToolError(f"ProducerPerformance summary missing or short:\n{run.stdout[-1500:]}")
    rate = float(match.group(2))
    return Phase(count, count * record_size, count / rate, run.cpu_s,
                 extra={"producer_p50_ms": int(match.group(6)), "producer_p99_ms": int(match.group(8))})


def java_consume(bootstrap: str, topic: str, count: int, timeout: float) -> Phase:
    cp = f"{_bench_classes()}:{kafka_classpath()}"
    run = run_tool(["java", *TOOL_JVM, "-cp", cp, "BenchClient", "consume", bootstrap, topic, str(count)], timeout)
    res = json.loads(result_line(run.stdout))
    return Phase(res["records"], res["bytes"], res["seconds"], run.cpu_s)


def java_latency(bootstrap: str, topic: str, count: int, rate: float, payload: Path, timeout: float,
                 warmup: int = 0) -> Phase:
    cp = f"{_bench_classes()}:{kafka_classpath()}"
    cmd = ["java", *TOOL_JVM, "-cp", cp, "BenchClient", "latency", bootstrap, topic, str(count), str(rate),
           str(payload), str(warmup)]
    run = run_tool(cmd, timeout)
    res = json.loads(result_line(run.stdout))
    return Phase(res["records"], res["bytes"], (count + warmup) / rate, run.cpu_s, latencies_us=res["latencies_us"])


def _rdk(spec: dict[str, Any], timeout: float) -> tuple[dict[str, Any], float]:
    cmd = [sys.executable, "-m", "compat.bench.rdk_driver", json.dumps({**spec, "timeout": timeout})]
    run = run_tool(cmd, timeout + 30, cwd=HERE.parents[1])
    return json.loads(result_line(run.stdout)), run.cpu_s


def rdk_produce(bootstrap: str, topic: str, count: int, payload: Path, config: dict[str, Any],
                timeout: float) -> Phase:
    spec = {"mode": "produce", "bootstrap": bootstrap, "topic": topic, "count": count,
            "payload": str(payload), "config": config}
    res, cpu = _rdk(spec, timeout)
    return Phase(res["records"], res["bytes"], res["seconds"], cpu)


def rdk_consume(bootstrap: str, topic: str, count: int, timeout: float, config: dict[str, Any] | None = None) -> Phase:
    """``count`` records from offset 0; ``config``: extra consumer settings (e.g. TLS)."""
    spec = {"mode": "consume", "bootstrap": bootstrap, "topic": topic, "count": count, "config": config or {}}
    res, cpu = _rdk(spec, timeout)
    return Phase(res["records"], res["bytes"], res["seconds"], cpu)


def rdk_latency(bootstrap: str, topic: str, count: int, rate: float, payload: Path, timeout: float,
                warmup: int = 0) -> Phase:
    spec = {"mode": "latency", "bootstrap": bootstrap, "topic": topic, "count": count, "rate": rate,
            "payload": str(payload), "warmup": warmup}
    res, cpu = _rdk(spec, timeout)
    return Phase(res["records"], res["bytes"], (count + warmup) / rate, cpu, latencies_us=res["latencies_us"])


def admin_client(bootstrap: str) -> Any:
    """A librdkafka admin client (info-level logs off: it reports purged events when freed)."""
    from confluent_kafka.admin import AdminClient

    return AdminClient({"bootstrap.servers": bootstrap, "log_level": 4})


def create_topic(admin: Any, topic: str, timeout: float = 30.0) -> None:
    """One partition, replication factor 1."""
    from confluent_kafka.admin import NewTopic

    admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=1)],
                        request_timeout=timeout)[topic].result(timeout)
