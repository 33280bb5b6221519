"""kbroker.testing's local nodes: start time (median of 20 starts), topics, kill -9 and restart,
the log, a replicated cluster surviving a leader crash, and the pytest plugin's marker."""

from __future__ import annotations

import statistics
import time

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from kbroker.testing import LocalBroker, LocalCluster, kafka_broker

STARTS = 20


def test_median_start_to_ready_of_twenty_starts_is_well_under_a_second() -> None:
    with kafka_broker():
        pass  # the template process pays the imports once
    seconds = []
    for _ in range(STARTS):
        started = time.monotonic()
        with kafka_broker():
            seconds.append(time.monotonic() - started)
    median = statistics.median(seconds)
    print(f"\nkafka_broker() start-to-ready over {STARTS} starts: median {median * 1000:.0f} ms, "
          f"max {max(seconds) * 1000:.0f} ms")
    assert median < 1.0


def produce(bootstrap: str, topic: str, values: list[bytes], partition: int = 0) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    failures: list[object] = []
    for value in values:
        producer.produce(topic, value, partition=partition, on_delivery=lambda err, _msg: err and failures.append(err))
    assert producer.flush(30) == 0
    assert failures == []


def read(bootstrap: str, topic: str, count: int, partition: int = 0) -> list[bytes]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused", "enable.auto.commit": False,
                         "auto.offset.reset": "earliest"})
    consumer.assign([TopicPartition(topic, partition, 0)])
    values: list[bytes] = []
    deadline = time.monotonic() + 30
    while len(values) < count and time.monotonic() < deadline:
        message = consumer.poll(1.0)
        if message is not None and message.error() is None:
            values.append(message.value())
    consumer.close()
    return values


def test_topics_kill_nine_restart_and_log(kbroker: LocalBroker) -> None:
    kbroker.create_topic("kept", partitions=2, config={"retention.ms": 3_600_000})
    assert len(kbroker.metadata(["kept"]).topics[0].partitions) == 2
    produce(kbroker.bootstrap_servers, "kept", [b"a", b"b"])
    kbroker.kill()
    assert not kbroker.is_running()
    kbroker.restart()
    assert read(kbroker.bootstrap_servers, "kept", 2) == [b"a", b"b"]
    assert "not shut down cleanly" in kbroker.read_log()  # the crash, seen by the second start
    assert kbroker.stop() == 0
    assert "shut down cleanly" in kbroker.read_log().splitlines()[-1]


@pytest.mark.kbroker(num_partitions=4, auto_create_topics_enable=True)
def test_marker_settings_reach_the_node(kbroker: LocalBroker) -> None:
    produce(kbroker.bootstrap_servers, "auto", [b"x"])
    assert len(kbroker.metadata(["auto"]).topics[0].partitions) == 4


def test_cluster_survives_a_leader_crash(kbroker_cluster: LocalCluster) -> None:
    kbroker_cluster.create_topic("replicated", partitions=1)
    produce(kbroker_cluster.bootstrap_servers, "replicated", [b"before"])
    leader = kbroker_cluster.leader("replicated")
    kbroker_cluster.broker(leader).kill()
    deadline = time.monotonic() + 30
    while kbroker_cluster.leader("replicated") in (leader, -1):
        assert time.monotonic() < deadline, "no new leader"
        time.sleep(0.02)
    produce(kbroker_cluster.bootstrap_servers, "replicated", [b"after"])
    assert read(kbroker_cluster.bootstrap_servers, "replicated", 2) == [b"before", b"after"]
