"""min.insync.replicas from server.properties, on Apache Kafka 4.3.1 and kbroker started alike.

Kafka's storage format writes the static min.insync.replicas as the cluster-wide default
(DYNAMIC_DEFAULT_BROKER_CONFIG), so the broker and every topic describe it as 2; and because
Kafka 4 compares the ISR with the effective min ISR — min(min.insync.replicas, replication
factor) — an acks=all write to a one-replica topic is accepted. kbroker once seeded "1" instead
and refused nothing; both now answer the same.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, ConfigResource, ConfigSource, NewTopic, ResourceType

from compat.targets import KbrokerTarget, Target, kafka_target

SETTINGS = {"min.insync.replicas": "2"}


@pytest.fixture(params=["kafka", "kbroker"])
def target(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Target]:
    workdir = tmp_path / request.param
    workdir.mkdir()
    started = kafka_target(workdir, SETTINGS) if request.param == "kafka" else KbrokerTarget(workdir, extra=SETTINGS)
    started.start()
    try:
        yield started
    finally:
        started.close()


def _described(admin: AdminClient, resource: ConfigResource) -> tuple[str, str]:
    entry = admin.describe_configs([resource])[resource].result(30)["min.insync.replicas"]
    return entry.value, ConfigSource(entry.source).name


def test_min_insync_replicas_is_the_cluster_default_and_capped_by_the_replication_factor(target: Target) -> None:
    admin = AdminClient({"bootstrap.servers": target.bootstrap})
    admin.create_topics([NewTopic("one-replica", 1, 1)])["one-replica"].result(30)
    broker = _described(admin, ConfigResource(ResourceType.BROKER, "1"))
    topic = _described(admin, ConfigResource(ResourceType.TOPIC, "one-replica"))
    producer = Producer({"bootstrap.servers": target.bootstrap, "acks": "all"})
    acked: list[object] = []
    producer.produce("one-replica", b"v", on_delivery=lambda err, _msg: acked.append(err))
    assert producer.flush(30) == 0
    print(f"{target.name}: broker {broker}, topic {topic}, acks=all to RF 1: {acked}")
    assert broker == ("2", "DYNAMIC_DEFAULT_BROKER_CONFIG")
    assert topic == ("2", "DYNAMIC_DEFAULT_BROKER_CONFIG")
    assert acked == [None]
