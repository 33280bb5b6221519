"""Process accounting and machine description for the benchmarks.

- :func:`cpu_seconds` reads utime+stime of a running process (all its threads) from
  ``/proc/<pid>/stat``: the broker's CPU cost of a phase is the difference across it.
- :func:`run_tool` runs a load generator to completion and returns its output and the CPU
  seconds it used (``wait4`` rusage), so a report can tell a client-bound run from a
  broker-bound one.
- :func:`machine` describes the machine (nproc, memory, CPU model, kernel, Python, Java,
  client library versions, kbroker commit).
"""

from __future__ import annotations

import os
import platform
import re
import resource
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from compat.targets import KAFKA_STOCK_JVM

CLK_TCK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """utime + stime of ``pid`` in seconds (every thread of the process)."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    fields = stat[stat.rindex(")") + 2:].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK  # fields 14 and 15 of proc(5)


def system_busy_seconds() -> float:
    """CPU seconds all cores spent busy since boot (``/proc/stat``: everything but idle and iowait)."""
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    user, nice, system, _idle, _iowait, irq, softirq, steal = fields[:8]
    return (user + nice + system + irq + softirq + steal) / CLK_TCK


@dataclass
class ToolRun:
    stdout: str
    stderr: str
    seconds: float
    cpu_s: float


class ToolError(RuntimeError):
    """A load generator failed; the message carries the command and its output tail."""


def run_tool(cmd: list[str], timeout: float, cwd: Path | None = None) -> ToolRun:
    """Run ``cmd``; raise :class:`ToolError` on a non-zero exit or timeout.

    The child's CPU seconds come from the RUSAGE_CHILDREN difference around it (``communicate``
    reaps it, and nothing else is reaped meanwhile: the brokers run until stopped).
    """
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=cwd)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        proc.kill()
        out, err = proc.communicate()
        raise ToolError(f"timed out after {timeout:.0f} s: {' '.join(cmd)}\n{err[-2000:]}") from exc
    seconds = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise ToolError(f"exit {proc.returncode}: {' '.join(cmd)}\n{out[-1500:]}\n{err[-3000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return ToolRun(out, err, seconds, cpu)


def result_line(output: str) -> str:
    """The JSON after the ``RESULT`` marker that the bench drivers print."""
    for line in reversed(output.splitlines()):
        if line.startswith("RESULT "):
            return line[len("RESULT "):]
    raise ToolError(f"no RESULT line in output:\n{output[-2000:]}")


def _first(cmd: list[str]) -> str:
    try:
        res = subprocess.run(cmd, capture_output=True, text=True, timeout=30, check=False)
    except OSError as exc:
        return f"unavailable ({exc})"
    text = (res.stdout + res.stderr).strip()
    return text.splitlines()[0] if text else "?"


def machine(data_dir: Path) -> dict[str, object]:
    """A description of this machine and the software under test."""
    cpuinfo = Path("/proc/cpuinfo").read_text()
    model = re.search(r"^model name\s*:\s*(.+)$", cpuinfo, re.M)
    meminfo = Path("/proc/meminfo").read_text()
    mem_kb = re.search(r"^MemTotal:\s*(\d+)", meminfo, re.M)
    try:
        import confluent_kafka

        rdk = f"confluent-kafka {confluent_kafka.version()}, librdkafka {confluent_kafka.libversion()[0]}"
    except ImportError:
        rdk = "not installed"
    repo = Path(__file__).resolve().parents[2]
    commit = _first(["git", "-C", str(repo), "rev-parse", "--short", "HEAD"])
    dirty = _first(["git", "-C", str(repo), "status", "--porcelain", "--untracked-files=no"])
    fs = "?"
    df = subprocess.run(["df", "--output=fstype,source", str(data_dir)], capture_output=True, text=True)
    if df.returncode == 0 and len(df.stdout.splitlines()) > 1:
        fs = " ".join(df.stdout.splitlines()[1].split())
    return {
        "nproc": os.cpu_count(),
        "memory_gib": round(int(mem_kb.group(1)) / 1024 / 1024, 1) if mem_kb else None,
        "cpu_model": model.group(1).strip() if model else platform.processor(),
        "kernel": platform.release(),
        "python": sys.version.split()[0],
        "java": _first(["java", "-version"]),
        "kafka": "Apache Kafka 4.3.1 (Maven jars, KRaft combined node, compat/targets.py), stock JVM: "
                 + " ".join(KAFKA_STOCK_JVM),
        "librdkafka_client": rdk,
        "kbroker_commit": commit + ("" if dirty in ("", "?") else " (+ uncommitted changes)"),
        "data_filesystem": fs,
        "note": "brokers and load generators share the same cores",
    }
