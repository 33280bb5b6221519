"""Quorum requests (Vote, BeginQuorumEpoch, EndQuorumEpoch, Fetch, FetchSnapshot) naming another
cluster get Kafka's answer: the top-level error INCONSISTENT_CLUSTER_ID and nothing else; one
naming this cluster, or none, reaches the Raft core."""

from __future__ import annotations

import datetime
from dataclasses import dataclass, field
from typing import Any

import pytest
from kbroker.protocol.errors import ErrorCode
from kio.schema.begin_quorum_epoch.v0 import request as begin
from kio.schema.begin_quorum_epoch.v0 import response as begin_response
from kio.schema.end_quorum_epoch.v0 import request as end
from kio.schema.end_quorum_epoch.v0 import response as end_response
from kio.schema.fetch.v12 import request as fetch
from kio.schema.fetch.v12 import response as fetch_response
from kio.schema.fetch_snapshot.v0 import request as fetch_snapshot
from kio.schema.fetch_snapshot.v0 import response as fetch_snapshot_response
from kio.schema.vote.v0 import request as vote
from kio.schema.vote.v0 import response as vote_response

from kbroker.controller_handlers import CONTROLLER_HANDLERS
from kbroker.network.dispatcher import Dispatcher
from tests.kbroker.network.test_dispatcher import answer

CLUSTER = "MkU3OEVBNTcwNTJENDM2Qk"
OTHER = "5L6g3nShT-eMCtK--X86sw"
METADATA = "__cluster_metadata"


@dataclass
class Voter:
    """A voter's identity and a Raft core that records what reached it and answers 'no error'."""

    cluster_id: str = CLUSTER
    node_id: int = 100
    voters: dict[int, tuple[str, int]] = field(default_factory=lambda: {100: ("h", 1), 101: ("h", 2)})
    reached: list[int] = field(default_factory=list)

    def handle_raft_request(self, api_key: int, request: Any) -> Any:
        self.reached.append(api_key)
        return ANSWERS[api_key]


ANSWERS: dict[int, Any] = {
    52: vote_response.VoteResponse(error_code=ErrorCode.none, topics=()),
    53: begin_response.BeginQuorumEpochResponse(error_code=ErrorCode.none, topics=()),
    54: end_response.EndQuorumEpochResponse(error_code=ErrorCode.none, topics=()),
    1: fetch_response.FetchResponse(throttle_time=datetime.timedelta(0), error_code=ErrorCode.none, session_id=0,
                                    responses=()),
    59: fetch_snapshot_response.FetchSnapshotResponse(throttle_time=datetime.timedelta(0), error_code=ErrorCode.none,
                                                      topics=()),
}


def requests(cluster_id: str | None) -> list[tuple[Any, int]]:
    """Vote, BeginQuorumEpoch, EndQuorumEpoch, a voter's Fetch and FetchSnapshot from voter 101, naming
    ``cluster_id``."""
    return [
        (vote.VoteRequest(cluster_id=cluster_id, topics=(vote.TopicData(topic_name=METADATA, partitions=(
            vote.PartitionData(partition_index=0, replica_epoch=2, replica_id=101, last_offset_epoch=1,
                               last_offset=5),)),)), 0),
        (begin.BeginQuorumEpochRequest(cluster_id=cluster_id, topics=(begin.TopicData(topic_name=METADATA, partitions=(
            begin.PartitionData(partition_index=0, leader_id=101, leader_epoch=2),)),)), 0),
        (end.EndQuorumEpochRequest(cluster_id=cluster_id, topics=(end.TopicData(topic_name=METADATA, partitions=(
            end.PartitionData(partition_index=0, leader_id=101, leader_epoch=2, preferred_successors=()),)),)), 0),
        (fetch.FetchRequest(
            cluster_id=cluster_id, replica_id=101, max_wait=datetime.timedelta(0), min_bytes=0, max_bytes=1 << 20,
            isolation_level=0, session_id=0, session_epoch=-1, forgotten_topics_data=(), rack_id="",
            topics=(fetch.FetchTopic(topic=METADATA, partitions=(fetch.FetchPartition(
                partition=0, current_leader_epoch=2, fetch_offset=0, last_fetched_epoch=-1, log_start_offset=-1,
                partition_max_bytes=1 << 20),)),)), 12),
        (fetch_snapshot.FetchSnapshotRequest(cluster_id=cluster_id, replica_id=101, max_bytes=1 << 20, topics=(
            fetch_snapshot.TopicSnapshot(name=METADATA, partitions=(fetch_snapshot.PartitionSnapshot(
                partition=0, current_leader_epoch=2, snapshot_id=fetch_snapshot.SnapshotId(end_offset=10, epoch=1),
                position=0),)),)), 0),
    ]


@pytest.mark.parametrize("request_version", requests(OTHER),
                         ids=["Vote", "BeginQuorumEpoch", "EndQuorumEpoch", "Fetch", "FetchSnapshot"])
def test_a_request_of_another_cluster_gets_only_the_top_level_error(request_version: tuple[Any, int]) -> None:
    request, version = request_version
    voter = Voter()
    body = answer(Dispatcher(voter, CONTROLLER_HANDLERS), request, version)
    assert body.error_code == ErrorCode.inconsistent_cluster_id
    assert getattr(body, "topics", getattr(body, "responses", None)) == ()
    assert voter.reached == []


@pytest.mark.parametrize("cluster_id", [CLUSTER, None])
def test_a_request_of_this_cluster_or_naming_none_reaches_raft(cluster_id: str | None) -> None:
    voter = Voter()
    for request, version in requests(cluster_id):
        assert answer(Dispatcher(voter, CONTROLLER_HANDLERS), request, version).error_code == ErrorCode.none
    assert voter.reached == [52, 53, 54, 1, 59]


def test_a_voter_that_does_not_know_its_cluster_id_yet_cannot_judge() -> None:
    voter = Voter(cluster_id="")
    for request, version in requests(OTHER):
        answer(Dispatcher(voter, CONTROLLER_HANDLERS), request, version)
    assert voter.reached == [52, 53, 54, 1, 59]
