"""Dynamic broker configs (kafka-configs --entity-type brokers --alter) on Apache Kafka 4.3.1 and
kbroker side by side: the same IncrementalAlterConfigs requests get the same error codes and
messages, DescribeConfigs shows the same values and sources, and a topic without overrides
follows a changed default at once (no restart).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, ConfigResource, ConfigSource, NewTopic, ResourceType
from kio.schema.incremental_alter_configs.v1 import request as alter_v1
from kio.static.primitive import i8

from compat.targets import KbrokerTarget, Target, kafka_target
from tests.end_to_end.raw_kafka import RawClient

BROKER = 4
SET, DELETE = 0, 1
NONE, INVALID_CONFIG, INVALID_REQUEST = 0, 40, 42
DEADLINE_S = 30.0


@pytest.fixture(params=["kafka", "kbroker"])
def target(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Target]:
    workdir = tmp_path / request.param
    workdir.mkdir()
    started = kafka_target(workdir) if request.param == "kafka" else KbrokerTarget(workdir)
    started.start()
    try:
        yield started
    finally:
        started.close()


def alter(target: Target, name: str, *ops: tuple[int, str, str | None]) -> tuple[int, str | None]:
    """One IncrementalAlterConfigs on BROKER resource ``name`` ("" = cluster-wide default)."""
    client = RawClient(SimpleNamespace(port=target.port))
    try:
        request = alter_v1.IncrementalAlterConfigsRequest(
            resources=(alter_v1.AlterConfigsResource(
                resource_type=i8(BROKER), resource_name=name,
                configs=tuple(alter_v1.AlterableConfig(name=k, config_operation=i8(op), value=v) for op, k, v in ops),
            ),),
            validate_only=False,
        )
        result = client.request(44, 1, request).responses[0]
        return result.error_code, result.error_message
    finally:
        client.close()


def described(admin: AdminClient, resource: ConfigResource, key: str) -> tuple[str | None, str] | None:
    entry = admin.describe_configs([resource])[resource].result(DEADLINE_S).get(key)
    return None if entry is None else (entry.value, ConfigSource(entry.source).name)


def eventually_described(admin: AdminClient, resource: ConfigResource, key: str,
                         expected: tuple[str | None, str]) -> tuple[str | None, str] | None:
    """Kafka's brokers apply a committed config change when they replay it: read until it shows."""
    deadline = time.monotonic() + DEADLINE_S
    seen = described(admin, resource, key)
    while seen != expected and time.monotonic() < deadline:
        time.sleep(0.05)
        seen = described(admin, resource, key)
    return seen


def test_kafka_configs_alter_brokers_answers_as_kafka_does(target: Target) -> None:
    answers = {
        "default log.retention.ms": alter(target, "", (SET, "log.retention.ms", "123456")),
        "default unknown key": alter(target, "", (SET, "kbroker.test.unknown", "1")),
        "default log.dirs": alter(target, "", (SET, "log.dirs", "/x")),
        "default bad number": alter(target, "", (SET, "log.retention.ms", "abc")),
        "default below minimum": alter(target, "", (SET, "log.segment.bytes", "10")),
        "broker broker.rack": alter(target, "1", (SET, "broker.rack", "r1")),
        "broker min.insync.replicas": alter(target, "1", (SET, "min.insync.replicas", "1")),
        "broker log.segment.bytes": alter(target, "1", (SET, "log.segment.bytes", "2000000")),
        "another broker": alter(target, "2", (SET, "log.retention.ms", "5")),
        "delete unknown": alter(target, "", (DELETE, "never.set", None)),
    }
    print(target.name, answers)
    assert answers == {
        "default log.retention.ms": (NONE, None),
        "default unknown key": (NONE, None),
        "default log.dirs": (INVALID_REQUEST, "Cannot update these configs dynamically: [log.dirs]"),
        "default bad number": (INVALID_REQUEST, "Invalid value abc for configuration log.retention.ms: "
                                                "Not a number of type LONG"),
        "default below minimum": (INVALID_REQUEST, "Invalid value 10 for configuration log.segment.bytes: "
                                                   "Value must be at least 1048576"),
        "broker broker.rack": (INVALID_REQUEST, "Cannot update these configs dynamically: [broker.rack]"),
        "broker min.insync.replicas": (INVALID_CONFIG, "Broker-level min.insync.replicas cannot be altered "
                                                       "while ELR is enabled."),
        "broker log.segment.bytes": (NONE, None),
        "another broker": (INVALID_REQUEST, "Unexpected broker id, expected 1, but received 2"),
        "delete unknown": (NONE, None),
    }
    admin = AdminClient({"bootstrap.servers": target.bootstrap})
    broker = ConfigResource(ResourceType.BROKER, "1")
    assert eventually_described(admin, broker, "log.retention.ms", ("123456", "DYNAMIC_DEFAULT_BROKER_CONFIG")) \
        == ("123456", "DYNAMIC_DEFAULT_BROKER_CONFIG")
    assert eventually_described(admin, broker, "log.segment.bytes", ("2000000", "DYNAMIC_BROKER_CONFIG")) \
        == ("2000000", "DYNAMIC_BROKER_CONFIG")


def test_a_topic_without_overrides_follows_a_changed_broker_default_at_once(target: Target) -> None:
    admin = AdminClient({"bootstrap.servers": target.bootstrap})
    admin.create_topics([NewTopic("follows", 1, 1)])["follows"].result(DEADLINE_S)
    topic = ConfigResource(ResourceType.TOPIC, "follows")
    assert described(admin, topic, "retention.ms") == ("604800000", "DEFAULT_CONFIG")

    assert alter(target, "", (SET, "log.retention.ms", "3600000"), (SET, "log.segment.bytes", "1048576")) \
        == (NONE, None)
    assert eventually_described(admin, topic, "retention.ms", ("3600000", "DYNAMIC_DEFAULT_BROKER_CONFIG")) \
        == ("3600000", "DYNAMIC_DEFAULT_BROKER_CONFIG")
    assert alter(target, "1", (SET, "log.retention.ms", "7200000")) == (NONE, None)
    assert eventually_described(admin, topic, "retention.ms", ("7200000", "DYNAMIC_BROKER_CONFIG")) \
        == ("7200000", "DYNAMIC_BROKER_CONFIG")
    assert eventually_described(admin, topic, "segment.bytes", ("1048576", "DYNAMIC_DEFAULT_BROKER_CONFIG")) \
        == ("1048576", "DYNAMIC_DEFAULT_BROKER_CONFIG")

    # The log itself obeys the new default: 3 MiB of records roll at least twice at 1 MiB.
    producer = Producer({"bootstrap.servers": target.bootstrap, "linger.ms": 5})
    for _ in range(3 * 1024):
        producer.produce("follows", b"x" * 1024)
    assert producer.flush(DEADLINE_S) == 0
    if isinstance(target, KbrokerTarget):
        segments = sorted(target.workdir.glob("**/follows-0/*.log"))
        assert len(segments) >= 3, segments

    assert alter(target, "1", (DELETE, "log.retention.ms", None)) == (NONE, None)
    assert eventually_described(admin, topic, "retention.ms", ("3600000", "DYNAMIC_DEFAULT_BROKER_CONFIG")) \
        == ("3600000", "DYNAMIC_DEFAULT_BROKER_CONFIG")
