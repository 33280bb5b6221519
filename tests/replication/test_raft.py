"""Targeted, hand-driven scenarios for the controller quorum's Raft core (`kbroker.replication.quorum.raft`)."""

from __future__ import annotations

import random
from dataclasses import replace

from kbroker.protocol.errors import ErrorCode
from kbroker.replication.quorum.raft import LEADER_CHANGE_PAYLOAD, RaftConfig, RaftNode, RaftRole
from kbroker.replication.quorum.raft_messages import (
    DivergingEpoch,
    EndQuorumEpochRequest,
    FetchRequest,
    FetchResponse,
    FetchSnapshotResponse,
    Outbound,
    VoteRequest,
    VoteResponse,
)
from kbroker.replication.quorum.raft_storage import QuorumState

from tests.support.raft_memory import MemoryQuorumState, MemoryRaftLog

CONFIG = RaftConfig(election_timeout_ms=1000, fetch_timeout_ms=2000, request_timeout_ms=500, fetch_backoff_ms=50)


def make_log(*epochs_and_payloads: tuple[int, list[bytes]]) -> MemoryRaftLog:
    log = MemoryRaftLog()
    for epoch, payloads in epochs_and_payloads:
        log.append(epoch, payloads)
    return log


def make_node(
    node_id: int,
    log: MemoryRaftLog,
    state: QuorumState | None = None,
    voters: tuple[int, ...] = (1, 2, 3),
    config: RaftConfig = CONFIG,
) -> RaftNode:
    store = MemoryQuorumState()
    if state is not None:
        store.write(state)
    return RaftNode(node_id, voters, log, store, random.Random(node_id), config, now_ms=0)


def contents(log: MemoryRaftLog) -> list[tuple[int, bytes]]:
    return [(entry.epoch, entry.payload) for entry in log.entries(0, log.end_offset)]


class Network:
    """Delivers messages in order, instantly, except to nodes in `down`; records every delivery."""

    def __init__(self, nodes: dict[int, RaftNode]) -> None:
        self.nodes = nodes
        self.down: set[int] = set()
        self.delivered: list[tuple[int, int, object]] = []

    def run(self, now: int, source: int, outbound: list[Outbound], limit: int = 1000) -> None:
        pending = [(source, item) for item in outbound]
        while pending and limit:
            limit -= 1
            sender, item = pending.pop(0)
            if item.destination in self.down or sender in self.down:
                continue
            self.delivered.append((sender, item.destination, item.message))
            replies = self.nodes[item.destination].handle(now, sender, item.message)
            pending.extend((item.destination, reply) for reply in replies)

    def tick_all(self, now: int) -> None:
        for node_id, node in self.nodes.items():
            if node_id not in self.down:
                self.run(now, node_id, node.tick(now))


def test_candidate_with_a_shorter_log_loses_the_vote():
    voter = make_node(1, make_log((1, [b"a", b"b"]), (2, [b"c"])), QuorumState(epoch=2))
    # Same last epoch, fewer entries: refused.
    [reply] = voter.handle(0, 2, VoteRequest(candidate_epoch=3, candidate_id=2, last_offset_epoch=2, last_offset=2))
    assert reply.message == VoteResponse(reply.message.error_code, None, 3, vote_granted=False)
    # A longer log from an older epoch is still behind: refused.
    [reply] = voter.handle(0, 3, VoteRequest(candidate_epoch=3, candidate_id=3, last_offset_epoch=1, last_offset=9))
    assert reply.message.vote_granted is False
    assert voter.voted_id is None and voter.epoch == 3
    # An equally complete log wins it, and the vote is durable before the answer leaves.
    [reply] = voter.handle(0, 3, VoteRequest(candidate_epoch=3, candidate_id=3, last_offset_epoch=2, last_offset=3))
    assert reply.message.vote_granted is True
    assert voter.role is RaftRole.VOTED
    assert voter._store.read() == QuorumState(epoch=3, voted_id=3, leader_id=None)
    # One vote per epoch: another candidate of epoch 3 with a longer log is refused.
    [reply] = voter.handle(0, 2, VoteRequest(candidate_epoch=3, candidate_id=2, last_offset_epoch=2, last_offset=7))
    assert reply.message.vote_granted is False


def test_follower_with_a_divergent_tail_truncates_through_diverging_epoch():
    # Node 1 led epoch 3 after node 2 had written an uncommitted tail in epoch 2.
    leader_log = make_log((1, [b"a", b"b"]), (3, [LEADER_CHANGE_PAYLOAD, b"c"]))
    follower_log = make_log((1, [b"a", b"b"]), (2, [b"x", b"y", b"z"]))
    leader = make_node(1, leader_log, QuorumState(epoch=3, voted_id=1))
    follower = make_node(2, follower_log, QuorumState(epoch=3, leader_id=1))
    nodes = {1: leader, 2: follower, 3: make_node(3, MemoryRaftLog(), QuorumState(epoch=3, leader_id=1))}
    network = Network(nodes)
    network.down.add(3)
    # Node 1 stands for epoch 4 and wins with node 2's vote (its last epoch 3 beats node 2's 2).
    # (Election timeouts are drawn from [1000, 2000) ms.)
    network.run(2000, 1, leader.tick(2000))
    assert leader.role is RaftRole.LEADER and leader.epoch == 4
    for now in range(2000, 2500, 50):
        network.tick_all(now)
    answers = [m for _, dest, m in network.delivered if dest == 2 and isinstance(m, FetchResponse)]
    assert answers[0].diverging_epoch == DivergingEpoch(epoch=1, end_offset=2)
    assert contents(follower_log) == contents(leader_log)
    assert follower.high_watermark == leader.high_watermark == leader_log.end_offset


def test_leader_does_not_commit_an_old_epoch_entry_by_counting_replicas():
    """Raft's figure 8 in KRaft form: `a` (epoch 2) on a majority is not committed until epoch 4's entry is."""
    node_a = make_node(1, make_log((1, [b"p"]), (2, [b"a"])), QuorumState(epoch=3))
    node_b = make_node(2, make_log((1, [b"p"])), QuorumState(epoch=3))
    # Node 3 led epoch 3 and wrote only its LeaderChange entry at offset 1 before it went away.
    [vote_request] = [o.message for o in node_a.tick(2000) if o.destination == 2]
    [vote] = node_b.handle(2000, 1, vote_request)
    node_a.handle(2000, 2, vote.message)  # node 1's log (last epoch 2) beats node 2's (last epoch 1)
    assert node_a.role is RaftRole.LEADER and node_a.epoch == 4
    # Node 2 fetches one entry per request: first `a`, then it reports fetch_offset 2.
    request = FetchRequest(1, 2, 4, fetch_offset=1, last_fetched_epoch=1, max_records=1)
    [reply] = node_a.handle(2001, 2, request)
    assert [r.payload for r in reply.message.records] == [b"a"]
    node_a.handle(2002, 2, FetchRequest(2, 2, 4, fetch_offset=2, last_fetched_epoch=2, max_records=1))
    # `a` sits on nodes 1 and 2 (a majority), yet committing it would be unsafe: node 3 (last epoch 3) could
    # still win node 2's vote and overwrite offset 1. So the high watermark stays put.
    assert node_a.high_watermark == 0
    voter_b = make_node(2, make_log((1, [b"p"]), (2, [b"a"])), QuorumState(epoch=4, leader_id=1))
    [vote] = voter_b.handle(2003, 3, VoteRequest(5, 3, last_offset_epoch=3, last_offset=2))
    assert vote.message.vote_granted is True
    # Once epoch 4's LeaderChange entry is on a majority, everything before it commits with it.
    node_a.handle(2004, 2, FetchRequest(3, 2, 4, fetch_offset=3, last_fetched_epoch=4, max_records=1))
    assert node_a.high_watermark == 3


def test_end_quorum_epoch_lets_the_preferred_successor_take_over_fast():
    nodes = {i: make_node(i, MemoryRaftLog()) for i in (1, 2, 3)}
    network = Network(nodes)
    now = 0
    while not any(n.role is RaftRole.LEADER for n in nodes.values()):
        now += 10
        network.tick_all(now)
    leader = next(n for n in nodes.values() if n.role is RaftRole.LEADER)
    leader.propose([b"x"])
    for _ in range(3):
        now += 60
        network.tick_all(now)
    assert all(n.high_watermark == 2 for n in nodes.values())
    resigned_at = now
    outbound = leader.resign(now)
    [request, *_] = [o.message for o in outbound if isinstance(o.message, EndQuorumEpochRequest)]
    successor = nodes[request.preferred_successors[0]]
    network.run(now, leader.node_id, outbound)
    while successor.role is not RaftRole.LEADER:
        now += 10
        network.tick_all(now)
    assert now - resigned_at < CONFIG.election_timeout_ms / 2
    assert successor.epoch == leader.epoch
    assert leader.role is RaftRole.FOLLOWER and leader.leader_id == successor.node_id


def test_a_voter_behind_the_leaders_log_start_catches_up_by_fetch_snapshot():
    # Node 1 leads epoch 2; node 3 was away and holds only the first entry, from a stale divergent epoch-1 tail.
    leader_log = make_log((1, [b"a", b"b"]), (2, [LEADER_CHANGE_PAYLOAD, b"c", b"d"]))
    config = replace(CONFIG, max_snapshot_chunk_bytes=50)
    leader = make_node(1, leader_log, QuorumState(epoch=2, voted_id=1), config=config)
    lagging_log = make_log((1, [b"a", b"x"]))
    nodes = {1: leader, 2: make_node(2, make_log((1, [b"a", b"b"]))), 3: make_node(3, lagging_log)}
    network = Network(nodes)
    network.down.add(3)
    network.run(2000, 1, leader.tick(2000))  # elected at epoch 3 with node 2's vote
    for now in range(2000, 2300, 50):
        network.tick_all(now)
    assert leader.role is RaftRole.LEADER and leader.high_watermark == leader_log.end_offset == 6
    # The leader snapshots its committed state twice and drops the log behind the first snapshot.
    leader_log.create_snapshot(3, [e.payload for e in leader_log.entries(0, 3)])
    payloads = [e.payload for e in leader_log.entries(0, 6)]
    snapshot = leader_log.create_snapshot(6, payloads)
    assert leader_log.delete_before_snapshot() == 3 and snapshot.epoch == 3
    network.down.discard(3)
    for now in range(2300, 4000, 50):
        network.tick_all(now)
    to_3 = [m for _, dest, m in network.delivered if dest == 3]
    assert any(isinstance(m, FetchResponse) and m.snapshot_id == snapshot for m in to_3)
    chunks = [m for m in to_3 if isinstance(m, FetchSnapshotResponse)]
    assert len(chunks) > 1 and all(c.error_code == ErrorCode.none for c in chunks)  # 50-byte chunks
    # Node 3 holds exactly the leader's committed state, then follows its log from the snapshot's end.
    assert lagging_log.latest_snapshot_id == snapshot and lagging_log.snapshot_payloads(snapshot) == payloads
    assert lagging_log.start_offset == 6 and lagging_log.last_epoch == 3
    leader.propose([b"e"])
    for now in range(4000, 4300, 50):
        network.tick_all(now)
    assert [e.payload for e in lagging_log.entries(6, 10)] == [b"e"]
    assert nodes[3].high_watermark == leader.high_watermark == 7


def test_a_snapshot_that_arrives_damaged_is_fetched_again_not_installed():
    leader_log = make_log((1, [b"a", b"b"]), (2, [LEADER_CHANGE_PAYLOAD, b"c"]))
    leader = make_node(1, leader_log, QuorumState(epoch=2, voted_id=1))
    lagging_log = MemoryRaftLog()
    nodes = {1: leader, 2: make_node(2, make_log((1, [b"a", b"b"]))), 3: make_node(3, lagging_log)}
    network = Network(nodes)
    network.down.add(3)
    network.run(2000, 1, leader.tick(2000))
    for now in range(2000, 2300, 50):
        network.tick_all(now)
    leader_log.create_snapshot(2, [b"a", b"b"])
    payloads = [e.payload for e in leader_log.entries(0, 5)]
    snapshot = leader_log.create_snapshot(5, payloads)
    leader_log.delete_before_snapshot()
    whole = leader_log.read_snapshot
    served: list[bytes] = []

    def damaged_once(snapshot_id, position, max_bytes):
        data = whole(snapshot_id, position, max_bytes)
        if not served:  # the first answer has a flipped byte: the CRC check refuses the whole snapshot
            data = data[:100] + bytes([data[100] ^ 0xFF]) + data[101:]
        served.append(data)
        return data

    leader_log.read_snapshot = damaged_once
    network.down.discard(3)
    for now in range(2300, 4000, 50):
        network.tick_all(now)
    assert len(served) >= 2 and lagging_log.latest_snapshot_id == snapshot
    assert lagging_log.snapshot_payloads(snapshot) == payloads and lagging_log.start_offset == 5
