"""The controller quorum's messages on Kafka's wire: RaftMessage values to and from kio entities.

Vote (52), BeginQuorumEpoch (53) and EndQuorumEpoch (54) at v0, Fetch (1) at v12 naming
``__cluster_metadata`` partition 0 with the fetcher's replica id, and FetchSnapshot (59) at v0 —
the requests KRaft voters exchange. Entries travel as record batches (one per epoch run) whose partition leader epoch is
the Raft epoch. The Raft correlation id of a Fetch is carried by the caller, not the message.
"""

from __future__ import annotations

import datetime
import time
from typing import Any

from kbroker.protocol.codec import NO_THROTTLE
from kbroker.protocol.errors import ErrorCode
from kio.schema.begin_quorum_epoch.v0 import request as begin_req
from kio.schema.begin_quorum_epoch.v0 import response as begin_resp
from kio.schema.end_quorum_epoch.v0 import request as end_req
from kio.schema.end_quorum_epoch.v0 import response as end_resp
from kio.schema.fetch.v12 import request as fetch_req
from kio.schema.fetch.v12 import response as fetch_resp
from kio.schema.fetch_snapshot.v0 import request as snapshot_req
from kio.schema.fetch_snapshot.v0 import response as snapshot_resp
from kio.schema.types import BrokerId, TopicName
from kio.schema.vote.v0 import request as vote_req
from kio.schema.vote.v0 import response as vote_resp
from kio.static.primitive import Records, i8, i32, i32Timedelta, i64

from .metadata_image import METADATA_TOPIC
from .raft_log import batch_entries, entries_batch
from .raft_messages import (
    BeginQuorumEpochRequest,
    BeginQuorumEpochResponse,
    DivergingEpoch,
    EndQuorumEpochRequest,
    EndQuorumEpochResponse,
    FetchRequest,
    FetchResponse,
    FetchSnapshotRequest,
    FetchSnapshotResponse,
    LogEntry,
    RaftMessage,
    SnapshotId,
    VoteRequest,
    VoteResponse,
)

VOTE, BEGIN_QUORUM_EPOCH, END_QUORUM_EPOCH, FETCH, FETCH_SNAPSHOT = 52, 53, 54, 1, 59
FETCH_VERSION = 12
FETCH_MAX_BYTES = 8 << 20


def _leader(value: int | None) -> int:
    return -1 if value is None else value


def _known(value: int) -> int | None:
    return None if value < 0 else value


RaftWireRequest = (
    vote_req.VoteRequest | begin_req.BeginQuorumEpochRequest | end_req.EndQuorumEpochRequest | fetch_req.FetchRequest
    | snapshot_req.FetchSnapshotRequest
)
RaftWireResponse = (
    vote_resp.VoteResponse | begin_resp.BeginQuorumEpochResponse | end_resp.EndQuorumEpochResponse
    | fetch_resp.FetchResponse | snapshot_resp.FetchSnapshotResponse
)
_TOPIC = TopicName(METADATA_TOPIC)
_PARTITION = i32(0)
_NO_WAIT = i32Timedelta.parse(datetime.timedelta(0))  # a Raft fetch answers at once


def request_to_wire(message: RaftMessage) -> tuple[int, int, RaftWireRequest]:
    """(api key, version, kio request) for an outbound Raft request."""
    if isinstance(message, VoteRequest):
        vote = vote_req.PartitionData(partition_index=_PARTITION, replica_epoch=i32(message.candidate_epoch),
                                      replica_id=BrokerId(message.candidate_id),
                                      last_offset_epoch=i32(message.last_offset_epoch),
                                      last_offset=i64(message.last_offset))
        return VOTE, 0, vote_req.VoteRequest(topics=(vote_req.TopicData(topic_name=_TOPIC, partitions=(vote,)),))
    if isinstance(message, BeginQuorumEpochRequest):
        begin = begin_req.PartitionData(partition_index=_PARTITION, leader_id=BrokerId(message.leader_id),
                                        leader_epoch=i32(message.leader_epoch))
        return BEGIN_QUORUM_EPOCH, 0, begin_req.BeginQuorumEpochRequest(
            topics=(begin_req.TopicData(topic_name=_TOPIC, partitions=(begin,)),))
    if isinstance(message, EndQuorumEpochRequest):
        end = end_req.PartitionData(partition_index=_PARTITION, leader_id=BrokerId(message.leader_id),
                                    leader_epoch=i32(message.leader_epoch),
                                    preferred_successors=tuple(i32(s) for s in message.preferred_successors))
        return END_QUORUM_EPOCH, 0, end_req.EndQuorumEpochRequest(
            topics=(end_req.TopicData(topic_name=_TOPIC, partitions=(end,)),))
    if isinstance(message, FetchRequest):
        fetch = fetch_req.FetchPartition(
            partition=_PARTITION, current_leader_epoch=i32(message.current_leader_epoch),
            fetch_offset=i64(message.fetch_offset), last_fetched_epoch=i32(message.last_fetched_epoch),
            log_start_offset=i64(-1), partition_max_bytes=i32(FETCH_MAX_BYTES))
        return FETCH, FETCH_VERSION, fetch_req.FetchRequest(
            cluster_id=None, replica_id=BrokerId(message.replica_id), max_wait=_NO_WAIT, min_bytes=i32(0),
            max_bytes=i32(FETCH_MAX_BYTES), isolation_level=i8(0), session_id=i32(0), session_epoch=i32(-1),
            topics=(fetch_req.FetchTopic(topic=_TOPIC, partitions=(fetch,)),), forgotten_topics_data=(),
            rack_id="")
    if isinstance(message, FetchSnapshotRequest):
        wanted = snapshot_req.PartitionSnapshot(
            partition=_PARTITION, current_leader_epoch=i32(message.current_leader_epoch),
            snapshot_id=snapshot_req.SnapshotId(end_offset=i64(message.snapshot_id.end_offset),
                                                epoch=i32(message.snapshot_id.epoch)),
            position=i64(message.position))
        return FETCH_SNAPSHOT, 0, snapshot_req.FetchSnapshotRequest(
            cluster_id=None, replica_id=BrokerId(message.replica_id), max_bytes=i32(message.max_bytes),
            topics=(snapshot_req.TopicSnapshot(name=_TOPIC, partitions=(wanted,)),))
    raise TypeError(f"not a Raft request: {message!r}")


def response_from_wire(request: RaftMessage, response: Any) -> RaftMessage:
    """The Raft response value of a kio response to ``request``."""
    if isinstance(request, FetchRequest):
        data = response.responses[0].partitions[0]
        diverging = None
        if data.diverging_epoch.epoch >= 0:
            diverging = DivergingEpoch(data.diverging_epoch.epoch, data.diverging_epoch.end_offset)
        entries = tuple(batch_entries(data.records)) if data.records else ()
        snapshot = None
        if data.snapshot_id.end_offset >= 0:
            snapshot = SnapshotId(data.snapshot_id.end_offset, data.snapshot_id.epoch)
        return FetchResponse(request.correlation_id, ErrorCode(data.error_code), data.high_watermark,
                             _known(data.current_leader.leader_id), data.current_leader.leader_epoch,
                             diverging, entries, snapshot)
    if isinstance(request, FetchSnapshotRequest):
        if not response.topics:
            return FetchSnapshotResponse(request.correlation_id, ErrorCode(response.error_code), None, -1,
                                         request.snapshot_id)
        chunk = response.topics[0].partitions[0]
        return FetchSnapshotResponse(
            request.correlation_id, ErrorCode(chunk.error_code), _known(chunk.current_leader.leader_id),
            chunk.current_leader.leader_epoch, SnapshotId(chunk.snapshot_id.end_offset, chunk.snapshot_id.epoch),
            chunk.size, chunk.position, bytes(chunk.unaligned_records))
    part = response.topics[0].partitions[0]
    code = ErrorCode(part.error_code) if part.error_code else ErrorCode(response.error_code)
    if isinstance(request, VoteRequest):
        return VoteResponse(code, _known(part.leader_id), part.leader_epoch, part.vote_granted)
    if isinstance(request, BeginQuorumEpochRequest):
        return BeginQuorumEpochResponse(code, _known(part.leader_id), part.leader_epoch)
    return EndQuorumEpochResponse(code, _known(part.leader_id), part.leader_epoch)


def request_from_wire(api_key: int, request: Any) -> tuple[int, RaftMessage]:
    """(sender id, Raft request) of an inbound kio request."""
    if api_key == FETCH:
        p = request.topics[0].partitions[0]
        return request.replica_id, FetchRequest(0, request.replica_id, p.current_leader_epoch, p.fetch_offset,
                                                p.last_fetched_epoch)
    if api_key == FETCH_SNAPSHOT:
        p = request.topics[0].partitions[0]
        return request.replica_id, FetchSnapshotRequest(
            0, request.replica_id, p.current_leader_epoch, SnapshotId(p.snapshot_id.end_offset, p.snapshot_id.epoch),
            p.position, request.max_bytes)
    p = request.topics[0].partitions[0]
    if api_key == VOTE:
        return p.replica_id, VoteRequest(p.replica_epoch, p.replica_id, p.last_offset_epoch, p.last_offset)
    if api_key == BEGIN_QUORUM_EPOCH:
        return p.leader_id, BeginQuorumEpochRequest(p.leader_id, p.leader_epoch)
    return p.leader_id, EndQuorumEpochRequest(p.leader_id, p.leader_epoch, tuple(p.preferred_successors))


def _entries_records(entries: tuple[LogEntry, ...]) -> bytes | None:
    if not entries:
        return None
    now_ms = int(time.time() * 1000)
    out = bytearray()
    run: list[LogEntry] = []
    for entry in (*entries, None):
        if run and (entry is None or entry.epoch != run[0].epoch):
            out += entries_batch(run[0].epoch, run[0].offset, [e.payload for e in run], now_ms)
            run = []
        if entry is not None:
            run.append(entry)
    return bytes(out)


def response_to_wire(api_key: int, message: RaftMessage) -> RaftWireResponse:
    """The kio response entity carrying a Raft response to an inbound request."""
    if isinstance(message, FetchResponse):
        diverging = fetch_resp.EpochEndOffset(
            epoch=i32(message.diverging_epoch.epoch if message.diverging_epoch else -1),
            end_offset=i64(message.diverging_epoch.end_offset if message.diverging_epoch else -1))
        records = _entries_records(message.records)
        fetched = fetch_resp.PartitionData(
            partition_index=_PARTITION, error_code=message.error_code, high_watermark=i64(message.high_watermark),
            last_stable_offset=i64(message.high_watermark), log_start_offset=i64(0), diverging_epoch=diverging,
            current_leader=fetch_resp.LeaderIdAndEpoch(leader_id=BrokerId(_leader(message.leader_id)),
                                                       leader_epoch=i32(message.leader_epoch)),
            aborted_transactions=None, preferred_read_replica=BrokerId(-1),
            records=None if records is None else Records(records),
            snapshot_id=fetch_resp.SnapshotId(
                end_offset=i64(message.snapshot_id.end_offset if message.snapshot_id else -1),
                epoch=i32(message.snapshot_id.epoch if message.snapshot_id else -1)))
        return fetch_resp.FetchResponse(throttle_time=NO_THROTTLE, error_code=ErrorCode.none, session_id=i32(0),
                                        responses=(fetch_resp.FetchableTopicResponse(topic=_TOPIC,
                                                                                     partitions=(fetched,)),))
    if isinstance(message, FetchSnapshotResponse):
        chunk = snapshot_resp.PartitionSnapshot(
            index=_PARTITION, error_code=message.error_code,
            snapshot_id=snapshot_resp.SnapshotId(end_offset=i64(message.snapshot_id.end_offset),
                                                 epoch=i32(message.snapshot_id.epoch)),
            current_leader=snapshot_resp.LeaderIdAndEpoch(leader_id=BrokerId(_leader(message.leader_id)),
                                                          leader_epoch=i32(message.leader_epoch)),
            size=i64(message.size), position=i64(message.position), unaligned_records=Records(message.data))
        return snapshot_resp.FetchSnapshotResponse(throttle_time=NO_THROTTLE, error_code=ErrorCode.none, topics=(
            snapshot_resp.TopicSnapshot(name=_TOPIC, partitions=(chunk,)),))
    if isinstance(message, VoteResponse):
        vote = vote_resp.PartitionData(partition_index=_PARTITION, error_code=message.error_code,
                                       leader_id=BrokerId(_leader(message.leader_id)),
                                       leader_epoch=i32(message.leader_epoch), vote_granted=message.vote_granted)
        return vote_resp.VoteResponse(error_code=ErrorCode.none, topics=(
            vote_resp.TopicData(topic_name=_TOPIC, partitions=(vote,)),))
    if isinstance(message, BeginQuorumEpochResponse):
        begin = begin_resp.PartitionData(partition_index=_PARTITION, error_code=message.error_code,
                                         leader_id=BrokerId(_leader(message.leader_id)),
                                         leader_epoch=i32(message.leader_epoch))
        return begin_resp.BeginQuorumEpochResponse(error_code=ErrorCode.none, topics=(
            begin_resp.TopicData(topic_name=_TOPIC, partitions=(begin,)),))
    assert isinstance(message, EndQuorumEpochResponse)
    end = end_resp.PartitionData(partition_index=_PARTITION, error_code=message.error_code,
                                 leader_id=BrokerId(_leader(message.leader_id)), leader_epoch=i32(message.leader_epoch))
    return end_resp.EndQuorumEpochResponse(error_code=ErrorCode.none, topics=(
        end_resp.TopicData(topic_name=_TOPIC, partitions=(end,)),))
