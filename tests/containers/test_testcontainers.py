"""testcontainers-python through podman's Docker-compatible API: kbroker's ``KbrokerContainer`` and
``KbrokerCluster`` with real clients, and compat's Kafka-in-a-container path (``DockerKafkaTarget``)
against Apache Kafka 4.3.1 in the image built from the Maven jars."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from confluent_kafka import Consumer, Producer

from compat.targets import DockerKafkaTarget
from kbroker.testing import KbrokerCluster, KbrokerContainer
from kbroker.testing.local import metadata


def test_kbroker_container(kbroker_image: str, docker_client_kw: dict[str, Any]) -> None:
    started = time.monotonic()
    with KbrokerContainer(kbroker_image, {"num.partitions": 3}, docker_client_kw=docker_client_kw) as node:
        print(f"\nKbrokerContainer ready in {time.monotonic() - started:.2f} s at {node.bootstrap_servers}")

        async def round_trip() -> tuple[bytes, bytes]:
            async with AIOKafkaProducer(bootstrap_servers=node.bootstrap_servers) as producer:
                await producer.send_and_wait("tc", b"hello", key=b"k1")
            async with AIOKafkaConsumer("tc", bootstrap_servers=node.bootstrap_servers,
                                        auto_offset_reset="earliest") as consumer:
                message = await asyncio.wait_for(consumer.getone(), 30)
            return message.key, message.value

        assert asyncio.run(round_trip()) == (b"k1", b"hello")
        assert len(metadata("127.0.0.1", node.port, ["tc"]).topics[0].partitions) == 3


def test_kbroker_cluster_of_three(kbroker_image: str, docker_client_kw: dict[str, Any]) -> None:
    started = time.monotonic()
    with KbrokerCluster(3, kbroker_image, docker_client_kw=docker_client_kw) as cluster:
        print(f"\nKbrokerCluster (controller + 3 brokers) ready in {time.monotonic() - started:.2f} s")
        producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all"})
        producer.produce("replicated", b"v")
        assert producer.flush(30) == 0
        partition = metadata("127.0.0.1", cluster.brokers[0].port, ["replicated"]).topics[0].partitions[0]
        assert sorted(partition.replica_nodes) == [1, 2, 3]
        assert sorted(partition.isr_nodes) == [1, 2, 3]


def test_compat_kafka_in_a_container(kafka_image: str, docker_client_kw: dict[str, Any], tmp_path: Path) -> None:
    """compat's DockerKafkaTarget (the apache/kafka path) on the image built from the Maven jars:
    start, produce, restart on the same data, consume."""
    target = DockerKafkaTarget(tmp_path, {"auto.create.topics.enable": "true"}, image=kafka_image,
                               docker_client_kw=docker_client_kw)
    started = time.monotonic()
    target.start()
    try:
        print(f"\nApache Kafka 4.3.1 container listening in {time.monotonic() - started:.1f} s at {target.bootstrap}")
        producer = Producer({"bootstrap.servers": target.bootstrap, "acks": "all"})
        producer.produce("kept", b"across a restart")
        assert producer.flush(60) == 0
        target.restart()
        consumer = Consumer({"bootstrap.servers": target.bootstrap, "group.id": "compat",
                             "auto.offset.reset": "earliest"})
        consumer.subscribe(["kept"])
        deadline = time.monotonic() + 60
        message = None
        while message is None and time.monotonic() < deadline:
            message = consumer.poll(1.0)
            if message is not None and message.error() is not None:
                message = None
        consumer.close()
        assert message is not None and message.value() == b"across a restart"
    finally:
        target.close()
