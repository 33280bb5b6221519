"""Online migration of a group between the classic protocol and KIP-848 (Kafka 4's upgrade and
downgrade, ``group.consumer.migration.policy=bidirectional``), with real confluent-kafka clients.

Two classic members consume a 6-partition topic; a member with ``group.protocol=consumer`` joins
the same group: the group becomes a consumer group (ListGroups type, ConsumerGroupDescribe) whose
classic members keep working through JoinGroup/SyncGroup/Heartbeat/OffsetCommit, and the three
own disjoint partitions covering the topic. The consumer-protocol member then leaves: the group
is a classic group again and the two classic members own everything. Across it all, every
produced record is consumed (duplicates after a rebalance are allowed: at-least-once) and the
committed offsets end at the end of every partition.

Waiting is bounded polling of the members (no fixed sleeps).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator

import pytest
from confluent_kafka import Consumer, ConsumerGroupType, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.broker_process import BrokerProcess

DEADLINE_S = 25.0
PARTITIONS = 6


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    data = tmp_path_factory.mktemp("migration") / "data"
    proc = BrokerProcess(str(data), {"group.consumer.heartbeat.interval.ms": "500",
                                     "group.initial.rebalance.delay.ms": "0"})
    proc.start()
    yield proc
    proc.close()


class Member:
    def __init__(self, bootstrap: str, group: str, topic: str, protocol: str) -> None:
        config = {"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                  "enable.auto.commit": False, "group.protocol": protocol}
        if protocol == "classic":
            config.update({"session.timeout.ms": 6000, "heartbeat.interval.ms": 300})
        self.consumer = Consumer(config)
        self.consumer.subscribe([topic])
        self.values: set[str] = set()
        self.closed = False

    @property
    def assignment(self) -> set[int]:
        return {tp.partition for tp in self.consumer.assignment()}

    def pump(self) -> None:
        if self.closed:
            return
        msg = self.consumer.poll(0.02)
        if msg is not None and msg.error() is None:
            self.values.add(msg.value().decode())

    def commit(self) -> None:
        try:
            self.consumer.commit(asynchronous=False)
        except KafkaException:
            pass  # nothing consumed since the last commit, or a rebalance under way: committed later

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self.consumer.close()


def wait_until(members: list[Member], condition: Callable[[], bool], what: str) -> None:
    start = time.monotonic()
    while time.monotonic() - start < DEADLINE_S:
        for m in members:
            m.pump()
        if condition():
            return
    raise AssertionError(f"timed out waiting for {what}: {[sorted(m.assignment) for m in members]}")


def group_type(admin: AdminClient, group: str) -> ConsumerGroupType:
    listed = admin.list_consumer_groups(request_timeout=10).result()
    return next(g.type for g in listed.valid if g.group_id == group)


def split(members: list[Member]) -> bool:
    owned = [m.assignment for m in members]
    return (all(owned) and sum(len(o) for o in owned) == PARTITIONS
            and set().union(*owned) == set(range(PARTITIONS)))


def test_classic_group_upgrades_and_downgrades_online(broker: BrokerProcess) -> None:
    topic, group = f"mig-{uuid.uuid4().hex[:8]}", f"mig-group-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(timeout=20)
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    produced: set[str] = set()

    def produce(tag: str) -> None:
        for i in range(60):
            value = f"{tag}-{i}"
            producer.produce(topic, value.encode(), partition=i % PARTITIONS)
            produced.add(value)
        assert producer.flush(20) == 0

    def consumed_all(members: list[Member]) -> Callable[[], bool]:
        return lambda: produced <= set().union(*(m.values for m in members))

    def committed_to(members: list[Member], offset: int) -> Callable[[], bool]:
        def check() -> bool:
            for m in members:
                m.commit()
            tps = [TopicPartition(topic, p) for p in range(PARTITIONS)]
            return all(tp.offset == offset for tp in members[0].consumer.committed(tps, timeout=10))
        return check

    produce("a")
    classic = [Member(broker.bootstrap, group, topic, "classic") for _ in range(2)]
    new: Member | None = None
    try:
        wait_until(classic, lambda: split(classic), "the classic members to split the partitions")
        wait_until(classic, consumed_all(classic), "the first records")
        for m in classic:
            m.commit()
        assert group_type(admin, group) == ConsumerGroupType.CLASSIC

        new = Member(broker.bootstrap, group, topic, "consumer")
        everyone = [*classic, new]
        wait_until(everyone, lambda: split(everyone), "three disjoint complete assignments")
        assert group_type(admin, group) == ConsumerGroupType.CONSUMER
        described = admin.describe_consumer_groups([group])[group].result(timeout=10)
        assert described.type == ConsumerGroupType.CONSUMER and len(described.members) == 3
        assert {p for mem in described.members for p in (tp.partition for tp in mem.assignment.topic_partitions)} \
            == set(range(PARTITIONS))
        produce("b")
        wait_until(everyone, consumed_all(everyone), "the records produced after the upgrade")
        # the classic members commit to the consumer group (generation = their member epoch)
        wait_until(everyone, committed_to(everyone, 20), "commits of all three members to reach offset 20")

        new.close()
        wait_until(classic, lambda: split(classic), "the classic members to own everything again")
        assert group_type(admin, group) == ConsumerGroupType.CLASSIC
        produce("c")
        wait_until(classic, consumed_all(everyone), "the records produced after the downgrade")
        wait_until(classic, committed_to(classic, 30), "the committed offsets to reach the end of every partition")
        log = broker.read_log()
        assert f"classic group {group} upgraded" in log and f"consumer group {group} downgraded" in log
    finally:
        for m in [*classic, *([new] if new is not None else [])]:
            m.close()
