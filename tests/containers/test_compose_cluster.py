"""docker-compose.yml, run as compose would run it: each service a container of the image built
here, with the file's environment, volumes and shared network namespace. Only the published
ports differ: each is moved to a free one on this host, and every "localhost:<port>" in the
environment with it, so the advertised addresses still match.

Then the leader of a partition is killed (SIGKILL) and the failover is measured: from the kill
until every surviving broker names a new leader for each partition the victim led, and until an
acks=all produce to each of them succeeds; records acknowledged before and after are all read back.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import yaml
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from compat.container_engine import Engine
from kbroker.testing.local import free_port, metadata
from tests.containers.node import ContainerNode, unique_name

COMPOSE_FILE = Path(__file__).resolve().parents[2] / "docker-compose.yml"
TOPIC = "failover"
PARTITIONS = 6
FAILOVER_DEADLINE_S = 60.0


class ComposeCluster:
    """The compose file's services as containers (see the module docstring)."""

    def __init__(self, engine: Engine, image: str) -> None:
        services = yaml.safe_load(COMPOSE_FILE.read_text())["services"]
        prefix = unique_name("compose")
        published = {int(p.split(":")[0]) for s in services.values() for p in s.get("ports", [])}
        self.moved = {port: free_port() for port in published}

        def move(text: str) -> str:
            return re.sub(r"localhost:(\d+)", lambda m: f"localhost:{self.moved.get(int(m[1]), int(m[1]))}", text)

        self.nodes: dict[str, ContainerNode] = {}
        for name, service in services.items():  # the file lists each service after those it needs
            namespace = service.get("network_mode", "")
            volumes = [v.split(":")[0] for v in service.get("volumes", [])]
            ports = [tuple(int(n) for n in p.split(":")) for p in service.get("ports", [])]
            self.nodes[name] = ContainerNode(
                engine, image, f"{prefix}-{name}",
                env={k: move(str(v)) for k, v in (service.get("environment") or {}).items()},
                ports=[(self.moved[host], self.moved[container]) for host, container in ports],
                volume=f"{prefix}-{volumes[0]}" if volumes else None,
                network=f"container:{prefix}-{namespace.removeprefix('service:')}" if namespace else None,
                entrypoint=service.get("entrypoint"),
            )
        self.brokers = {int(n.env["KAFKA_NODE_ID"]): n for n in self.nodes.values()
                        if n.env.get("KAFKA_PROCESS_ROLES") == "broker"}

    def port(self, broker: int) -> int:
        return int(self.brokers[broker].env["KAFKA_ADVERTISED_LISTENERS"].rpartition(":")[2])

    @property
    def bootstrap(self) -> str:
        return ",".join(f"localhost:{self.port(b)}" for b in sorted(self.brokers))

    def up(self) -> None:
        for node in self.nodes.values():
            node.run()
        for node in self.nodes.values():
            if node.env:
                node.wait_healthy()

    def down(self, engine: Engine) -> None:
        for node in reversed(self.nodes.values()):
            node.remove()
        for volume in {n.volume for n in self.nodes.values() if n.volume}:
            engine.run("volume", "rm", "-f", volume, check=False)

    def leaders(self, broker: int) -> dict[int, int]:
        """{partition: leader} as ``broker`` sees the topic."""
        topics = metadata("127.0.0.1", self.port(broker), [TOPIC], timeout=2.0).topics
        return {p.partition_index: p.leader_id for p in topics[0].partitions}


@pytest.fixture
def cluster(engine: Engine, kbroker_image: str) -> Iterator[ComposeCluster]:
    composed = ComposeCluster(engine, kbroker_image)
    try:
        started = time.monotonic()
        composed.up()
        print(f"\ncompose cluster (controller + 3 brokers) healthy in {time.monotonic() - started:.1f} s")
        yield composed
    finally:
        composed.down(engine)


def test_compose_cluster_survives_a_leader_kill(cluster: ComposeCluster) -> None:
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "enable.idempotence": True,
                         "linger.ms": 5, "socket.timeout.ms": 5000, "request.timeout.ms": 5000})
    acked: list[bytes] = []

    def send(values: range, partitions: list[int]) -> None:
        failures: list[object] = []
        for value in values:
            producer.produce(TOPIC, str(value).encode(), partition=partitions[value % len(partitions)],
                             on_delivery=lambda err, msg: failures.append(err) if err else acked.append(msg.value()))
        assert producer.flush(FAILOVER_DEADLINE_S) == 0
        assert failures == []

    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic(TOPIC, PARTITIONS, 3)])[TOPIC].result(30)
    wait_until(lambda: all(len(cluster.leaders(b)) == PARTITIONS and -1 not in cluster.leaders(b).values()
                           for b in cluster.brokers), "every broker knows every leader")
    send(range(0, 300), list(range(PARTITIONS)))

    victim = cluster.leaders(1)[0]
    led = [p for p, leader in cluster.leaders(victim).items() if leader == victim]
    survivors = [b for b in cluster.brokers if b != victim]
    killed_at = time.monotonic()
    cluster.brokers[victim].kill()
    wait_until(lambda: all(all(cluster.leaders(b)[p] not in (victim, -1) for p in led) for b in survivors),
               f"new leaders for partitions {led} of broker {victim}")
    leader_s = time.monotonic() - killed_at
    send(range(300, 300 + len(led)), led)  # one acks=all record to each moved partition
    probe_s = time.monotonic() - killed_at
    print(f"\nleader kill (broker {victim}, partitions {led}): new leaders on every survivor after {leader_s:.2f} s, "
          f"acks=all produce to each after {probe_s:.2f} s")
    send(range(300 + len(led), 600), list(range(PARTITIONS)))
    read = read_partitions(f"localhost:{cluster.port(survivors[0])}", len(acked))
    assert sorted(read, key=int) == sorted(acked, key=int)  # nothing lost, nothing twice


def read_partitions(bootstrap: str, count: int) -> list[bytes]:
    """Every record of the topic, read partition by partition from the start (no consumer group:
    the point is the log, not the group coordinator's own failover)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused", "enable.auto.commit": False})
    consumer.assign([TopicPartition(TOPIC, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
    values: list[bytes] = []
    deadline = time.monotonic() + FAILOVER_DEADLINE_S
    try:
        while len(values) < count and time.monotonic() < deadline:
            message = consumer.poll(1.0)
            if message is not None and message.error() is None:
                values.append(message.value())
    finally:
        consumer.close()
    return values


def wait_until(condition: Callable[[], bool], what: str, timeout: float = FAILOVER_DEADLINE_S) -> None:
    deadline = time.monotonic() + timeout
    last: object = None
    while time.monotonic() < deadline:
        try:
            if condition():
                return
        except (OSError, KeyError, IndexError) as exc:  # a broker restarting or not knowing the topic yet
            last = exc
        time.sleep(0.02)
    raise AssertionError(f"not within {timeout:.0f} s: {what} (last error: {last})")
