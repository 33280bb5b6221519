"""A consumer group on a 3-broker cluster keeps going when its coordinator's broker crashes.

The same script and assertions on Apache Kafka 4.3.1 and on kbroker (the shared clusters of
conftest.py, isolated and combined: on the combined one the coordinator's crash also takes a
voter away, possibly the active controller). A group's coordinator is the leader of its
``__consumer_offsets`` partition (RF 3); when that broker is SIGKILLed the partition gets a new
leader, which replays the partition and takes the group over. Two confluent-kafka consumers
(classic protocol, manual synchronous commits) read a
6-partition RF 3 topic while the coordinator is killed: every produced value is consumed, the
committed offsets end at each partition's end, and no committed offset ever moves backwards
(commits are acknowledged only once the ISR has them).
"""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from compat.cluster import Cluster

CLUSTER_TOPOLOGIES = ("isolated", "combined")
TOPIC = "orders"
GROUP = "billing"
PARTITIONS = 6
PER_PHASE = 300
DEADLINE_S = 90.0


def produce(bootstrap: str, values: range) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                         "linger.ms": 5, "message.timeout.ms": 60000})
    failures: list[object] = []
    for value in values:
        producer.produce(TOPIC, key=str(value).encode(), value=str(value).encode(),
                         on_delivery=lambda err, _msg: err is not None and failures.append(err))
        producer.poll(0)
    assert producer.flush(60) == 0
    assert failures == []


def committed(admin_bootstrap: str) -> dict[int, int]:
    probe = Consumer({"bootstrap.servers": admin_bootstrap, "group.id": GROUP, "enable.auto.commit": False})
    try:
        answer = probe.committed([TopicPartition(TOPIC, p) for p in range(PARTITIONS)], timeout=10)
        return {tp.partition: tp.offset for tp in answer}
    finally:
        probe.close()


@pytest.mark.timeout(300)
def test_group_survives_a_coordinator_crash(cluster: Cluster) -> None:
    target = cluster.name
    bootstrap = cluster.bootstrap
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(TOPIC, PARTITIONS, 3)])[TOPIC].result(timeout=30)
    produce(bootstrap, range(PER_PHASE))
    consumers = [
        Consumer({"bootstrap.servers": bootstrap, "group.id": GROUP, "enable.auto.commit": False,
                  "auto.offset.reset": "earliest", "session.timeout.ms": 6000,
                  "heartbeat.interval.ms": 500, "client.id": f"member-{i}"})
        for i in range(2)
    ]
    seen: set[int] = set()
    history: list[dict[int, int]] = []  # every commit each member made, in order

    def consume_until(total: int) -> None:
        deadline = time.monotonic() + DEADLINE_S
        while len(seen) < total:
            assert time.monotonic() < deadline, f"{len(seen)} of {total} consumed"
            for consumer in consumers:
                message = consumer.poll(0.1)
                if message is None or message.error():
                    continue
                seen.add(int(message.value()))
                try:
                    consumer.commit(message=message, asynchronous=False)
                    history.append({message.partition(): message.offset() + 1})
                except KafkaException:
                    pass  # a commit refused during the failover is retried by later ones

    try:
        for consumer in consumers:
            consumer.subscribe([TOPIC])
        consume_until(PER_PHASE)
        (description,) = admin.describe_consumer_groups([GROUP]).values()
        coordinator = description.result(timeout=30).coordinator.id
        cluster.kill(coordinator)
        produce(bootstrap, range(PER_PHASE, 2 * PER_PHASE))
        consume_until(2 * PER_PHASE)
        cluster.start_node(coordinator)
        # Drain: keep polling until every partition's committed offset reached its end.
        ends = {}
        for p in range(PARTITIONS):
            _low, high = consumers[0].get_watermark_offsets(TopicPartition(TOPIC, p), timeout=10)
            ends[p] = high
        deadline = time.monotonic() + DEADLINE_S
        while committed(bootstrap) != ends:
            assert time.monotonic() < deadline, (committed(bootstrap), ends)
            for consumer in consumers:
                consumer.poll(0.1)
    finally:
        for consumer in consumers:
            consumer.close()
    assert seen == set(range(2 * PER_PHASE))
    latest: dict[int, int] = {}
    for commit in history:  # a member's successful commits only ever move forward
        for partition, offset in commit.items():
            assert offset >= latest.get(partition, 0), (partition, offset, latest)
            latest[partition] = offset
    print(f"{target}: coordinator broker {coordinator} killed; {len(history)} commits, all consumed")
