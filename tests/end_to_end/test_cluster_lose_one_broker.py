"""Losing one broker of three stops neither RF 3 topics nor new consumer groups (issue 16 item 3).

The same script and assertions on Apache Kafka 4.3.1 and on kbroker, each a fresh cluster (one
controller, brokers 1-3 in racks a, b, c, ``offsets.topic.replication.factor=3``,
``min.insync.replicas=2``), so ``__consumer_offsets`` does not exist yet when a broker dies.
Broker 3 is SIGKILLed; once the controller has fenced it (Metadata no longer lists it):

- CreateTopics with RF 3, then CreatePartitions, succeed: the fenced broker is still
  registered, so every partition gets 3 replicas, led by a survivor, with the dead broker
  outside the ISR;
- new consumer groups (confluent-kafka, then aiokafka) find a coordinator — which needs
  ``__consumer_offsets``, created now with RF 3 the same way — get an assignment, consume what
  an acks=all producer wrote and commit it; a transactional producer commits a transaction
  (``__transaction_state`` is created likewise); both internal topics have 3 replicas per
  partition, survivors leading, the dead broker out of the ISR;
- when broker 3 starts again it catches up and joins the ISR of every partition of the topic.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import NamedTuple, TypeVar

import pytest
from aiokafka import AIOKafkaConsumer
from aiokafka import TopicPartition as AioTopicPartition
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic

from compat.cluster import Cluster, make_cluster

RACKS = {1: "a", 2: "b", 3: "c"}
VICTIM = 3
SURVIVORS = [1, 2]
TOPIC = "after-loss"
PARTITIONS = 6  # 4 from CreateTopics, 2 more from CreatePartitions
RECORDS = 60
DEADLINE_S = 60.0
# Kafka took 9-20 s from subscribe to the first assignment here (it creates and loads the 50
# partitions of __consumer_offsets first) while other clusters loaded the machine.
CONSUME_DEADLINE_S = 120.0

T = TypeVar("T")


@pytest.fixture(params=["kafka", "kbroker"])
def fresh_cluster(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Cluster]:
    node_extra = {broker: {"broker.rack": rack} for broker, rack in RACKS.items()}
    with make_cluster(request.param, tmp_path / request.param, node_extra=node_extra) as running:
        yield running


def wait_for(what: str, check: Callable[[], T], deadline_s: float = DEADLINE_S) -> T:
    """``check()``'s first truthy value, polled until ``deadline_s``; fails naming ``what``."""
    deadline = time.monotonic() + deadline_s
    last: T | OSError | None = None
    while time.monotonic() < deadline:
        try:
            last = check()
        except OSError as exc:  # a broker that does not answer yet
            last = exc
        if last and not isinstance(last, OSError):
            return last
        time.sleep(0.1)
    raise AssertionError(f"{what} not within {deadline_s:.0f} s (last: {last!r})")


class Seen(NamedTuple):
    """One partition as a broker's Metadata answer describes it (broker lists sorted)."""

    leader: int
    replicas: list[int]
    isr: list[int]
    offline: list[int]


def partitions_seen_by(cluster: Cluster, broker: int, name: str = TOPIC) -> dict[int, Seen]:
    """partition -> what ``broker`` answers Metadata for topic ``name``."""
    (topic,) = cluster.metadata(broker, [name]).topics
    if topic.error_code != 0:
        return {}
    return {p.partition_index: Seen(p.leader_id, sorted(p.replica_nodes), sorted(p.isr_nodes),
                                    sorted(p.offline_replicas)) for p in topic.partitions}


def every_partition(cluster: Cluster) -> dict[int, Seen]:
    """The topic's layout as broker 1 sees it, once it knows every partition (else empty)."""
    seen = partitions_seen_by(cluster, 1)
    return seen if len(seen) == PARTITIONS else {}


def consume_with_confluent(bootstrap: str, expected: set[bytes], ends: dict[int, int]) -> float:
    """A new group: returns the seconds from subscribe to the first assignment."""
    assigned_at: list[float] = []
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "after-loss-confluent",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False,
                         "session.timeout.ms": 6000, "heartbeat.interval.ms": 500})
    try:
        started = time.monotonic()
        consumer.subscribe([TOPIC], on_assign=lambda _c, _ps: assigned_at.append(time.monotonic()))
        seen: set[bytes] = set()
        deadline = started + CONSUME_DEADLINE_S
        while seen != expected:
            assert time.monotonic() < deadline, f"confluent-kafka consumed {len(seen)} of {len(expected)}"
            message = consumer.poll(0.2)
            if message is not None and not message.error():
                seen.add(message.value())
        # Every record can be in before the consumer has a position on an empty partition (its
        # first fetch there still on the way): librdkafka commits only known positions.
        partitions = [TopicPartition(TOPIC, p) for p in range(PARTITIONS)]
        while {tp.partition: tp.offset for tp in consumer.position(partitions)} != ends:
            assert time.monotonic() < deadline, f"confluent-kafka positions {consumer.position(partitions)}"
            consumer.poll(0.2)
        consumer.commit(asynchronous=False)
        committed = consumer.committed([TopicPartition(TOPIC, p) for p in range(PARTITIONS)], timeout=10)
        assert {tp.partition: tp.offset for tp in committed} == ends
    finally:
        consumer.close()
    return assigned_at[0] - started


async def consume_with_aiokafka(bootstrap: str, expected: set[bytes], ends: dict[int, int]) -> float:
    """A second new group, another client: returns the seconds from start to the first assignment."""
    consumer = AIOKafkaConsumer(TOPIC, bootstrap_servers=bootstrap, group_id="after-loss-aiokafka",
                                auto_offset_reset="earliest", enable_auto_commit=False,
                                session_timeout_ms=6000, heartbeat_interval_ms=500)
    started = time.monotonic()
    await consumer.start()
    try:
        assigned = None
        seen: set[bytes] = set()
        deadline = started + CONSUME_DEADLINE_S
        while seen != expected:
            assert time.monotonic() < deadline, f"aiokafka consumed {len(seen)} of {len(expected)}"
            for records in (await consumer.getmany(timeout_ms=200)).values():
                seen.update(r.value for r in records)
            if assigned is None and consumer.assignment():
                assigned = time.monotonic() - started
        # As for librdkafka: commit() takes only known positions; position() waits for one.
        for partition, end in ends.items():
            assert await consumer.position(AioTopicPartition(TOPIC, partition)) == end
        await consumer.commit()
        for partition, end in ends.items():
            assert await consumer.committed(AioTopicPartition(TOPIC, partition)) == end
    finally:
        await consumer.stop()
    assert assigned is not None
    return assigned


@pytest.mark.timeout(400)
def test_rf3_topics_and_new_groups_survive_the_loss_of_one_broker(fresh_cluster: Cluster) -> None:
    cluster = fresh_cluster
    survivors = ",".join(cluster.nodes[b].bootstrap for b in SURVIVORS)

    killed = time.monotonic()
    cluster.kill(VICTIM)
    for broker in SURVIVORS:
        wait_for(f"broker {broker} to stop listing broker {VICTIM}",
                 lambda b=broker: sorted(n.node_id for n in cluster.metadata(b, []).brokers) == SURVIVORS)
    fenced_after = time.monotonic() - killed

    # (a) CreateTopics RF 3 and CreatePartitions: three replicas each, led by survivors, the dead broker out of the ISR.
    admin = AdminClient({"bootstrap.servers": survivors})
    created = time.monotonic()
    admin.create_topics([NewTopic(TOPIC, PARTITIONS - 2, 3)])[TOPIC].result(timeout=30)
    create_s = time.monotonic() - created
    admin.create_partitions([NewPartitions(TOPIC, PARTITIONS)])[TOPIC].result(timeout=30)
    layout = wait_for("the new topic's partitions on broker 1", lambda: every_partition(cluster))
    for partition, seen in layout.items():
        assert seen.replicas == [1, 2, 3], (partition, seen)
        assert seen.leader in SURVIVORS, (partition, seen)
        assert seen.isr == SURVIVORS, (partition, seen)
        assert seen.offline == [VICTIM], (partition, seen)  # what kafka-topics --describe shows as Offline

    producer = Producer({"bootstrap.servers": survivors, "acks": "all", "enable.idempotence": True})
    failures: list[object] = []
    values = {f"v{i}".encode() for i in range(RECORDS)}
    for i, value in enumerate(sorted(values)):
        producer.produce(TOPIC, key=str(i).encode(), value=value,
                         on_delivery=lambda err, _msg: err is not None and failures.append(err))
    assert producer.flush(30) == 0 and failures == []
    probe = Consumer({"bootstrap.servers": survivors, "group.id": "after-loss-probe"})
    ends = {p: probe.get_watermark_offsets(TopicPartition(TOPIC, p), timeout=10)[1] for p in range(PARTITIONS)}
    probe.close()
    assert sum(ends.values()) == RECORDS

    # (b) new consumer groups get a coordinator and an assignment, consume and commit.
    confluent_s = consume_with_confluent(survivors, values, ends)
    aiokafka_s = asyncio.run(consume_with_aiokafka(survivors, values, ends))
    # A transaction needs __transaction_state, created now too.
    transactional = Producer({"bootstrap.servers": survivors, "transactional.id": "after-loss-tx"})
    transactional.init_transactions(30)
    transactional.begin_transaction()
    transactional.produce(TOPIC, key=b"tx", value=b"tx")
    transactional.commit_transaction(30)
    # The internal topics were placed by the same rule as the user's topic.
    for internal in ("__consumer_offsets", "__transaction_state"):
        internal_layout = partitions_seen_by(cluster, 1, internal)
        assert internal_layout, internal
        for partition, seen in internal_layout.items():
            assert (seen.leader in SURVIVORS, seen.replicas, seen.isr) == (True, [1, 2, 3], SURVIVORS), (
                internal, partition, seen)

    # (c) the broker comes back, catches up and joins the ISR of every partition.
    restarted = time.monotonic()
    cluster.start_node(VICTIM)
    wait_for(f"broker {VICTIM} in every ISR, online", lambda: every_partition(cluster) and all(
        (seen.isr, seen.offline) == ([1, 2, 3], []) for seen in every_partition(cluster).values()), 90.0)
    rejoin_s = time.monotonic() - restarted
    print(f"{cluster.name}: broker {VICTIM} killed -> fenced in {fenced_after:.1f} s; CreateTopics RF 3 answered "
          f"in {create_s:.2f} s, leaders {[seen.leader for seen in layout.values()]}; "
          f"first assignment: confluent-kafka {confluent_s:.1f} s, "
          f"aiokafka {aiokafka_s:.1f} s; back in every ISR {rejoin_s:.1f} s after restart")
