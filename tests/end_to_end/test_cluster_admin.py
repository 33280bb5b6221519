"""Administering a 3-broker cluster with real clients: the same assertions on Kafka and kbroker.

The session's shared clusters of each target (tests/end_to_end/conftest.py; RF 3,
min.insync.replicas 2) in two layouts: isolated (controller 100 on 127.0.0.21, brokers 1-3 on
127.0.0.11-13) and combined (nodes 1-3 on 127.0.0.11-13, each a broker and a voter, so killing
or stopping a broker also takes a voter away and may move the active controller). Topics are created
through one broker and read back through another (kbroker brokers forward admin requests to the controller, as KRaft
brokers do); leaders spread over the brokers; acks=all is refused with NOT_ENOUGH_REPLICAS (19)
when the ISR is below min.insync.replicas; a clean shutdown (SIGTERM) moves leadership away
before the broker exits (controlled shutdown), and a preferred-replica election moves it back;
``kafka-metadata-quorum`` describes the quorum; ``kafka-reassign-partitions`` moves a partition
to other brokers (KIP-455) without losing a record.
"""

from __future__ import annotations

import datetime
import json
import re
import subprocess
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, ElectionType, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, NewPartitions, NewTopic
from kafka import KafkaProducer
from kafka.errors import NotEnoughReplicasError, RequestTimedOutError
from kbroker.protocol.record_builder import build_batch
from kio.schema.fetch.v12 import request as fetch_v12
from kio.schema.list_offsets.v9 import request as list_offsets_v9
from kio.schema.offset_for_leader_epoch.v4 import request as epochs_v4
from kio.schema.produce.v9 import request as produce_v9
from kio.static.primitive import i8, i16, i32, i64

from compat.cluster import Cluster
from compat.deps import kafka_classpath
from tests.kbroker.handlers.wire import call

CLUSTER_TOPOLOGIES = ("isolated", "combined")
DEADLINE_S = 20.0


def admin_via(cluster: Cluster, broker_id: int) -> AdminClient:
    """An AdminClient that only knows one broker (it still learns the others from Metadata)."""
    return AdminClient({"bootstrap.servers": cluster.nodes[broker_id].bootstrap})


def partitions_of(cluster: Cluster, broker_id: int, topic: str) -> dict[int, object]:
    """What one broker's Metadata says of a topic's partitions ({} while it does not know it:
    on Kafka a new topic reaches the brokers a moment after CreateTopics returns)."""
    (answer,) = cluster.metadata(broker_id, [topic]).topics
    if answer.error_code == 3:  # UNKNOWN_TOPIC_OR_PARTITION
        return {}
    assert answer.error_code == 0, answer
    return {p.partition_index: p for p in answer.partitions}


def wait_for(what: str, condition, timeout: float = DEADLINE_S):
    """Poll a condition on the cluster's state (not a sleep: returns as soon as it holds)."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout:.0f} s: {what}")
        time.sleep(0.1)


def create(admin: AdminClient, topic: NewTopic) -> None:
    admin.create_topics([topic])[topic.topic].result(timeout=30)


def test_topic_created_through_one_broker_is_seen_by_all_with_spread_leaders(cluster: Cluster) -> None:
    create(admin_via(cluster, 2), NewTopic("spread", 6, 3))
    for broker_id in cluster.broker_ids:
        parts = wait_for(f"broker {broker_id} knows 'spread'",
                         lambda b=broker_id: len(partitions_of(cluster, b, "spread")) == 6
                         and partitions_of(cluster, b, "spread"))
        for p in parts.values():
            assert sorted(p.replica_nodes) == [1, 2, 3]
            assert sorted(p.isr_nodes) == [1, 2, 3]
            assert p.leader_id == p.replica_nodes[0]
    leaders = [p.leader_id for p in partitions_of(cluster, 1, "spread").values()]
    assert sorted(leaders.count(b) for b in (1, 2, 3)) == [2, 2, 2]


def test_admin_changes_reach_every_broker(cluster: Cluster) -> None:
    admin = admin_via(cluster, 3)
    create(admin, NewTopic("grow", 1, 3, config={"retention.ms": "3600000"}))
    admin.create_partitions([NewPartitions("grow", 3)])["grow"].result(timeout=30)
    wait_for("3 partitions everywhere", lambda: all(len(partitions_of(cluster, b, "grow")) == 3 for b in (1, 2, 3)))
    resource = ConfigResource("topic", "grow")
    described = admin.describe_configs([resource])[resource].result(timeout=30)
    assert described["retention.ms"].value == "3600000"
    with pytest.raises(KafkaException) as exists:
        create(admin_via(cluster, 1), NewTopic("grow", 1, 3))
    assert exists.value.args[0].code() == 36  # TOPIC_ALREADY_EXISTS
    with pytest.raises(KafkaException) as too_many:
        create(admin, NewTopic("too-many-replicas", 1, 4))
    assert too_many.value.args[0].code() == 38  # INVALID_REPLICATION_FACTOR
    admin.delete_topics(["grow"])["grow"].result(timeout=30)
    wait_for("'grow' gone everywhere", lambda: all(
        cluster.metadata(b, ["grow"]).topics[0].error_code == 3 for b in (1, 2, 3)))


def test_a_broker_with_no_replica_answers_not_leader_and_an_unknown_partition_is_unknown(cluster: Cluster) -> None:
    """Kafka's getPartitionOrException: a partition the cluster has but this broker holds no
    replica of is NOT_LEADER_OR_FOLLOWER (6), so a client with stale metadata refreshes it; one
    the cluster does not have is UNKNOWN_TOPIC_OR_PARTITION (3)."""
    create(admin_via(cluster, 1), NewTopic("only-on-1", 1, replica_assignment=[[1]]))
    wait_for("broker 2 knows 'only-on-1'", lambda: partitions_of(cluster, 2, "only-on-1"))
    outsider = cluster.nodes[2].bootstrap
    batch = build_batch([(None, b"v")], base_timestamp=1_700_000_000_000)

    def produce(topic: str, partition: int) -> int:
        request = produce_v9.ProduceRequest(acks=i16(1), timeout=datetime.timedelta(seconds=10), topic_data=(
            produce_v9.TopicProduceData(name=topic, partition_data=(
                produce_v9.PartitionProduceData(index=i32(partition), records=batch),)),))
        return call(outsider, request, 9).responses[0].partition_responses[0].error_code

    def fetch(topic: str, partition: int) -> int:
        request = fetch_v12.FetchRequest(max_wait=datetime.timedelta(0), min_bytes=i32(1), topics=(
            fetch_v12.FetchTopic(topic=topic, partitions=(fetch_v12.FetchPartition(
                partition=i32(partition), fetch_offset=i64(0), partition_max_bytes=i32(1 << 20)),)),),
            forgotten_topics_data=())
        return call(outsider, request, 12).responses[0].partitions[0].error_code

    def list_offsets(topic: str, partition: int) -> int:
        request = list_offsets_v9.ListOffsetsRequest(replica_id=i32(-1), isolation_level=i8(0), topics=(
            list_offsets_v9.ListOffsetsTopic(name=topic, partitions=(
                list_offsets_v9.ListOffsetsPartition(partition_index=i32(partition), timestamp=i64(-1)),)),))
        return call(outsider, request, 9).topics[0].partitions[0].error_code

    def last_offset(topic: str, partition: int) -> int:
        request = epochs_v4.OffsetForLeaderEpochRequest(replica_id=i32(-1), topics=(epochs_v4.OffsetForLeaderTopic(
            topic=topic, partitions=(epochs_v4.OffsetForLeaderPartition(
                partition=i32(partition), current_leader_epoch=i32(-1), leader_epoch=i32(0)),)),))
        return call(outsider, request, 4).topics[0].partitions[0].error_code

    for ask in (produce, fetch, list_offsets, last_offset):
        assert (ask("only-on-1", 0), ask("only-on-1", 1), ask("never-created", 0)) == (6, 3, 3), ask.__name__


def test_acks_all_is_refused_below_min_insync_replicas(cluster: Cluster) -> None:
    create(admin_via(cluster, 1), NewTopic("strict", 1, 3, config={"min.insync.replicas": "3"}))
    leader = wait_for("a leader", lambda: partitions_of(cluster, 1, "strict").get(0)
                      and partitions_of(cluster, 1, "strict")[0].leader_id)
    follower = next(b for b in (1, 2, 3) if b != leader)
    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap, acks="all", retries=0, request_timeout_ms=10000)
    try:
        assert producer.send("strict", b"all three in sync").get(timeout=30).offset == 0
        cluster.kill(follower)
        wait_for("the killed follower leaves the ISR",
                 lambda: follower not in partitions_of(cluster, leader, "strict")[0].isr_nodes)
        # Never acknowledged; refused with NOT_ENOUGH_REPLICAS (19) once the leader's own ISR is
        # down to two (Kafka's leader may first hold a write for the dead follower until the
        # request times out: not acknowledged either).
        deadline = time.monotonic() + DEADLINE_S
        while True:
            try:
                written = producer.send("strict", b"only two in sync").get(timeout=30)
                raise AssertionError(f"acknowledged with two replicas in sync: {written}")
            except NotEnoughReplicasError:
                break
            except RequestTimedOutError:
                assert time.monotonic() < deadline, "no NOT_ENOUGH_REPLICAS before the deadline"

    finally:
        producer.close()
        cluster.start_node(follower)
    wait_for("the follower is back in the ISR",
             lambda: sorted(partitions_of(cluster, leader, "strict")[0].isr_nodes) == [1, 2, 3], timeout=60)


def test_clean_shutdown_moves_leadership_first_and_preferred_election_moves_it_back(cluster: Cluster) -> None:
    admin = admin_via(cluster, 1)
    create(admin, NewTopic("moves", 3, 3))
    led_by_2 = wait_for("broker 2 leads something", lambda: len(partitions_of(cluster, 1, "moves")) == 3 and [
        i for i, p in partitions_of(cluster, 1, "moves").items() if p.leader_id == 2])
    cluster.stop(2)  # SIGTERM: controlled shutdown
    parts = partitions_of(cluster, 1, "moves")
    # Leadership left broker 2 before it exited: no partition is leaderless or led by it now.
    assert all(p.leader_id in (1, 3) for p in parts.values()), parts
    cluster.start_node(2)
    wait_for("broker 2 back in every ISR", lambda: all(
        2 in p.isr_nodes for p in partitions_of(cluster, 1, "moves").values()), timeout=60)
    result = admin.elect_leaders(ElectionType.PREFERRED, [TopicPartition("moves", i) for i in led_by_2]).result(
        timeout=30)
    assert all(error is None for error in result.values()), result
    wait_for("broker 2 leads its preferred partitions again", lambda: all(
        partitions_of(cluster, 1, "moves")[i].leader_id == 2 for i in led_by_2))


def quorum_ids(status: str, field: str) -> list[int]:
    """The node ids listed on one line (``CurrentVoters``, ``CurrentObservers``) of ``describe --status``."""
    (line,) = [line for line in status.splitlines() if line.startswith(f"{field}:")]
    return sorted(int(node_id) for node_id in re.findall(r'"id": (\d+)', line))


def test_kafka_metadata_quorum_describes_the_controller_and_its_observers(cluster: Cluster) -> None:
    """Every voter is listed as one, the leader is a voter, and the brokers that are not voters
    (all of them when the controller is isolated, none when every node is combined) observe."""
    observers = sorted(set(cluster.broker_ids) - set(cluster.controller_ids))

    def status() -> str:
        run = subprocess.run(
            ["java", "-cp", kafka_classpath(), "org.apache.kafka.tools.MetadataQuorumCommand",
             "--bootstrap-controller", cluster.controller_bootstrap, "describe", "--status"],
            capture_output=True, text=True, timeout=120,
        )
        assert run.returncode == 0, run.stderr[-2000:]
        return run.stdout

    text = wait_for("every broker that is not a voter observes the metadata log",
                    lambda: (out := status()) and quorum_ids(out, "CurrentObservers") == observers and out,
                    timeout=60)
    assert quorum_ids(text, "CurrentVoters") == cluster.controller_ids
    leader = int(re.search(r"^LeaderId:\s+(\d+)$", text, re.MULTILINE).group(1))
    assert leader in cluster.controller_ids


def test_kafka_reassign_partitions_moves_a_partition_to_other_brokers(cluster: Cluster, tmp_path: Path) -> None:
    admin = admin_via(cluster, 1)
    admin.create_topics([NewTopic("moving", 1, replica_assignment=[[1, 2]])])["moving"].result(timeout=30)
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})
    for i in range(50):
        producer.produce("moving", value=str(i).encode())
    assert producer.flush(30) == 0
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [{"topic": "moving", "partition": 0, "replicas": [2, 3]}]}))

    def reassign(action: str) -> str:
        run = subprocess.run(
            ["java", "-cp", kafka_classpath(), "org.apache.kafka.tools.reassign.ReassignPartitionsCommand",
             "--bootstrap-server", cluster.bootstrap, "--reassignment-json-file", str(plan), action],
            capture_output=True, text=True, timeout=120,
        )
        assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
        return run.stdout

    assert "Successfully started partition reassignment for moving-0" in reassign("--execute")
    wait_for("the reassignment completes",
             lambda: "Reassignment of partition moving-0 is completed" in reassign("--verify"), timeout=60)
    part = wait_for("every broker sees the new replicas",
                    lambda: sorted(partitions_of(cluster, 1, "moving")[0].replica_nodes) == [2, 3]
                    and partitions_of(cluster, 1, "moving")[0])
    assert sorted(part.isr_nodes) == [2, 3] and part.leader_id in (2, 3)
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "moving-reader"})
    try:
        consumer.assign([TopicPartition("moving", 0, 0)])
        seen: list[int] = []
        deadline = time.monotonic() + 30
        while len(seen) < 50 and time.monotonic() < deadline:
            message = consumer.poll(0.2)
            if message is not None and not message.error():
                seen.append(int(message.value()))
    finally:
        consumer.close()
    assert seen == list(range(50))
