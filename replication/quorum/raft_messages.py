"""The controller quorum's messages: small frozen values exchanged by `kbroker.replication.quorum.raft` nodes.

Field names follow Kafka's KRaft request/response schemas (Vote, BeginQuorumEpoch, EndQuorumEpoch, Fetch)
so the network layer can map each value onto the matching kio entity one field at a time; FetchSnapshot
(KIP-630) carries a snapshot to a fetcher whose fetch offset fell below the leader's log start. The one
addition is `correlation_id` on Fetch and FetchSnapshot: on the wire it is the request header's
correlation id, which the state machine needs to tell the answer to its latest request from a stale or
duplicated one.
"""

from __future__ import annotations

from dataclasses import dataclass

from kbroker.protocol.errors import ErrorCode

__all__ = [
    "BeginQuorumEpochRequest",
    "BeginQuorumEpochResponse",
    "DivergingEpoch",
    "EndQuorumEpochRequest",
    "EndQuorumEpochResponse",
    "FetchRequest",
    "FetchResponse",
    "FetchSnapshotRequest",
    "FetchSnapshotResponse",
    "LogEntry",
    "Outbound",
    "RaftMessage",
    "SnapshotId",
    "VoteRequest",
    "VoteResponse",
]


@dataclass(frozen=True, slots=True)
class LogEntry:
    """One record of the metadata log: its offset, the leader epoch that appended it, and its bytes."""

    offset: int
    epoch: int
    payload: bytes


@dataclass(frozen=True, slots=True, order=True)
class SnapshotId:
    """A snapshot holds every entry below `end_offset`; `epoch` is the epoch of the last of them."""

    end_offset: int
    epoch: int


@dataclass(frozen=True, slots=True)
class VoteRequest:
    """A candidate asks for a vote in `candidate_epoch`; the last offset/epoch let the voter compare logs."""

    candidate_epoch: int
    candidate_id: int
    last_offset_epoch: int
    last_offset: int


@dataclass(frozen=True, slots=True)
class VoteResponse:
    """The voter's answer, with the leader it knows (if any) in its own epoch."""

    error_code: ErrorCode
    leader_id: int | None
    leader_epoch: int
    vote_granted: bool


@dataclass(frozen=True, slots=True)
class BeginQuorumEpochRequest:
    """A newly elected leader announces itself so voters start fetching without waiting for a timeout."""

    leader_id: int
    leader_epoch: int


@dataclass(frozen=True, slots=True)
class BeginQuorumEpochResponse:
    error_code: ErrorCode
    leader_id: int | None
    leader_epoch: int


@dataclass(frozen=True, slots=True)
class EndQuorumEpochRequest:
    """A leader resigns; `preferred_successors` lists voters by how far their logs reached, best first."""

    leader_id: int
    leader_epoch: int
    preferred_successors: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class EndQuorumEpochResponse:
    error_code: ErrorCode
    leader_id: int | None
    leader_epoch: int


@dataclass(frozen=True, slots=True)
class FetchRequest:
    """A follower or observer pulls entries from `fetch_offset`; `last_fetched_epoch` is the epoch of the
    entry just before it (0 for an empty log) so the leader can detect a divergent tail."""

    correlation_id: int
    replica_id: int
    current_leader_epoch: int
    fetch_offset: int
    last_fetched_epoch: int
    max_records: int = 64


@dataclass(frozen=True, slots=True)
class DivergingEpoch:
    """The leader's largest epoch <= the fetcher's last fetched epoch, and where that epoch ends."""

    epoch: int
    end_offset: int


@dataclass(frozen=True, slots=True)
class FetchResponse:
    """Entries starting at the request's fetch offset, or a `diverging_epoch` telling the fetcher to truncate.
    `leader_id`/`leader_epoch` are Kafka's CurrentLeader: they let a fenced fetcher find the right leader.
    `snapshot_id` tells a fetcher below the leader's log start to fetch that snapshot (FetchSnapshot) first."""

    correlation_id: int
    error_code: ErrorCode
    high_watermark: int
    leader_id: int | None
    leader_epoch: int
    diverging_epoch: DivergingEpoch | None = None
    records: tuple[LogEntry, ...] = ()
    snapshot_id: SnapshotId | None = None


@dataclass(frozen=True, slots=True)
class FetchSnapshotRequest:
    """Up to `max_bytes` of snapshot `snapshot_id` from byte `position` on."""

    correlation_id: int
    replica_id: int
    current_leader_epoch: int
    snapshot_id: SnapshotId
    position: int
    max_bytes: int


@dataclass(frozen=True, slots=True)
class FetchSnapshotResponse:
    """A chunk of the snapshot (`size` is the whole snapshot's) or an error: SNAPSHOT_NOT_FOUND when the
    leader no longer has it (the fetcher fetches again and learns the newer one)."""

    correlation_id: int
    error_code: ErrorCode
    leader_id: int | None
    leader_epoch: int
    snapshot_id: SnapshotId
    size: int = 0
    position: int = 0
    data: bytes = b""


RaftMessage = (
    VoteRequest
    | VoteResponse
    | BeginQuorumEpochRequest
    | BeginQuorumEpochResponse
    | EndQuorumEpochRequest
    | EndQuorumEpochResponse
    | FetchRequest
    | FetchResponse
    | FetchSnapshotRequest
    | FetchSnapshotResponse
)


@dataclass(frozen=True, slots=True)
class Outbound:
    """A message the caller must deliver to node `destination` (best effort: the protocol tolerates loss)."""

    destination: int
    message: RaftMessage
