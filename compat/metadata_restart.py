"""Restart time of a controller and of a broker whose metadata log holds many records (issue 16, snapshots).

``python -m compat.metadata_restart WORKDIR --records 100000 [--set KEY=VALUE ...]`` starts the isolated
kbroker cluster of ``compat.cluster`` (controller 100, brokers 1-3) in WORKDIR, creates 100 topics and
alters ten configs of each until the metadata log holds ``--records`` ConfigRecords (IncrementalAlterConfigs
through the brokers, 1,000 records per request), then stops everything. Run again on the same WORKDIR it
skips the filling and measures ``--rounds`` restarts: the controller alone (SIGTERM, start) until its log
says it is active, then broker 1 until the controller lists it. Each figure is given from the spawn and,
to leave the interpreter's start (seconds on a loaded machine) out, from the process's first log line.
"""

from __future__ import annotations

import argparse
import datetime
import time
from pathlib import Path

from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic, ResourceType

from compat.cluster import KbrokerCluster

KEYS = ["retention.ms", "delete.retention.ms", "min.compaction.lag.ms", "max.compaction.lag.ms",
        "file.delete.delay.ms", "flush.messages", "flush.ms", "retention.bytes", "segment.ms", "max.message.bytes"]
TOPICS = [f"t{i}" for i in range(100)]


def _stamp(line: str) -> datetime.datetime:
    return datetime.datetime.strptime(line[:23], "%Y-%m-%d %H:%M:%S,%f")


def _since_first_line(text: str, done: str) -> float:
    """Seconds from the first timestamped log line of ``text`` to the first line containing ``done``."""
    lines = [line for line in text.splitlines() if line[:2] == "20"]
    end = next(line for line in lines if done in line)
    return (_stamp(end) - _stamp(lines[0])).total_seconds()


def _wait_text(path: Path, mark: int, needle: str, timeout_s: float) -> str:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        text = path.read_bytes()[mark:].decode(errors="replace")
        if needle in text:
            return text
        time.sleep(0.01)
    raise TimeoutError(f"{path}: no {needle!r} within {timeout_s:.0f} s")


def fill(cluster: KbrokerCluster, records: int) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    for future in admin.create_topics([NewTopic(name, 1, 1) for name in TOPICS]).values():
        future.result(60)
    began = time.monotonic()
    rounds = records // (len(TOPICS) * len(KEYS))
    for value in range(rounds):
        resources = [ConfigResource(ResourceType.TOPIC, name, incremental_configs=[
            ConfigEntry(key, str(1_000_000 + value), incremental_operation=AlterConfigOpType.SET) for key in KEYS])
            for name in TOPICS]
        for future in admin.incremental_alter_configs(resources).values():
            future.result(60)
    print(f"{rounds * len(TOPICS) * len(KEYS)} ConfigRecords written in {time.monotonic() - began:.0f} s", flush=True)


def restarts(cluster: KbrokerCluster, rounds: int) -> None:
    controller = cluster.nodes[100]
    controller.start()
    controller.wait_listening()
    _wait_text(controller.log, 0, "active at epoch", 120)
    for _ in range(rounds):
        cluster.stop(100)
        mark = controller.log.stat().st_size
        began = time.monotonic()
        cluster.start_node(100)
        text = _wait_text(controller.log, mark, "active at epoch", 120)
        print(f"controller: spawn -> active {time.monotonic() - began:.2f} s, first log line -> active "
              f"{_since_first_line(text, 'active at epoch'):.2f} s", flush=True)
    broker = cluster.nodes[1]
    for _ in range(rounds):
        mark = broker.log.stat().st_size if broker.log.exists() else 0
        began = time.monotonic()
        cluster.start_node(1)
        try:
            cluster.wait_registered([1], timeout=60)
            text = _wait_text(broker.log, mark, "broker unfenced", 30)
            print(f"broker 1: spawn -> listed {time.monotonic() - began:.2f} s, first log line -> unfenced "
                  f"{_since_first_line(text, 'broker unfenced'):.2f} s", flush=True)
        except (RuntimeError, TimeoutError) as exc:
            print(f"broker 1: not back within 60 s: {exc}", flush=True)
        cluster.stop(1)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("workdir", type=Path)
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="a setting for every node (e.g. metadata.log.max.record.bytes.between.snapshots=1048576)")
    args = parser.parse_args(argv)
    filled = (args.workdir / "node-100" / "data" / "__cluster_metadata-0").exists()
    cluster = KbrokerCluster(args.workdir, dict(item.split("=", 1) for item in args.set))
    try:
        if filled:
            restarts(cluster, args.rounds)
        else:
            cluster.start()
            fill(cluster, args.records)
    finally:
        cluster.close()


if __name__ == "__main__":
    main()
