"""A fresh, empty ``log.dirs`` starts without recovery; a crash with data is recovered, and says so.

Real kbroker processes (kbroker/testing/local.py) of every role: a single node (broker and sole
voter in one process), and a cluster of a controller-only voter, a combined node (broker and
voter, so its first log dir also holds ``__cluster_metadata-0`` and the Raft ``quorum-state``)
and a broker-only node. On first start no log says "was not shut down cleanly: recovering"; after
records were written and the process was killed with SIGKILL, every node that holds partition
logs says it at the next start (and still serves the records).
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from kbroker.testing.local import HOST, TEST_SETTINGS, LocalBroker, free_port

UNCLEAN = "was not shut down cleanly: recovering"
CONTROLLER, COMBINED, BROKER = 100, 1, 2


def produce(bootstrap: str, topic: str, count: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    for i in range(count):
        producer.produce(topic, value=b"%d" % i)
    assert producer.flush(30) == 0


def wait_for_end_offset(node: LocalBroker, topic: str, expected: int) -> None:
    """Return once the partition's high watermark is ``expected`` (after a crash of every replica
    the leader's rises again as its followers catch up); never above it."""
    consumer = Consumer({"bootstrap.servers": node.bootstrap_servers, "group.id": "fresh-dirs"})
    deadline = time.monotonic() + 60
    try:
        while True:
            end = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=30)[1]
            assert end <= expected
            if end == expected:
                return
            assert time.monotonic() < deadline, f"{topic}: high watermark {end}, not {expected}"
            time.sleep(0.05)
    finally:
        consumer.close()


@pytest.mark.timeout(240)
def test_a_fresh_single_node_needs_no_recovery_and_a_crashed_one_does(tmp_path: Path) -> None:
    port = free_port()
    node = LocalBroker(tmp_path / "single", 1, {"listeners": f"PLAINTEXT://{HOST}:{port}", **TEST_SETTINGS}, port)
    try:
        node.start()
        assert UNCLEAN not in node.read_log()
        assert "recover" not in node.read_log()
        node.create_topic("crashed", partitions=1)
        produce(node.bootstrap_servers, "crashed", 20)
        node.kill()
        node.start()
        assert UNCLEAN in node.read_log()
        wait_for_end_offset(node, "crashed", 20)
    finally:
        node.close()


@pytest.mark.timeout(240)
def test_fresh_dirs_of_every_cluster_role_need_no_recovery_and_crashed_brokers_do(tmp_path: Path) -> None:
    ports = {CONTROLLER: free_port(), COMBINED: free_port()}
    voters = ",".join(f"{node_id}@{HOST}:{port}" for node_id, port in ports.items())
    common = {**TEST_SETTINGS, "controller.listener.names": "CONTROLLER", "inter.broker.listener.name": "PLAINTEXT",
              "controller.quorum.voters": voters,
              "default.replication.factor": "2", "min.insync.replicas": "1", "offsets.topic.replication.factor": "2",
              "transaction.state.log.replication.factor": "2", "transaction.state.log.min.isr": "1"}
    client_ports = {COMBINED: free_port(), BROKER: free_port()}
    nodes = [
        LocalBroker(tmp_path / "controller", CONTROLLER, {
            **common, "process.roles": "controller", "listeners": f"CONTROLLER://{HOST}:{ports[CONTROLLER]}"},
            ports[CONTROLLER], role="controller"),
        LocalBroker(tmp_path / "combined", COMBINED, {
            **common, "process.roles": "broker,controller",
            "listeners": f"PLAINTEXT://{HOST}:{client_ports[COMBINED]},CONTROLLER://{HOST}:{ports[COMBINED]}"},
            client_ports[COMBINED]),
        LocalBroker(tmp_path / "broker", BROKER, {
            **common, "process.roles": "broker", "listeners": f"PLAINTEXT://{HOST}:{client_ports[BROKER]}"},
            client_ports[BROKER]),
    ]
    controller, combined, broker = nodes
    try:
        for node in nodes:
            node.start(wait=False)
        for node in (combined, broker):
            node.wait_ready(brokers=2)
        assert (combined.data_dir / "__cluster_metadata-0" / "quorum-state").exists()
        for node in nodes:
            assert UNCLEAN not in node.read_log(), (node.node_id, node.read_log()[-2000:])
            assert "recover" not in node.read_log(), (node.node_id, node.read_log()[-2000:])
        combined.create_topic("crashed", partitions=1)
        broker.wait_for_topic("crashed", 1, 30)
        produce(f"{combined.bootstrap_servers},{broker.bootstrap_servers}", "crashed", 20)
        for node in nodes:
            node.kill()
        for node in nodes:
            node.start(wait=False)
        for node in (combined, broker):  # each restarted broker registered again and unfenced: both lead again
            node.wait_ready(brokers=2)
        for node in (combined, broker):
            assert UNCLEAN in node.read_log(), (node.node_id, node.read_log()[-2000:])
            node.wait_for_topic("crashed", 1, 30)
            wait_for_end_offset(node, "crashed", 20)
    finally:
        for node in (broker, combined, controller):
            node.close()
