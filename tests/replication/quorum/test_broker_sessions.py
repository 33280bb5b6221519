"""Fencing by session: Kafka's session timeout, and kbroker's early fencing of a broker whose
heartbeat connection its side closed (``kbroker.broker.disconnect.fence.ms``).

The QuorumController is driven with a ManualClock: every decision takes the clock's time, so
each test puts the clock one millisecond either side of a deadline. Brokers heartbeat on named
connections (the peer addresses the controller's listener would pass), as over the network.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from kbroker.protocol.errors import ErrorCode, KafkaError
from kbroker.replication.quorum.quorum_controller import ControllerSettings, QuorumController
from kbroker.replication.quorum.raft_log import PartitionRaftLog
from kbroker.storage.log import PartitionLog
from kbroker.storage.log_config import LogConfig

from tests.support.clock import ManualClock

SESSION_MS = 30_000
GRACE_MS = 1000


def connection(broker_id: int) -> str:
    return f"127.0.0.1{broker_id}:4{broker_id}000"


class Cluster:
    """An active controller with brokers 1-3 registered, unfenced and leading one partition each."""

    def __init__(self, tmp_path: Path, grace_ms: int = GRACE_MS) -> None:
        self.clock = ManualClock()
        directory = tmp_path / "__cluster_metadata-0"
        directory.mkdir()
        plog = PartitionLog(str(directory), "__cluster_metadata", 0, LogConfig(), clock=self.clock)
        plog.load(clean_shutdown=False)
        raft_log = PartitionRaftLog(plog)
        settings = ControllerSettings(
            node_id=100, session_timeout_ms=SESSION_MS, default_partitions=1, default_replication_factor=3,
            broker_default={"min.insync.replicas": "2"}.get, disconnect_fence_ms=grace_ms,
        )
        self.controller = QuorumController(plog, settings, lambda payloads: raft_log.append(1, payloads))
        self.controller.activate(1, self.clock.wall_ms())
        self.controller.bootstrap("test-cluster", [], self.clock.wall_ms())
        self.epochs = {b: self.controller.register_broker(b, f"incarnation-{b}", f"127.0.0.1{b}", 9092, None,
                                                          self.clock.wall_ms()) for b in (1, 2, 3)}
        for broker_id in self.epochs:
            self.heartbeat(broker_id)
        self.topic = self.controller.create_topic("t", 3, 3, {}, {}, False, self.clock.wall_ms())

    def heartbeat(self, broker_id: int, on: str | None = None) -> bool:
        """A heartbeat on the broker's connection (or ``on``); whether the broker is fenced after it."""
        _caught_up, fenced, _ = self.controller.heartbeat(
            broker_id, self.epochs[broker_id], self.controller.image.offset, False, False, self.clock.wall_ms(),
            connection=on or connection(broker_id))
        return fenced

    def close(self, on: str) -> None:
        self.controller.connection_closed(on, self.clock.wall_ms())

    def at(self, wall_ms: int) -> None:
        """Move the clock to ``wall_ms`` and let the controller fence whatever is due."""
        self.clock.advance(wall_ms - self.clock.wall_ms())
        self.controller.fence_expired_sessions(self.clock.wall_ms())

    def fenced(self, broker_id: int) -> bool:
        return self.controller.image.brokers[broker_id].fenced

    def leaders(self) -> list[int]:
        return [reg.leader for reg in self.controller.image.topics["t"].partitions.values()]


def test_a_broker_whose_heartbeat_connection_is_closed_is_fenced_after_the_grace(tmp_path: Path) -> None:
    cluster = Cluster(tmp_path)
    assert 1 in cluster.leaders()
    closed_at = cluster.clock.wall_ms() + 100
    cluster.at(closed_at)
    cluster.close(connection(1))
    assert cluster.controller.next_session_deadline_ms() == closed_at + GRACE_MS
    cluster.at(closed_at + GRACE_MS - 1)
    assert not cluster.fenced(1)
    cluster.at(closed_at + GRACE_MS)
    assert cluster.fenced(1)
    assert 1 not in cluster.leaders()
    assert all(1 not in reg.isr for reg in cluster.controller.image.topics["t"].partitions.values())
    assert not cluster.fenced(2) and not cluster.fenced(3)
    # Its restarted incarnation registers at once: the old one's session has ended.
    epoch = cluster.controller.register_broker(1, "incarnation-1b", "127.0.0.11", 9092, None, cluster.clock.wall_ms())
    assert epoch > cluster.epochs[1]


def test_a_new_incarnation_is_refused_while_the_old_ones_grace_runs(tmp_path: Path) -> None:
    cluster = Cluster(tmp_path)
    start = cluster.clock.wall_ms()
    cluster.close(connection(1))
    cluster.at(start + GRACE_MS // 2)
    with pytest.raises(KafkaError) as refused:
        cluster.controller.register_broker(1, "incarnation-1b", "127.0.0.11", 9092, None, cluster.clock.wall_ms(),
                                           connection="127.0.0.11:41001")
    assert refused.value.code == ErrorCode.duplicate_broker_registration
    cluster.at(start + GRACE_MS)  # the refused attempt was no contact from the old incarnation
    assert cluster.fenced(1)


def test_a_broker_heard_from_again_within_the_grace_is_not_fenced(tmp_path: Path) -> None:
    cluster = Cluster(tmp_path)
    start = cluster.clock.wall_ms()
    cluster.close(connection(1))
    cluster.at(start + GRACE_MS - 1)
    assert not cluster.heartbeat(1, on="127.0.0.11:41001")  # reconnected
    cluster.at(start + GRACE_MS)
    assert not cluster.fenced(1)
    cluster.close(connection(1))  # the old connection again: it no longer carries the heartbeats
    cluster.at(start + 10 * GRACE_MS)
    assert not cluster.fenced(1)
    assert cluster.controller.sessions.deadline_ms(1) == start + GRACE_MS - 1 + SESSION_MS


def test_a_silent_broker_whose_connection_stays_open_waits_out_the_session(tmp_path: Path) -> None:
    """A network partition or a frozen process closes nothing: Kafka's session timeout applies."""
    cluster = Cluster(tmp_path)
    last = cluster.clock.wall_ms()
    for broker_id in (2, 3):
        cluster.close(f"127.0.0.1{broker_id}:50000")  # their metadata fetch connections, not their heartbeats'
    cluster.at(last + SESSION_MS - 1)
    assert not any(cluster.fenced(b) for b in (1, 2, 3))
    for broker_id in (2, 3):
        cluster.heartbeat(broker_id)
    cluster.at(last + SESSION_MS)
    assert cluster.fenced(1) and not cluster.fenced(2) and not cluster.fenced(3)


def test_a_controlled_shutdown_fences_once_and_its_closing_connection_changes_nothing(tmp_path: Path) -> None:
    cluster = Cluster(tmp_path)
    _caught_up, fenced, shut_down = cluster.controller.heartbeat(
        1, cluster.epochs[1], cluster.controller.image.offset, False, True, cluster.clock.wall_ms(),
        connection=connection(1))
    assert fenced and shut_down
    offset = cluster.controller.image.offset
    cluster.close(connection(1))
    cluster.at(cluster.clock.wall_ms() + 5 * GRACE_MS)
    assert cluster.controller.image.offset == offset  # no second fencing


def test_a_broker_in_the_controllers_process_has_no_connection_to_lose(tmp_path: Path) -> None:
    """A combined node's broker heartbeats in process (no connection): only the session applies."""
    cluster = Cluster(tmp_path)
    start = cluster.clock.wall_ms()
    cluster.controller.heartbeat(1, cluster.epochs[1], cluster.controller.image.offset, False, False, start)
    cluster.close(connection(1))
    cluster.at(start + SESSION_MS - 1)
    assert not cluster.fenced(1)


def test_zero_turns_disconnect_fencing_off(tmp_path: Path) -> None:
    cluster = Cluster(tmp_path, grace_ms=0)
    start = cluster.clock.wall_ms()
    cluster.close(connection(1))
    cluster.at(start + SESSION_MS - 1)
    assert not cluster.fenced(1)
    cluster.at(start + SESSION_MS)
    assert cluster.fenced(1)


def test_a_newly_active_controller_knows_no_connection_until_the_next_heartbeat(tmp_path: Path) -> None:
    cluster = Cluster(tmp_path)
    cluster.controller.deactivate()
    cluster.controller.activate(2, cluster.clock.wall_ms())
    start = cluster.clock.wall_ms()
    cluster.close(connection(1))  # it carried heartbeats to the previous term, not to this one
    cluster.at(start + SESSION_MS - 1)
    assert not cluster.fenced(1)
    cluster.heartbeat(2)
    cluster.close(connection(2))
    cluster.at(cluster.clock.wall_ms() + GRACE_MS)
    assert cluster.fenced(2)
