"""Fetch (key 1), v12 by name, on a controller: the metadata log's replication.

A fetch from another voter (its replica id is in controller.quorum.voters) is Raft's own
replication and goes to the RaftNode. Any other fetcher is an observer — a broker following the
metadata log (KRaft): the leader answers with whole record batches below the quorum's high
watermark (committed decisions only), waiting up to max_wait for more; a controller that does
not lead answers NOT_LEADER_OR_FOLLOWER with the leader it knows (current_leader), so the
broker moves to it. A fetch below the log start is answered with the latest snapshot's id
(``snapshot_id``, KIP-630: the broker fetches it with FetchSnapshot); one past the end is
OFFSET_OUT_OF_RANGE. A
fetch naming another cluster's id, from a voter or a broker, gets the top-level error
INCONSISTENT_CLUSTER_ID and no data, as from Kafka (controller_handlers/cluster_identity.py).
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Protocol

from kbroker.controller_handlers.cluster_identity import inconsistent_cluster_id, is_foreign
from kbroker.controller_handlers.services import HasControllerIdentity, HasQuorumController, HasRaftQuorum
from kbroker.network.context import RequestContext
from kbroker.protocol.codec import NO_THROTTLE, build, response_module
from kbroker.protocol.errors import ErrorCode
from kbroker.replication.quorum.metadata_image import METADATA_TOPIC

if TYPE_CHECKING:  # annotations only: the codec imports an API's kio module when it is first used
    from kio.schema.fetch.v12.request import FetchRequest
    from kio.schema.fetch.v12.response import FetchResponse

API_KEY = 1
MIN_VERSION = 12
MAX_VERSION = 12


class Services(HasQuorumController, HasRaftQuorum, HasControllerIdentity, Protocol): ...


def _read(services: Services, offset: int, max_bytes: int) -> tuple[ErrorCode, bytes]:
    if not services.controller.active:
        return ErrorCode.not_leader_or_follower, b""
    metadata_log = services.controller.log
    committed = services.high_watermark
    if offset > metadata_log.log_end_offset or offset < metadata_log.log_start_offset:
        return ErrorCode.offset_out_of_range, b""
    piece = metadata_log.read(offset, max_bytes, committed, True)
    if piece is None:
        return ErrorCode.none, b""
    return ErrorCode.none, piece.segment.read_bytes(piece.position, piece.length)


async def handle(ctx: RequestContext[Services], request: FetchRequest) -> FetchResponse:
    services = ctx.services
    if is_foreign(services, request.cluster_id, request.replica_id, "Fetch"):
        return inconsistent_cluster_id(API_KEY, ctx.api_version)
    if request.replica_id in services.voters:
        return services.handle_raft_request(API_KEY, request)
    m = response_module(API_KEY, ctx.api_version)
    wanted = [(t.topic, p) for t in request.topics for p in t.partitions]
    metadata = [p for t, p in wanted if t == METADATA_TOPIC and p.partition == 0]
    if metadata and request.replica_id >= 0:
        services.controller.observers[request.replica_id] = (metadata[0].fetch_offset, services.controller.now_ms())
    if len(metadata) == 1 and request.max_wait.total_seconds() > 0:
        error, data = _read(services, metadata[0].fetch_offset, metadata[0].partition_max_bytes)
        if not error and not data:
            try:
                await asyncio.wait_for(services.controller.wait_for_records(), request.max_wait.total_seconds())
            except TimeoutError:
                pass
    raft = services.raft
    leader = build(m.LeaderIdAndEpoch, leader_id=raft.leader_id if raft.leader_id is not None else -1,
                   leader_epoch=raft.epoch)
    topics = []
    for topic in request.topics:
        partitions = []
        for p in topic.partitions:
            snapshot = None
            if topic.topic == METADATA_TOPIC and p.partition == 0:
                snapshot = raft.log.latest_snapshot_id if p.fetch_offset < raft.log.start_offset else None
                error, data = _read(services, p.fetch_offset, p.partition_max_bytes)
            else:
                error, data = ErrorCode.unknown_topic_or_partition, b""
            if snapshot is not None and services.controller.active:
                error, data = ErrorCode.none, b""
            partitions.append(build(
                m.PartitionData, partition_index=p.partition, error_code=error, high_watermark=services.high_watermark,
                last_stable_offset=services.high_watermark, log_start_offset=services.controller.log.log_start_offset,
                current_leader=leader, aborted_transactions=None, preferred_read_replica=-1,
                records=data or None, snapshot_id=build(
                    m.SnapshotId, end_offset=-1 if snapshot is None else snapshot.end_offset,
                    epoch=-1 if snapshot is None else snapshot.epoch),
            ))
        topics.append(build(m.FetchableTopicResponse, topic=topic.topic, partitions=tuple(partitions)))
    return build(m.FetchResponse, throttle_time=NO_THROTTLE, error_code=ErrorCode.none, session_id=0,
                 responses=tuple(topics))
