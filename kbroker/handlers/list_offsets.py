"""ListOffsets (key 2), v1-11.

For each partition, the offset a ``timestamp`` stands for:
  -2 earliest, -4 earliest-local: the log start offset (no tiered storage, so they agree);
  -1 latest: the high watermark, or the last stable offset under read_committed;
  -3 max timestamp (v7+): the record with the largest timestamp;
  -5 latest-tiered (v9+), -6 earliest-pending-upload (v11+): offset -1, as Kafka answers
     for a topic without remote storage;
  >= 0: the first record whose timestamp is at or after it. None (or only records past the
     high watermark / last stable offset): offset -1, timestamp -1, error NONE.
Another negative value, or a sentinel older than the request version: UNSUPPORTED_VERSION.
The answer carries the leader epoch of the batch holding the offset; latest carries the
current leader epoch. current_leader_epoch (v4+) is checked as Fetch checks it
(FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH). A replica id other than -1 (a follower or a
debugging tool) is answered from the log end offset, as Kafka does. A partition named twice
in one request: one INVALID_REQUEST answer for it. Unknown topic or partition:
UNKNOWN_TOPIC_OR_PARTITION; one the cluster has but this broker holds no replica of:
NOT_LEADER_OR_FOLLOWER.
Kafka 4 dropped v0 (multiple offsets per partition); so does kbroker.
Deviation: the v10+ timeout is unused: there is no remote storage to wait for.
"""

from __future__ import annotations

from typing import Protocol

from kbroker.handlers.security import HasSecurity, denied_names
from kbroker.handlers.services import HasReplicas
from kbroker.network.context import RequestContext
from kbroker.protocol.acl import AclOperation, ResourceType
from kbroker.protocol.codec import NO_THROTTLE, build, response_module
from kbroker.protocol.errors import ErrorCode, KafkaError
from kbroker.replication.partition import Partition
from kbroker.replication.replica_manager import READ_COMMITTED

API_KEY = 2
MIN_VERSION = 1
MAX_VERSION = 11

CONSUMER_REPLICA_ID = -1
LATEST = -1
EARLIEST = -2
MAX_TIMESTAMP = -3
EARLIEST_LOCAL = -4
LATEST_TIERED = -5
EARLIEST_PENDING_UPLOAD = -6
# The first request version that may carry each sentinel timestamp.
SENTINEL_MIN_VERSION = {
    LATEST: 1, EARLIEST: 1, MAX_TIMESTAMP: 7, EARLIEST_LOCAL: 8,
    LATEST_TIERED: 9, EARLIEST_PENDING_UPLOAD: 11,
}
UNKNOWN = (-1, -1, -1)  # timestamp, offset, leader epoch
DEBUGGING_REPLICA_ID = -2


class Services(HasReplicas, HasSecurity, Protocol): ...


async def handle(ctx: RequestContext[Services], request: object) -> object:
    version = ctx.api_version
    m = response_module(API_KEY, version)
    replica_manager = ctx.services.replicas
    is_consumer = request.replica_id == CONSUMER_REPLICA_ID
    read_committed = getattr(request, "isolation_level", 0) == READ_COMMITTED
    seen: dict[tuple[str, int], int] = {}
    for topic in request.topics:
        for p in topic.partitions:
            key = (topic.name, p.partition_index)
            seen[key] = seen.get(key, 0) + 1
    denied = denied_names(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, (t.name for t in request.topics))
    topics = []
    for topic in request.topics:
        partitions = []
        for p in topic.partitions:
            key = (topic.name, p.partition_index)
            if seen[key] == 0:
                continue  # a duplicate, already answered
            error = ErrorCode.none
            timestamp, offset, epoch = UNKNOWN
            if denied and topic.name in denied:
                error = ErrorCode.topic_authorization_failed
            elif seen[key] > 1:
                seen[key] = 0
                error = ErrorCode.invalid_request
            elif p.timestamp < 0 and version < SENTINEL_MIN_VERSION.get(p.timestamp, 1 << 15):
                error = ErrorCode.unsupported_version
            else:
                try:
                    partition = replica_manager.get_partition(topic.name, p.partition_index)
                    if request.replica_id != DEBUGGING_REPLICA_ID:
                        partition.check_leader()  # only the debugging replica id may ask a follower
                    error = partition.leader_epoch_error(getattr(p, "current_leader_epoch", -1))
                    if error == ErrorCode.none:
                        timestamp, offset, epoch = _lookup(
                            partition, p.timestamp, is_consumer, read_committed
                        )
                except KafkaError as exc:
                    error = exc.code
            partitions.append(build(
                m.ListOffsetsPartitionResponse,
                partition_index=p.partition_index,
                error_code=error,
                timestamp=timestamp,
                offset=offset,
                leader_epoch=epoch,
            ))
        topics.append(build(m.ListOffsetsTopicResponse, name=topic.name, partitions=tuple(partitions)))
    return build(m.ListOffsetsResponse, throttle_time=NO_THROTTLE, topics=tuple(topics))


def _lookup(
    partition: Partition, target: int, is_consumer: bool, read_committed: bool
) -> tuple[int, int, int]:
    """(timestamp, offset, leader epoch) for one partition, as Kafka's leader answers."""
    plog = partition.log
    if not is_consumer:
        last_fetchable = partition.log_end_offset
    elif read_committed:
        last_fetchable = partition.last_stable_offset
    else:
        last_fetchable = partition.high_watermark
    if target in (EARLIEST, EARLIEST_LOCAL):
        start = partition.log_start_offset
        return -1, start, _epoch_at(partition, start)
    if target == LATEST:
        return -1, last_fetchable, partition.leader_epoch
    if target in (LATEST_TIERED, EARLIEST_PENDING_UPLOAD):
        return UNKNOWN
    found = plog.max_timestamp_offset() if target == MAX_TIMESTAMP else plog.offset_for_timestamp(target)
    # Records not yet committed (past the high watermark) must stay invisible to consumers.
    if found is None or found[0] >= last_fetchable:
        return UNKNOWN
    offset, timestamp = found
    return timestamp, offset, _epoch_at(partition, offset)


def _epoch_at(partition: Partition, offset: int) -> int:
    # Kafka's leader records its epoch at the log end offset when elected; ours only at the
    # first append in that epoch, so the log end offset is answered with the current epoch.
    if offset >= partition.log_end_offset:
        return partition.leader_epoch
    return partition.log.leader_epoch_cache.epoch_for_offset(offset)
