"""OffsetForLeaderEpoch (key 23), v2-4.

For each partition and requested leader epoch: the largest epoch at or below it that this
log knows, and the offset where that epoch ended (the start of the next epoch, or the log
end offset for the current one). Consumers use it to detect truncation after a leader change
(KIP-320), followers to find where their log diverges (KIP-101/279). As in Kafka: an epoch
older than every known one answers itself with the first known epoch's start offset (the
history before it was deleted); a newer one (or -1) answers -1 / -1, error NONE.
current_leader_epoch (v3+ clients set it) is checked as Fetch checks it
(FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH). Unknown topic or partition:
UNKNOWN_TOPIC_OR_PARTITION with -1 / -1 (NOT_LEADER_OR_FOLLOWER if the cluster has it elsewhere).
Only the leader answers, followers (replica_id >= 0, v3+) and consumers alike; a follower
replica answers NOT_LEADER_OR_FOLLOWER.
With an authorizer a follower needs CLUSTER_ACTION (else CLUSTER_AUTHORIZATION_FAILED), a client
DESCRIBE on each topic (else TOPIC_AUTHORIZATION_FAILED), as Kafka.
"""

from __future__ import annotations

from typing import Protocol

from kbroker.handlers.security import HasSecurity, cluster_allowed, denied_names
from kbroker.handlers.services import HasReplicas
from kbroker.network.context import RequestContext
from kbroker.protocol.acl import AclOperation, ResourceType
from kbroker.protocol.codec import NO_THROTTLE, build, response_module
from kbroker.protocol.errors import ErrorCode, KafkaError

API_KEY = 23
MIN_VERSION = 2
MAX_VERSION = 4


class Services(HasReplicas, HasSecurity, Protocol): ...


async def handle(ctx: RequestContext[Services], request: object) -> object:
    m = response_module(API_KEY, ctx.api_version)
    replica_manager = ctx.services.replicas
    if getattr(request, "replica_id", -1) >= 0:  # a follower: CLUSTER_ACTION covers every partition
        everything_denied = not cluster_allowed(ctx, AclOperation.CLUSTER_ACTION)
        denied: frozenset[str] = frozenset()
    else:
        everything_denied = False
        denied = denied_names(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, (t.topic for t in request.topics))
    topics = []
    for topic in request.topics:
        partitions = []
        for p in topic.partitions:
            epoch, end_offset = -1, -1
            try:
                if everything_denied:
                    raise KafkaError(ErrorCode.cluster_authorization_failed)
                if denied and topic.topic in denied:
                    raise KafkaError(ErrorCode.topic_authorization_failed)
                partition = replica_manager.get_partition(topic.topic, p.partition)
                error = partition.leader_epoch_error(p.current_leader_epoch)
                if error == ErrorCode.none and not partition.is_leader:
                    error = ErrorCode.not_leader_or_follower
                if error == ErrorCode.none:
                    log_end = partition.log_end_offset
                    if p.leader_epoch == partition.leader_epoch:
                        # Kafka's leader records its epoch in the cache when elected; ours
                        # does at the first append, so the current epoch is answered here.
                        epoch, end_offset = p.leader_epoch, log_end
                    else:
                        epoch, end_offset = partition.log.leader_epoch_cache.end_offset_for(
                            p.leader_epoch, log_end
                        )
                    end_offset = min(end_offset, log_end)
            except KafkaError as exc:
                error = exc.code
            partitions.append(build(
                m.EpochEndOffset,
                error_code=error, partition=p.partition, leader_epoch=epoch, end_offset=end_offset,
            ))
        topics.append(build(
            m.OffsetForLeaderTopicResult, topic=topic.topic, partitions=tuple(partitions)
        ))
    return build(m.OffsetForLeaderEpochResponse, throttle_time=NO_THROTTLE, topics=tuple(topics))
