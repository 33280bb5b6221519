"""Controller snapshots end to end (KIP-630): a snapshotted, truncated metadata log still brings every node up.

A kbroker cluster (three controller voters 100-102, brokers 1-3) with small snapshot and segment sizes
(``metadata.log.max.record.bytes.between.snapshots``, ``internal.metadata.log.segment.bytes``, Kafka's keys) takes
many decisions while voter 102 and broker 3 are down, so the voters' logs are snapshotted and their old
segments deleted. Then broker 3 joins again with an empty log dir and voter 102 comes back behind the log
start: both must get the whole image by FetchSnapshot (broker 3 lists every topic and serves the latest
configs; voter 102's log restarts at the leader's snapshot). Finally the first voter restarts and starts from
its latest snapshot, and the cluster keeps answering CreateTopics.
"""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic, ResourceType

from compat.cluster import Cluster, make_cluster

DEADLINE_S = 60.0
TOPICS = [f"snap-{i}" for i in range(10)]
SETTINGS = {
    "metadata.log.max.record.bytes.between.snapshots": "8192",
    "internal.metadata.log.segment.bytes": "16384",  # Kafka's test-only key (the public one is >= 8 MiB)
}


def wait_for(what: str, condition, timeout: float = DEADLINE_S):
    """Poll a condition (not a sleep: returns as soon as it holds)."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout:.0f} s: {what}")
        time.sleep(0.1)


def metadata_dir(cluster: Cluster, node_id: int) -> Path:
    return Path(cluster.nodes[node_id].settings["log.dirs"]) / "__cluster_metadata-0"


def checkpoints(cluster: Cluster, node_id: int) -> list[str]:
    return sorted(n for n in os.listdir(metadata_dir(cluster, node_id)) if n.endswith(".checkpoint"))


def first_segment_base(cluster: Cluster, node_id: int) -> int:
    return min(int(n.split(".")[0]) for n in os.listdir(metadata_dir(cluster, node_id)) if n.endswith(".log"))


def node_log(cluster: Cluster, node_id: int) -> str:
    return cluster.nodes[node_id].log.read_text(errors="replace")


def knows(cluster: Cluster, broker_id: int, topics: list[str]) -> bool:
    """Whether the broker's Metadata answers every topic with its partitions (no error)."""
    answers = cluster.metadata(broker_id, topics).topics
    return len(answers) == len(topics) and all(t.error_code == 0 and t.partitions for t in answers)


def retrying(action, deadline_s: float = DEADLINE_S) -> None:
    """Admin calls while the quorum may be electing (NOT_CONTROLLER, timeouts) are retried until the deadline."""
    deadline = time.monotonic() + deadline_s
    while True:
        try:
            action()
            return
        except KafkaException as exc:
            if time.monotonic() > deadline:
                raise
            if "TOPIC_ALREADY_EXISTS" in str(exc):
                return
            time.sleep(0.2)


def set_retention(admin: AdminClient, value: int) -> None:
    resources = [ConfigResource(ResourceType.TOPIC, name, incremental_configs=[
        ConfigEntry("retention.ms", str(value), incremental_operation=AlterConfigOpType.SET)]) for name in TOPICS]
    for future in admin.incremental_alter_configs(resources).values():
        future.result(30)


def retention_via(cluster: Cluster, broker_id: int, topic: str) -> str:
    admin = AdminClient({"bootstrap.servers": cluster.nodes[broker_id].bootstrap})
    (future,) = admin.describe_configs([ConfigResource(ResourceType.TOPIC, topic)]).values()
    return future.result(30)["retention.ms"].value


@pytest.mark.timeout(600)
def test_nodes_behind_the_log_start_get_the_image_by_fetch_snapshot(tmp_path: Path) -> None:
    with make_cluster("kbroker", tmp_path / "cluster", SETTINGS, controllers=3) as cluster:
        cluster.stop(102)
        cluster.stop(3)
        admin = AdminClient({"bootstrap.servers": ",".join(cluster.nodes[b].bootstrap for b in (1, 2))})
        retrying(lambda: [f.result(30) for f in admin.create_topics([NewTopic(t, 1, 2) for t in TOPICS]).values()])
        last = 0
        for value in range(1000, 1040):
            retrying(lambda value=value: set_retention(admin, value))
            last = value
        # Both running voters snapshotted and cut their logs: old segments are gone.
        for voter in (100, 101):
            wait_for(f"voter {voter} snapshotted and cut its log",
                     lambda voter=voter: checkpoints(cluster, voter) and first_segment_base(cluster, voter) > 0)
        # Broker 3 returns with an empty log dir: it is told to fetch the snapshot and does.
        shutil.rmtree(cluster.nodes[3].settings["log.dirs"])
        cluster.start_node(3)
        cluster.wait_registered([1, 2, 3])
        assert "metadata snapshot loaded" in node_log(cluster, 3)
        wait_for("broker 3 knows every topic", lambda: knows(cluster, 3, TOPICS))
        assert retention_via(cluster, 3, TOPICS[-1]) == str(last)
        # Voter 102 returns behind the log start: it takes the leader's snapshot and follows from its end.
        cluster.start_node(102)
        wait_for("voter 102 took its leader's snapshot", lambda: "took the leader's snapshot" in node_log(cluster, 102))
        wait_for("voter 102 holds a snapshot file", lambda: checkpoints(cluster, 102))
        # A restarted voter starts from its latest snapshot.
        cluster.stop(100)
        cluster.start_node(100)
        assert "latest snapshot" in node_log(cluster, 100)
        retrying(lambda: admin.create_topics([NewTopic("after-restart", 1, 2)])["after-restart"].result(30))
        wait_for("every broker knows the new topic",
                 lambda: all(knows(cluster, b, ["after-restart"]) for b in (1, 2, 3)))
        assert retention_via(cluster, 1, TOPICS[0]) == str(last)
