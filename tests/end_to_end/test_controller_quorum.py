"""A three-voter controller quorum survives the loss of its active controller (KRaft semantics).

The same script on Apache Kafka 4.3.1 and kbroker (compat/cluster.py with ``controllers=3``:
voters 100-102 on 127.0.0.21-23, brokers 1-3). ``kafka-metadata-quorum`` names the leader; it
is SIGKILLed; another voter is elected and the cluster keeps working: a topic can be created
again, and a broker crash is still detected and its partitions get new leaders. The killed
voter is restarted and catches up (every voter's log end offset reaches the high watermark).
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from compat.cluster import Cluster, make_cluster
from tests.end_to_end.controller_quorum import active_controller, create_topic_until_answered, describe_quorum

NEW_CONTROLLER_WITHIN_S = 15.0
NEW_LEADER_WITHIN_S = 10.0


def known_partitions(cluster: Cluster, topic: str) -> list:
    """``topic``'s three partitions as broker 1 sees them, once it has learnt of all of them (a broker
    follows the metadata log a moment behind the controller that answered CreateTopics)."""
    deadline = time.monotonic() + NEW_LEADER_WITHIN_S
    while True:
        partitions = cluster.metadata(1, [topic]).topics[0].partitions
        if len(partitions) == 3 and all(p.leader_id >= 0 for p in partitions):
            return partitions
        assert time.monotonic() < deadline, partitions
        time.sleep(0.05)


@pytest.mark.timeout(600)
@pytest.mark.parametrize("target", ["kafka", "kbroker"])
def test_quorum_survives_the_active_controller_crash(target: str, tmp_path: Path) -> None:
    with make_cluster(target, tmp_path / "cluster", controllers=3) as cluster:
        create_topic_until_answered(cluster.bootstrap, "before", time.monotonic() + 60)
        active = active_controller(cluster)
        assert active in cluster.controller_ids
        killed_at = time.monotonic()
        cluster.kill(active)
        create_topic_until_answered(cluster.bootstrap, "after", killed_at + NEW_CONTROLLER_WITHIN_S)
        elected_s = time.monotonic() - killed_at
        new_active = active_controller(cluster)
        assert new_active != active and new_active in cluster.controller_ids
        # The new controller still fences crashed brokers and moves their leadership.
        partitions = known_partitions(cluster, "after")
        led = [p.partition_index for p in partitions if p.leader_id == 2]
        cluster.kill(2)
        broker_killed_at = time.monotonic()
        while True:
            parts = cluster.metadata(1, ["after"]).topics[0].partitions
            if len(parts) == len(partitions) and all(p.leader_id in (1, 3) for p in parts):
                break
            assert time.monotonic() - broker_killed_at < NEW_LEADER_WITHIN_S, parts
            time.sleep(0.1)
        moved_s = time.monotonic() - broker_killed_at
        cluster.start_node(2)
        cluster.start_node(active)
        deadline = time.monotonic() + 60
        while True:  # every voter caught up: all three report a lag of 0
            lines = describe_quorum(cluster, replication=True).splitlines()[1:]
            rows = [line.split() for line in lines if line.strip()]
            voters = [row for row in rows if row[-1] in ("Leader", "Follower")]
            if len(voters) == 3 and all(row[3] == "0" for row in voters):
                break
            assert time.monotonic() < deadline, rows
            time.sleep(0.5)
    print(f"{target}: controller {active} killed, topic created {elapsed(elected_s)} later by {new_active}; "
          f"broker 2's partitions {led} moved in {elapsed(moved_s)}")


def elapsed(seconds: float) -> str:
    return f"{seconds:.2f} s"
