"""The kbroker image, run as a user runs it, driven by real clients from this host: its metadata
(size, user, volume, HEALTHCHECK, version), produce/consume, KAFKA_* settings alone and over a
mounted server.properties, a bad variable, SIGTERM drain and restart with the volume kept, and a
HEALTHCHECK that passes only once the node is ready for clients."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, Producer

from compat.container_engine import Engine
from compat.container_images import package_version
from kbroker.testing.local import free_port, metadata
from tests.containers.node import ContainerNode, unique_name

RECORDS = 500
MAX_IMAGE_MB = 200


@pytest.fixture
def nodes(engine: Engine) -> Iterator[list[ContainerNode]]:
    """Containers (and their volumes) a test started, removed afterwards."""
    started: list[ContainerNode] = []
    yield started
    for node in reversed(started):
        node.remove()
    for volume in {n.volume for n in started if n.volume}:
        engine.run("volume", "rm", "-f", volume, check=False)


def test_image_metadata(engine: Engine, kbroker_image: str) -> None:
    (image,) = json.loads(engine.run("image", "inspect", kbroker_image).stdout)
    size_mb = image["Size"] / 1e6
    print(f"\n{kbroker_image}: {size_mb:.0f} MB")
    assert kbroker_image.endswith(f":{package_version()}")
    assert image["Config"]["User"] == "kbroker"
    assert "/var/lib/kbroker" in image["Config"]["Volumes"]
    assert image["Config"]["Labels"]["org.opencontainers.image.version"] == package_version()
    healthcheck = image.get("Healthcheck") or image["Config"].get("Healthcheck")
    assert healthcheck["Test"] == ["CMD", "kbroker", "healthcheck"]
    assert size_mb < MAX_IMAGE_MB


def test_produce_consume_sigterm_drain_and_restart_with_the_volume(
        engine: Engine, kbroker_image: str, nodes: list[ContainerNode]) -> None:
    port = free_port()
    volume = unique_name("data")
    node = ContainerNode(engine, kbroker_image, unique_name("single"), ports=[(port, port)], volume=volume,
                         env={"KAFKA_ADVERTISED_LISTENERS": f"PLAINTEXT://localhost:{port}"})
    nodes.append(node)
    started = time.monotonic()
    node.run()
    node.wait_healthy()
    print(f"\ncontainer start-to-ready (run -d to HEALTHCHECK passing): {time.monotonic() - started:.2f} s")
    bootstrap = f"localhost:{port}"
    produce(bootstrap, "drained", RECORDS)
    assert consume(bootstrap, "drained", RECORDS) == [str(i).encode() for i in range(RECORDS)]

    seconds = node.stop()
    print(f"docker stop (SIGTERM drain): {seconds:.2f} s")
    assert node.exit_code() == 0
    assert "shut down cleanly" in node.logs()

    node.start()  # same container, same volume
    node.wait_healthy()
    assert consume(bootstrap, "drained", RECORDS) == [str(i).encode() for i in range(RECORDS)]
    assert "not shut down cleanly" not in node.logs()

    node.remove()  # a new container on the kept volume
    again = ContainerNode(engine, kbroker_image, unique_name("again"), ports=[(port, port)], volume=volume,
                          env=node.env)
    nodes.append(again)
    again.run()
    again.wait_healthy()
    assert consume(bootstrap, "drained", RECORDS) == [str(i).encode() for i in range(RECORDS)]


def test_one_variable_alone_changes_one_default(engine: Engine, kbroker_image: str,
                                                nodes: list[ContainerNode]) -> None:
    """`docker run -p 9092:9092 -e KAFKA_NUM_PARTITIONS=5`: the port is published elsewhere here,
    so the broker is asked directly (a client would follow the advertised localhost:9092)."""
    port = free_port()
    node = ContainerNode(engine, kbroker_image, unique_name("env"), ports=[(port, 9092)],
                         env={"KAFKA_NUM_PARTITIONS": 5})
    nodes.append(node)
    node.run()
    node.wait_healthy()
    answer = metadata("127.0.0.1", port, ["auto-created"], allow_auto_topic_creation=True)
    assert [(b.host, b.port) for b in answer.brokers] == [("localhost", 9092)]
    deadline = time.monotonic() + 30
    while len(answer.topics[0].partitions) != 5 and time.monotonic() < deadline:
        time.sleep(0.05)
        answer = metadata("127.0.0.1", port, ["auto-created"])
    assert len(answer.topics[0].partitions) == 5
    written = node.exec("cat", "/var/lib/kbroker/server.properties")
    assert "# environment variable KAFKA_NUM_PARTITIONS\nnum.partitions=5\n" in written
    assert "# image default\nadvertised.listeners=PLAINTEXT://localhost:9092\n" in written


def test_mounted_server_properties_under_the_environment(engine: Engine, kbroker_image: str,
                                                         nodes: list[ContainerNode], tmp_path) -> None:
    port = free_port()
    config = tmp_path / "server.properties"
    config.write_text(f"listeners=PLAINTEXT://:{port}\nadvertised.listeners=PLAINTEXT://localhost:{port}\n"
                      "num.partitions=2\nlog.dirs=/var/lib/kbroker/mounted\nauto.create.topics.enable=true\n")
    config.chmod(0o644)
    node = ContainerNode(engine, kbroker_image, unique_name("mounted"), ports=[(port, port)],
                         env={"KAFKA_NUM_PARTITIONS": 4},
                         mounts=[(str(config), "/mnt/shared/config/server.properties")])
    nodes.append(node)
    node.run()
    node.wait_healthy()
    produce(f"localhost:{port}", "from-file", 1)
    assert len(metadata("127.0.0.1", port, ["from-file"]).topics[0].partitions) == 4  # the variable won
    assert node.exec("ls", "/var/lib/kbroker/mounted")  # the file's log.dirs was used


def test_an_unknown_variable_stops_the_container_with_status_2(engine: Engine, kbroker_image: str,
                                                              nodes: list[ContainerNode]) -> None:
    node = ContainerNode(engine, kbroker_image, unique_name("typo"), env={"KAFKA_NUM_PARTITONS": 5})
    nodes.append(node)
    node.run()
    deadline = time.monotonic() + 30
    while node.running() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert node.exit_code() == 2
    assert "unknown configuration key 'num.partitons' (from environment variable KAFKA_NUM_PARTITONS)" in node.logs()


def test_healthy_only_once_ready_for_clients(engine: Engine, kbroker_image: str,
                                             nodes: list[ContainerNode]) -> None:
    """A broker whose controller is not there yet listens, but is not ready: the HEALTHCHECK fails
    until the controller (started later in the broker's network namespace) has registered it."""
    cluster = {"KAFKA_CONTROLLER_QUORUM_VOTERS": "100@localhost:9093", "KAFKA_BROKER_HEARTBEAT_INTERVAL_MS": 500}
    broker = ContainerNode(engine, kbroker_image, unique_name("broker"),
                           env={**cluster, "KAFKA_NODE_ID": 1, "KAFKA_PROCESS_ROLES": "broker"})
    nodes.append(broker)
    broker.run()
    port_open = "import socket; socket.create_connection(('127.0.0.1', 9092), timeout=1).close()"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if engine.run("exec", broker.name, "python3", "-c", port_open, check=False).returncode == 0:
            break
        time.sleep(0.05)
    else:
        raise AssertionError(f"the broker never listened:\n{broker.logs()[-3000:]}")
    assert not broker.healthy()  # listening, but no controller has registered it
    controller = ContainerNode(engine, kbroker_image, unique_name("controller"), network=f"container:{broker.name}",
                               env={**cluster, "KAFKA_NODE_ID": 100, "KAFKA_PROCESS_ROLES": "controller",
                                    # the broker holds the image's HTTP port in the namespace they share
                                    "KAFKA_KBROKER_HTTP_LISTENERS": "http://0.0.0.0:8081"})
    nodes.append(controller)
    controller.run()
    controller.wait_healthy()  # a controller is healthy once the quorum has a leader
    broker.wait_healthy()


def produce(bootstrap: str, topic: str, count: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})
    failures: list[object] = []
    for i in range(count):
        producer.produce(topic, str(i).encode(), on_delivery=lambda err, msg: err and failures.append(err))
    assert producer.flush(30) == 0
    assert failures == []


def consume(bootstrap: str, topic: str, count: int, timeout: float = 30.0) -> list[bytes]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": unique_name("group"),
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe([topic])
    values: list[bytes] = []
    deadline = time.monotonic() + timeout
    try:
        while len(values) < count and time.monotonic() < deadline:
            message = consumer.poll(1.0)
            if message is not None and message.error() is None:
                values.append(message.value())
    finally:
        consumer.close()
    return sorted(values, key=int)
