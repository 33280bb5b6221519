"""/metrics on a replicated cluster (a controller and three brokers, each with an HTTP listener).

When a broker dies, the partitions it followed show as under-replicated on their leaders, each
partition it led gets a new leader (one clean election each, counted by the active controller),
and the controller reports one fenced broker and no offline partition. When a follower stalls
(SIGSTOP) past replica.lag.time.max.ms, each leader takes it out of the ISR and, once it is back
and caught up, in again: one ISR shrink and one expansion per partition, counted on the leader
when the controller accepts its AlterPartition, as Kafka counts them (not by comparing scrapes:
nothing is scraped in between).

A group's lag (kafka_exporter's kafka_consumergroup_lag) is on its coordinator's /metrics for
every partition it committed, also those whose only replica is on another broker, and its console
shows the same."""

from __future__ import annotations

import json
import signal
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from kbroker.testing.local import HOST, LocalBroker, LocalCluster, free_port
from tests.end_to_end.metrics_endpoint import scrape

TOPIC = "replicated"
PARTITIONS = 3
LAGGED = "lagged"
GROUP = "lag-group"
RECORDS = {0: 30, 1: 20, 2: 10}
COMMITTED = {0: 5, 1: 20, 2: 1}
DEADLINE_S = 60.0


def _cluster(tmp_path: Path, overrides: dict[str, str]) -> Iterator[tuple[LocalCluster, dict[int, str]]]:
    cluster = LocalCluster(tmp_path, 3, overrides)
    http: dict[int, str] = {}
    for node in [cluster.controller, *cluster.brokers]:
        http[node.node_id] = f"{HOST}:{free_port()}"
        node.settings["kbroker.http.listeners"] = f"http://{http[node.node_id]}"
    cluster.start()
    try:
        yield cluster, http
    finally:
        cluster.close()


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[tuple[LocalCluster, dict[int, str]]]:
    # Short sessions so the dead broker is fenced (and its partitions led elsewhere) quickly.
    yield from _cluster(tmp_path, {"broker.session.timeout.ms": "3000", "broker.heartbeat.interval.ms": "500",
                                   "replica.lag.time.max.ms": "10000"})


@pytest.fixture
def stall_cluster(tmp_path: Path) -> Iterator[tuple[LocalCluster, dict[int, str]]]:
    # A stalled follower falls out of the ISRs it is in (1.5 s) long before its session ends (60 s).
    yield from _cluster(tmp_path, {"broker.session.timeout.ms": "60000", "broker.heartbeat.interval.ms": "500",
                                   "replica.lag.time.max.ms": "1500"})


def wait_until(check: object, what: str) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while not check():  # type: ignore[operator]
        assert time.monotonic() < deadline, what
        time.sleep(0.2)


def total(http: dict[int, str], nodes: list[LocalBroker], name: str) -> float:
    return sum(scrape(http[node.node_id]).get((name, ()), 0.0) for node in nodes)


def test_a_dead_broker_shows_on_the_survivors_and_the_controller(
        cluster: tuple[LocalCluster, dict[int, str]]) -> None:
    nodes, http = cluster
    nodes.create_topic(TOPIC, PARTITIONS, 3)
    controller = http[nodes.controller.node_id]
    assert scrape(controller)[("kafka_controller_kafkacontroller_activecontrollercount", ())] == 1
    wait_until(lambda: total(http, nodes.brokers, "kafka_server_replicamanager_leadercount") >= PARTITIONS,
               "leaders counted")
    before = scrape(controller)
    victim = nodes.broker(nodes.leader(TOPIC, 0))
    led_by_survivors = sum(nodes.leader(TOPIC, p) != victim.node_id for p in range(PARTITIONS))
    survivors = [b for b in nodes.brokers if b is not victim]
    victim.kill()

    wait_until(lambda: total(http, survivors, "kafka_server_replicamanager_underreplicatedpartitions") >= PARTITIONS,
               "every partition under-replicated on its new or old leader")
    after = scrape(controller)
    assert after[("kafka_controller_kafkacontroller_fencedbrokercount", ())] == 1
    assert after[("kafka_controller_kafkacontroller_offlinepartitionscount", ())] == 0
    elections = "kafka_controller_controllerstats_leaderelectionrateandtimems_count"
    assert after[(elections, ())] - before[(elections, ())] == PARTITIONS - led_by_survivors
    assert after[("kafka_controller_controllerstats_uncleanleaderelections_total", ())] == 0


def test_a_stalled_follower_counts_one_shrink_and_one_expansion_per_partition(
        stall_cluster: tuple[LocalCluster, dict[int, str]]) -> None:
    nodes, http = stall_cluster
    nodes.create_topic(TOPIC, PARTITIONS, 3)
    wait_until(lambda: total(http, nodes.brokers, "kafka_server_replicamanager_leadercount") >= PARTITIONS,
               "leaders counted")
    leaders = {p: nodes.leader(TOPIC, p) for p in range(PARTITIONS)}  # asked before a broker stalls
    victim = nodes.broker(leaders[0])
    followed = [p for p, leader in leaders.items() if leader != victim.node_id]
    others = [b for b in nodes.brokers if b is not victim]
    shrinks, expands = "kafka_server_replicamanager_isrshrinks_total", "kafka_server_replicamanager_isrexpands_total"
    assert total(http, nodes.brokers, shrinks) == total(http, nodes.brokers, expands) == 0
    victim.signal(signal.SIGSTOP)
    try:
        # A follower at the leader's end offset stays in sync however long it is silent (Kafka's
        # rule too): one record to each partition it follows leaves it behind.
        producer = Producer({"bootstrap.servers": ",".join(b.bootstrap_servers for b in others), "acks": "1"})
        for p in followed:
            producer.produce(TOPIC, value=b"while stalled", partition=p)
        assert producer.flush(30) == 0
        wait_until(lambda: total(http, others, shrinks) >= len(followed), "the stalled follower out of every ISR")
    finally:
        victim.signal(signal.SIGCONT)
    wait_until(lambda: total(http, others, expands) >= len(followed), "the follower back in every ISR")
    assert total(http, others, shrinks) == total(http, others, expands) == len(followed)
    # Its own partitions: the victim, their leader, proposed no change.
    assert total(http, [victim], shrinks) == total(http, [victim], expands) == 0


def test_group_lag_covers_partitions_on_other_brokers(cluster: tuple[LocalCluster, dict[int, str]]) -> None:
    nodes, http = cluster
    nodes.create_topic(LAGGED, len(RECORDS), 1)  # one replica each: each broker holds one partition only
    producer = Producer({"bootstrap.servers": nodes.bootstrap_servers})
    for partition, count in RECORDS.items():
        for i in range(count):
            producer.produce(LAGGED, value=b"%d" % i, partition=partition)
    assert producer.flush(30) == 0
    consumer = Consumer({"bootstrap.servers": nodes.bootstrap_servers, "group.id": GROUP,
                         "enable.auto.commit": False})
    try:
        consumer.commit(offsets=[TopicPartition(LAGGED, p, o) for p, o in COMMITTED.items()], asynchronous=False)
    finally:
        consumer.close()

    def lags() -> dict[int, dict[int, float]]:
        """broker -> partition -> lag, for the brokers that export the group's lag."""
        found: dict[int, dict[int, float]] = {}
        for broker in nodes.brokers:
            for (name, labels), value in scrape(http[broker.node_id]).items():
                tags = dict(labels)
                if name == "kafka_consumergroup_lag" and tags["consumergroup"] == GROUP:
                    found.setdefault(broker.node_id, {})[int(tags["partition"])] = value
        return found

    wait_until(lambda: any(len(by_partition) == len(RECORDS) for by_partition in lags().values()),
               "the coordinator exports the lag of every committed partition")
    (coordinator, by_partition), = lags().items()
    assert by_partition == {p: RECORDS[p] - COMMITTED[p] for p in RECORDS}
    # Two of the three partitions have their only replica on another broker than the coordinator.
    assert sum(nodes.leader(LAGGED, p) != coordinator for p in RECORDS) == 2
    # The coordinator's console shows the same lag (its JSON API).
    with urllib.request.urlopen(f"http://{http[coordinator]}/api/groups/{GROUP}", timeout=10) as response:
        rows = json.loads(response.read())["lag"]
    assert {row["partition"]: (row["end_offset"], row["lag"]) for row in rows} == {
        p: (RECORDS[p], RECORDS[p] - COMMITTED[p]) for p in RECORDS}
