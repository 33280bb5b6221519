"""JBOD: a broker with two ``log.dirs`` and ``kafka-reassign-partitions`` moving replicas
between them (AlterReplicaLogDirs, followed by ``--verify`` through DescribeLogDirs).

The shared targets have one log dir, so the scenario starts its own single-node target of the
same kind (``compat.targets``: Kafka 4.3.1 from the jars, or kbroker) with
``log.dirs=<dir-a>,<dir-b>`` and the shared server.properties otherwise, and stops it after.
The client under test writes and reads the records around the move; the moves and the error
cases go through Kafka's own tools. Directory paths are reported as ``dir-a`` / ``dir-b``.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

from compat.clients import CLIENTS
from compat.deps import kafka_classpath
from compat.scenarios import Run, scenario
from compat.targets import KbrokerTarget, Target, kafka_target

REASSIGN = "org.apache.kafka.tools.reassign.ReassignPartitionsCommand"
LOG_DIRS = "org.apache.kafka.tools.LogDirsCommand"
TOPICS = "org.apache.kafka.tools.TopicCommand"
OFFSETS = "org.apache.kafka.tools.GetOffsetShell"
JVM_FLAGS = ["-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1"]
NODE_ID = 1
PARTITIONS = 2
VERIFY_DEADLINE_S = 60.0


def jbod_target(run: Run, workdir: Path, dirs: list[Path]) -> Target:
    extra = {"log.dirs": ",".join(str(d) for d in dirs)}
    return kafka_target(workdir, extra) if run.target.name == "kafka" else KbrokerTarget(workdir, extra=extra)


def tool(bootstrap: str, main: str, *args: str) -> tuple[int, list[str]]:
    """A Kafka tool's exit status and stdout lines (stderr's first line appended on failure)."""
    java = shutil.which("java") or "java"
    proc = subprocess.run([java, *JVM_FLAGS, "-cp", kafka_classpath(), main, "--bootstrap-server", bootstrap, *args],
                          capture_output=True, text=True, timeout=120, check=False)  # fmt: skip
    lines = proc.stdout.splitlines()
    if proc.returncode != 0:
        lines += proc.stderr.splitlines()[:1]
    return proc.returncode, lines


def placement(bootstrap: str, topic: str, names: dict[str, str]) -> dict[str, list[list[Any]]]:
    """``kafka-log-dirs --describe``: partition -> [[dir name, is future]]."""
    _code, out = tool(bootstrap, LOG_DIRS, "--describe", "--broker-list", str(NODE_ID), "--topic-list", topic)
    report = json.loads(next(line for line in out if line.startswith("{")))
    found: dict[str, list[list[Any]]] = {}
    for log_dir in report["brokers"][0]["logDirs"]:
        for p in log_dir["partitions"]:
            found.setdefault(p["partition"], []).append([names[log_dir["logDir"]], p["isFuture"]])
    return found


def plan_file(path: Path, topic: str, dirs: dict[int, str]) -> str:
    path.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": topic, "partition": p, "replicas": [NODE_ID], "log_dirs": [d]} for p, d in dirs.items()]}))
    return str(path)


def named(lines: list[str], names: dict[str, str]) -> list[str]:
    out = []
    for line in lines:
        for path, name in names.items():
            line = line.replace(path, name)
        out.append(re.sub(r"\s+$", "", line))
    return out


@scenario("jbod_reassign_log_dirs", needs=("produce", "consume"), clients=("java-cli", "confluent"))
def jbod_reassign_log_dirs(run: Run) -> Any:
    """Two log dirs: 40 records in 2 partitions, ``kafka-reassign-partitions --execute`` with
    each partition's other dir as ``log_dirs``, ``--verify`` until done, then where the replicas
    are, every record read back and a write after; a plan naming an unknown dir."""
    workdir = Path(run.target.workdir) / f"jbod-{run.client.name}"  # type: ignore[attr-defined]
    dirs = [workdir / "dir-a", workdir / "dir-b"]
    names = {str(d): d.name for d in dirs}
    target = jbod_target(run, workdir / "node", dirs)
    target.start()
    client = CLIENTS[run.client.name](target.bootstrap, workdir / "client")
    try:
        bootstrap = target.bootstrap
        topic = run.name()
        created = tool(bootstrap, TOPICS, "--create", "--topic", topic, "--partitions", str(PARTITIONS),
                       "--replication-factor", "1")[0]  # fmt: skip
        before = _wait_placement(bootstrap, topic, names)
        written = client.produce(topic, run.recs(40))
        other = {p: str(next(d for d in dirs if d.name != before[f"{topic}-{p}"][0][0])) for p in range(PARTITIONS)}
        plan = plan_file(workdir / "plan.json", topic, other)
        executed = tool(bootstrap, REASSIGN, "--reassignment-json-file", plan, "--execute")
        deadline = time.monotonic() + VERIFY_DEADLINE_S
        while True:
            verified = tool(bootstrap, REASSIGN, "--reassignment-json-file", plan, "--verify")
            if not any("in progress" in line for line in verified[1]) or time.monotonic() > deadline:
                break
        after = placement(bootstrap, topic, names)
        read = 0
        offsets = tool(bootstrap, OFFSETS, "--topic", topic)[1]  # "topic:partition:end offset" lines
        ends = {int(line.split(":")[1]): int(line.split(":")[2]) for line in offsets}
        for p, end in sorted(ends.items()):  # one partition at a time: the console consumer reads so
            got = client.consume(topic, [p], 0, until={p: end}, timeout_s=30.0) if end else {}
            read += len(got.get("records", got.get("stdout", []))) if isinstance(got, dict) else 0
        more = client.produce(topic, run.recs(1, prefix="after"))
        bad_plan = plan_file(workdir / "bad.json", topic, {0: str(workdir / "no-such-dir")})
        bad = tool(bootstrap, REASSIGN, "--reassignment-json-file", bad_plan, "--execute", "--timeout", "3000")
        return {
            "created": created, "written": len(written) if isinstance(written, list) else written,
            "before": {p: len(v) for p, v in before.items()},
            "moved_to_other_dir": {p: after.get(f"{topic}-{p}") == [[Path(other[p]).name, False]]
                                   for p in range(PARTITIONS)},
            "execute": [executed[0], _drop_assignment(named(executed[1], names))],
            "verify": [verified[0], named(verified[1], names)],
            "read": read,
            "after_move_write": more,
            "unknown_dir": [bad[0], _drop_assignment(named(bad[1], names))],
        }  # fmt: skip
    finally:
        client.close()
        target.close()


def _wait_placement(bootstrap: str, topic: str, names: dict[str, str]) -> dict[str, list[list[Any]]]:
    deadline = time.monotonic() + 15
    found = placement(bootstrap, topic, names)
    while len(found) < PARTITIONS and time.monotonic() < deadline:
        found = placement(bootstrap, topic, names)
    return found


def _drop_assignment(lines: list[str]) -> list[str]:
    """The tool's output without the current-assignment JSON (its replica order and dir names are
    the brokers' own choice) — the messages after it stay."""
    return [line for line in lines if not line.startswith("{")]
