"""DeleteRecords (key 21), v0-2.

Moves each partition's log start offset (low watermark) up to ``offset`` (-1: the high
watermark); segments wholly below it are deleted, and consumers can no longer read before it.
An offset at or below the current low watermark changes nothing and returns it.
Errors per partition, low watermark -1: offset above the high watermark or negative
OFFSET_OUT_OF_RANGE; a topic whose cleanup.policy lacks ``delete`` POLICY_VIOLATION;
unknown topic or partition UNKNOWN_TOPIC_OR_PARTITION (NOT_LEADER_OR_FOLLOWER if the cluster has it
but not here); a disk error KAFKA_STORAGE_ERROR.
After any partition moved, the log start offsets are checkpointed before answering, so an
acknowledged deletion survives a crash.
Deviation: the request timeout is unused; with a single replica there is nobody to wait for.
With an authorizer each topic needs DELETE (else TOPIC_AUTHORIZATION_FAILED), as Kafka.
"""

from __future__ import annotations

import logging
from typing import Protocol

from kbroker.handlers.security import HasSecurity, denied_names
from kbroker.handlers.services import HasLogDirs, HasReplicas
from kbroker.network.context import RequestContext
from kbroker.network.rate_limited_log import RateLimitedLogger
from kbroker.protocol.acl import AclOperation, ResourceType
from kbroker.protocol.codec import NO_THROTTLE, build, response_module
from kbroker.protocol.errors import ErrorCode, KafkaError

API_KEY = 21
MIN_VERSION = 0
MAX_VERSION = 2

# Repeats per request and partition while a log dir fails.
log = RateLimitedLogger(logging.getLogger(__name__))


class Services(HasReplicas, HasLogDirs, HasSecurity, Protocol): ...


async def handle(ctx: RequestContext[Services], request: object) -> object:
    m = response_module(API_KEY, ctx.api_version)
    replica_manager = ctx.services.replicas
    moved = False
    denied = denied_names(ctx, AclOperation.DELETE, ResourceType.TOPIC, (t.name for t in request.topics))
    topics = []
    for topic in request.topics:
        partitions = []
        for p in topic.partitions:
            low_watermark, error = -1, ErrorCode.none
            try:
                if denied and topic.name in denied:
                    raise KafkaError(ErrorCode.topic_authorization_failed)
                partition = replica_manager.get_partition(topic.name, p.partition_index)
                if not partition.log.config.delete:
                    raise KafkaError(
                        ErrorCode.policy_violation,
                        f"Records of partition {topic.name}-{p.partition_index} can not be "
                        "deleted due to the configured policy",
                    )
                before = partition.log_start_offset
                low_watermark = partition.delete_records(p.offset)
                moved = moved or low_watermark != before
            except KafkaError as exc:
                error = exc.code
            except OSError as exc:
                log.error("delete records of %s-%d failed: %s", topic.name, p.partition_index, exc)
                error = ErrorCode.kafka_storage_error
            partitions.append(build(
                m.DeleteRecordsPartitionResult,
                partition_index=p.partition_index, low_watermark=low_watermark, error_code=error,
            ))
        topics.append(build(m.DeleteRecordsTopicResult, name=topic.name, partitions=tuple(partitions)))
    if moved:
        ctx.services.log_manager.checkpoint()
    return build(m.DeleteRecordsResponse, throttle_time=NO_THROTTLE, topics=tuple(topics))
