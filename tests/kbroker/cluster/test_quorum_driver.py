"""QuorumDriver on a real metadata log and quorum-state file whose writes fail (failpoints): a
voter that cannot persist neither votes, leads nor acknowledges, and takes part again once
writes succeed."""

from __future__ import annotations

import errno
import random

import pytest
from kbroker.protocol.errors import ErrorCode
from kbroker.replication.quorum.metadata_image import METADATA_TOPIC
from kbroker.replication.quorum.raft import RaftConfig, RaftNode, RaftRole
from kbroker.replication.quorum.raft_log import FileQuorumState, PartitionRaftLog
from kbroker.replication.quorum.raft_messages import VoteRequest, VoteResponse
from kbroker.replication.quorum.raft_wire import request_to_wire, response_from_wire
from kbroker.storage import file_io
from kbroker.storage.file_io import FailPoint, inject
from kbroker.storage.log import PartitionLog
from kbroker.storage.log_config import LogConfig

from kbroker.cluster.quorum_driver import QuorumDriver

LATER_MS = 10**14  # far past every election timeout (now is ~1.8e12 ms)


pytestmark = pytest.mark.usefixtures("no_failpoints_left")


def driver(tmp_path, voters: dict[int, tuple[str, int]]) -> QuorumDriver:
    directory = str(tmp_path / f"{METADATA_TOPIC}-0")
    metadata_log = PartitionLog.create(directory, METADATA_TOPIC, 0, "id", LogConfig())

    def make_raft(now_ms: int) -> RaftNode:
        return RaftNode(1, voters, PartitionRaftLog(metadata_log), FileQuorumState(directory),
                        random.Random(1), RaftConfig(), now_ms=now_ms)

    return QuorumDriver(make_raft, voters, None, lambda: None)


def vote(d: QuorumDriver, candidate: int, epoch: int) -> VoteResponse:
    api_key, _version, request = request_to_wire(VoteRequest(epoch, candidate, 0, 0))
    answer = response_from_wire(VoteRequest(epoch, candidate, 0, 0), d.handle_request(api_key, request))
    assert isinstance(answer, VoteResponse)
    return answer


def test_a_voter_that_cannot_persist_its_vote_does_not_grant_it(tmp_path):
    d = driver(tmp_path, {1: ("127.0.0.1", 1), 2: ("127.0.0.1", 2), 3: ("127.0.0.1", 3)})
    inject(FailPoint("write", errno.ENOSPC, path_contains="quorum-state", times=0))
    refused = vote(d, candidate=2, epoch=5)
    assert (refused.vote_granted, refused.error_code) == (False, ErrorCode.kafka_storage_error)
    assert d.raft.voted_id is None  # the vote it could not persist is forgotten too
    assert FileQuorumState(str(tmp_path / f"{METADATA_TOPIC}-0")).read().voted_id is None
    assert vote(d, candidate=2, epoch=5).vote_granted is False  # a retry is not "a vote already cast"
    file_io.clear_failpoints()
    granted = vote(d, candidate=2, epoch=5)
    assert granted.vote_granted and granted.error_code == ErrorCode.none
    assert FileQuorumState(str(tmp_path / f"{METADATA_TOPIC}-0")).read().voted_id == 2


def test_a_single_voter_leads_only_once_it_can_write(tmp_path):
    d = driver(tmp_path, {1: ("127.0.0.1", 1)})
    failing = inject(FailPoint("write", errno.ENOSPC, path_contains="quorum-state", times=0))
    for step in range(3):
        d.tick(LATER_MS + step * 10**6)
        assert d.raft.role is not RaftRole.LEADER
    assert failing.fired >= 3 and d.storage_restarts >= 3
    file_io.clear_failpoints()
    d.tick(LATER_MS + 10**7)
    assert d.raft.role is RaftRole.LEADER


def test_a_leader_whose_metadata_log_is_full_stops_leading_and_writes_nothing(tmp_path):
    d = driver(tmp_path, {1: ("127.0.0.1", 1)})
    d.tick(LATER_MS)
    assert d.raft.role is RaftRole.LEADER
    end = d.raft.log.end_offset
    inject(FailPoint("write", errno.ENOSPC, path_contains=".log"))
    assert d.propose([b"record"]) is None
    assert d.raft.role is not RaftRole.LEADER
    assert d.raft.log.end_offset == end
    d.tick(LATER_MS + 10**7)  # room again: a new election, a new epoch, and it leads
    assert d.raft.role is RaftRole.LEADER
    assert d.propose([b"record"]) == d.raft.log.end_offset - 1
