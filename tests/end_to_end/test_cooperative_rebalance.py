"""Incremental cooperative rebalancing (KIP-429) through the classic protocol: the
``cooperative-sticky`` assignor runs in the client, the broker only has to carry the two
rebalance rounds. When members join, an existing member gives up only the partitions that move
(never everything), keeps consuming the rest, and the final assignment is disjoint and complete.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from tests.broker_process import BrokerProcess

PARTITIONS = 6
OVERRIDES = {"group.initial.rebalance.delay.ms": "0", "group.min.session.timeout.ms": "500",
             "offsets.topic.num.partitions": "3"}


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    proc = BrokerProcess(str(tmp_path_factory.mktemp("cooperative") / "data"), OVERRIDES)
    proc.start()
    try:
        yield proc
    finally:
        proc.close()


class CooperativeMember(threading.Thread):
    """A confluent-kafka consumer with cooperative-sticky; records every incremental assign
    and revoke it is told about, and what it owns."""

    def __init__(self, bootstrap: str, group: str, topic: str) -> None:
        super().__init__(daemon=True)
        self.consumer = Consumer({
            "bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
            "partition.assignment.strategy": "cooperative-sticky", "session.timeout.ms": 3000,
            "heartbeat.interval.ms": 200, "enable.auto.commit": False,
        })  # fmt: skip
        self.topic = topic
        self.owned: set[int] = set()
        self.revocations: list[tuple[frozenset[int], frozenset[int]]] = []  # (revoked, owned before)
        self.consumed: set[tuple[int, int]] = set()
        self.stopping = threading.Event()
        self.lock = threading.Lock()

    def _assigned(self, _consumer: object, partitions: list) -> None:
        with self.lock:
            self.owned |= {p.partition for p in partitions}

    def _revoked(self, _consumer: object, partitions: list) -> None:
        with self.lock:
            revoked = frozenset(p.partition for p in partitions)
            self.revocations.append((revoked, frozenset(self.owned)))
            self.owned -= revoked

    def run(self) -> None:
        self.consumer.subscribe([self.topic], on_assign=self._assigned, on_revoke=self._revoked)
        while not self.stopping.is_set():
            msg = self.consumer.poll(0.1)
            if msg is not None and msg.error() is None:
                with self.lock:
                    self.consumed.add((msg.partition(), msg.offset()))
        self.consumer.close()

    def snapshot(self) -> frozenset[int]:
        with self.lock:
            return frozenset(self.owned)


def wait_for_split(members: list[CooperativeMember], sizes: list[int], timeout: float = 30.0) -> float:
    """Seconds until the members own disjoint partitions covering the topic, in these sizes."""
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        owned = [m.snapshot() for m in members]
        union = frozenset().union(*owned)
        if sorted(len(o) for o in owned) == sorted(sizes) and len(union) == PARTITIONS == sum(map(len, owned)):
            return time.monotonic() - started
        time.sleep(0.05)
    raise AssertionError(f"no split {sizes}: {[sorted(m.snapshot()) for m in members]}")


def test_joining_members_take_only_the_partitions_that_move(broker: BrokerProcess) -> None:
    topic, group = f"coop-{uuid.uuid4().hex[:8]}", f"coop-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(15)
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(PARTITIONS * 20):
        producer.produce(topic, b"v%d" % i, partition=i % PARTITIONS)
    assert producer.flush(15) == 0

    members = [CooperativeMember(broker.bootstrap, group, topic)]
    try:
        members[0].start()
        print(f"\none member owns all: {wait_for_split(members, [6]):.2f} s")
        for count, sizes in ((2, [3, 3]), (3, [2, 2, 2])):
            members.append(CooperativeMember(broker.bootstrap, group, topic))
            members[-1].start()
            print(f"{count} members split {sizes}: {wait_for_split(members, sizes):.2f} s")
        # Every revocation an existing member saw was partial: it kept consuming the rest.
        revocations = [r for m in members for r in m.revocations]
        assert revocations, "no member gave anything up"
        for revoked, before in revocations:
            assert revoked and revoked < before, (sorted(revoked), sorted(before))
        assert len(members[0].revocations) == 2  # 6 -> 3 -> 2, one partial handover each time
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            seen = set().union(*(m.consumed for m in members))
            if len(seen) == PARTITIONS * 20:
                break
            time.sleep(0.05)
        assert set().union(*(m.consumed for m in members)) == {(p, o) for p in range(PARTITIONS) for o in range(20)}
    finally:
        for m in members:
            m.stopping.set()
        for m in members:
            m.join(15)
