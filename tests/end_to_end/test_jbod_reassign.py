"""Moving replicas between the ``log.dirs`` of one broker (JBOD) with Apache Kafka's own
``kafka-reassign-partitions`` (4.3.1, from the jars) against a kbroker with two log dirs.

A plan with explicit ``log_dirs`` makes the tool send AlterReplicaLogDirs; ``--verify`` follows
the move through DescribeLogDirs (the future replica, then the replica in its new dir). The
records produced before and during the move are all there after it, and the partition takes
writes in its new dir. The bare requests check Kafka's error codes.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from kio.schema.alter_replica_log_dirs.v2.request import (
    AlterReplicaLogDir,
    AlterReplicaLogDirsRequest,
    AlterReplicaLogDirTopic,
)
from kio.schema.types import TopicName
from kio.static.primitive import i32

from tests.broker_process import BrokerProcess
from tests.end_to_end.test_java_cli import KafkaCli, Tools, kafka_cli  # noqa: F401  (the session fixture)
from tests.kbroker.handlers.wire import call

REASSIGN = "org.apache.kafka.tools.reassign.ReassignPartitionsCommand"
LOG_DIRS = "org.apache.kafka.tools.LogDirsCommand"
TOPIC = "jbod"
PARTITIONS = 3
DEADLINE_S = 60.0


@pytest.fixture(scope="module")
def dirs(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    base = tmp_path_factory.mktemp("jbod")
    return [str(base / "dir-a"), str(base / "dir-b")]


@pytest.fixture(scope="module")
def broker(dirs: list[str]) -> Iterator[BrokerProcess]:
    proc = BrokerProcess(dirs[0], overrides={"log.dirs": ",".join(dirs)})
    proc.start()
    yield proc
    proc.close()


@pytest.fixture(scope="module")
def tools(kafka_cli: KafkaCli, broker: BrokerProcess) -> Tools:  # noqa: F811
    match = re.search(r"\bnode (\d+)\b", broker.banner)
    assert match, broker.banner
    return Tools(kafka_cli, broker.bootstrap, int(match.group(1)))


def placement(tools: Tools) -> dict[str, list[tuple[str, bool]]]:
    """``kafka-log-dirs --describe``: partition -> [(log dir, is future)]."""
    out = tools.cli.run(LOG_DIRS, "--bootstrap-server", tools.bootstrap, "--describe",
                        "--broker-list", str(tools.node_id), "--topic-list", TOPIC).text
    report = json.loads(next(line for line in out.splitlines() if line.startswith("{")))
    found: dict[str, list[tuple[str, bool]]] = {}
    for log_dir in report["brokers"][0]["logDirs"]:
        for p in log_dir["partitions"]:
            found.setdefault(p["partition"], []).append((log_dir["logDir"], p["isFuture"]))
    return found


def test_reassign_partitions_moves_replicas_between_log_dirs(tools: Tools, dirs: list[str], tmp_path: Path) -> None:
    tools.topics("--create", "--topic", TOPIC, "--partitions", str(PARTITIONS), "--replication-factor", "1")
    produce(tools.bootstrap, [(b"k%d" % i, b"v%d-" % i + b"x" * 2000) for i in range(300)])
    before = placement(tools)
    assert sorted(before) == [f"{TOPIC}-{p}" for p in range(PARTITIONS)]
    target = {name: next(d for d in dirs if d != where[0][0]) for name, where in before.items()}
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": TOPIC, "partition": p, "replicas": [tools.node_id], "log_dirs": [target[f"{TOPIC}-{p}"]]}
        for p in range(PARTITIONS)]}))  # fmt: skip

    executed = tools.cli.run(REASSIGN, "--bootstrap-server", tools.bootstrap,
                             "--reassignment-json-file", str(plan), "--execute").text
    # produced while the replicas may still be moving (tests/storage/test_log_dir_move.py
    # interleaves appends and copy steps deterministically)
    during = 5
    produce(tools.bootstrap, [(b"d%d" % n, b"during") for n in range(during)])
    for p in range(PARTITIONS):
        assert (f"Successfully started moving log directory to {target[f'{TOPIC}-{p}']} for replica {TOPIC}-{p} "
                f"with broker {tools.node_id}") in executed, executed

    deadline = time.monotonic() + DEADLINE_S
    while True:
        verified = tools.cli.run(REASSIGN, "--bootstrap-server", tools.bootstrap,
                                 "--reassignment-json-file", str(plan), "--verify", check=False).text
        if "in progress" not in verified or time.monotonic() > deadline:
            break
    for p in range(PARTITIONS):
        assert f"Reassignment of replica {TOPIC}-{p}-{tools.node_id} completed successfully." in verified, verified
    assert placement(tools) == {name: [(target[name], False)] for name in before}

    total = 300 + during
    assert sorted(read_all(tools.bootstrap)) == sorted([b"k%d" % i for i in range(300)] +
                                                       [b"d%d" % n for n in range(during)])
    produce(tools.bootstrap, [(b"after", b"moved")])  # the moved replica takes writes in its new dir
    assert len(read_all(tools.bootstrap)) == total + 1


def produce(bootstrap: str, records: list[tuple[bytes, bytes]]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True})
    errors: list[object] = []
    for key, value in records:
        producer.produce(TOPIC, value, key, on_delivery=lambda err, _msg: errors.append(err) if err else None)
    assert producer.flush(60) == 0 and not errors, errors


def read_all(bootstrap: str) -> list[bytes]:
    """Every record's key, read from each partition's start to its end offset."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "jbod-check", "enable.auto.commit": False})
    try:
        ends = {p: consumer.get_watermark_offsets(TopicPartition(TOPIC, p), timeout=30)[1] for p in range(PARTITIONS)}
        consumer.assign([TopicPartition(TOPIC, p, 0) for p in range(PARTITIONS)])
        keys: list[bytes] = []
        positions = dict.fromkeys(ends, 0)
        deadline = time.monotonic() + DEADLINE_S
        while any(positions[p] < ends[p] for p in ends) and time.monotonic() < deadline:
            msg = consumer.poll(1.0)
            if msg is not None and msg.error() is None:
                keys.append(msg.key())
                positions[msg.partition()] = msg.offset() + 1
        return keys
    finally:
        consumer.close()


def alter(broker: BrokerProcess, path: str, topic: str, partition: int) -> int:
    request = AlterReplicaLogDirsRequest(dirs=(AlterReplicaLogDir(path=path, topics=(
        AlterReplicaLogDirTopic(name=TopicName(topic), partitions=(i32(partition),)),)),))  # fmt: skip
    response = call(broker.bootstrap, request, 2)
    (result,) = response.results
    (partition_result,) = result.partitions
    return int(partition_result.error_code)


def test_alter_replica_log_dirs_errors_as_kafka(broker: BrokerProcess, tools: Tools, dirs: list[str]) -> None:
    tools.topics("--create", "--topic", "jbod-errors", "--partitions", "2", "--replication-factor", "1",
                 check=False)
    assert alter(broker, "/no/such/dir", "jbod-errors", 0) == 57  # LOG_DIR_NOT_FOUND
    assert alter(broker, dirs[0] + "/", "jbod-errors", 0) == 57  # not the configured path exactly
    assert alter(broker, dirs[0], "no-such-topic", 0) == 3  # UNKNOWN_TOPIC_OR_PARTITION
    assert alter(broker, dirs[0], "jbod-errors", 7) == 3
    # already there, or moving: NONE
    assert alter(broker, dirs[0], "jbod-errors", 0) == 0
    assert alter(broker, dirs[1], "jbod-errors", 0) == 0
