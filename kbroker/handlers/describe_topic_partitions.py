"""DescribeTopicPartitions (key 75), v0.

Describes topics by name (an empty list: all topics), sorted by name, with each partition's
leader, leader epoch, replicas, ISR, eligible leader replicas and last known ELR (KIP-966) and
offline replicas, as the controller registered them (LEADER_NOT_AVAILABLE without a leader). Unknown topic:
UNKNOWN_TOPIC_OR_PARTITION with no partitions.
Paging: at most response_partition_limit partitions (capped at 2000, Kafka's
``max.request.partition.size.limit`` default) are returned; next_cursor names the topic and
partition to continue from, and is null once everything fitted. A request cursor skips the
topics before it and the partitions before its index. When a page ends exactly at a topic
boundary the cursor names the next topic's partition 0, as Kafka does.
With an authorizer a named topic needs DESCRIBE (else TOPIC_AUTHORIZATION_FAILED), all topics
lists those the caller may DESCRIBE, and authorized operations come from the ACLs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from kbroker.handlers.security import HasSecurity, authorized_operations, denied_names
from kbroker.handlers.services import HasCatalogue, HasCluster
from kbroker.network.context import RequestContext
from kbroker.protocol.acl import AclOperation, ResourceType
from kbroker.protocol.codec import NO_THROTTLE, ZERO_UUID, build, response_module
from kbroker.protocol.errors import ErrorCode
from kbroker.replication.quorum.partition_registration import NO_LEADER
from kbroker.replication.quorum.topic_rules import INTERNAL_TOPICS

from .metadata import AUTHORIZED_OPERATIONS_OMITTED, TOPIC_OPERATIONS

if TYPE_CHECKING:  # annotations only: the codec imports an API's kio module when it is first used
    from kio.schema.describe_topic_partitions.v0.request import DescribeTopicPartitionsRequest
    from kio.schema.describe_topic_partitions.v0.response import DescribeTopicPartitionsResponse

API_KEY = 75
MIN_VERSION = 0
MAX_VERSION = 0

MAX_PARTITION_LIMIT = 2000


class Services(HasCatalogue, HasCluster, HasSecurity, Protocol): ...


async def handle(ctx: RequestContext[Services],
                 request: DescribeTopicPartitionsRequest) -> DescribeTopicPartitionsResponse:
    m = response_module(API_KEY, ctx.api_version)
    catalogue = ctx.services.catalogue
    names = sorted({t.name for t in request.topics} if request.topics else catalogue.topics)
    hidden = denied_names(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, names)
    if hidden and not request.topics:  # all topics: those the caller may DESCRIBE
        names = [n for n in names if n not in hidden]
    cursor = request.cursor
    if cursor is not None:
        names = [n for n in names if n >= cursor.topic_name]
    remaining = max(1, min(request.response_partition_limit, MAX_PARTITION_LIMIT))
    topics = []
    next_cursor = None
    for name in names:
        if remaining == 0:
            next_cursor = build(m.Cursor, topic_name=name, partition_index=0)
            break
        info = catalogue.topics.get(name)
        if name in hidden:
            topics.append(build(
                m.DescribeTopicPartitionsResponseTopic, error_code=ErrorCode.topic_authorization_failed,
                name=name, topic_id=ZERO_UUID, is_internal=False, partitions=(),
                topic_authorized_operations=AUTHORIZED_OPERATIONS_OMITTED,
            ))
            continue
        if info is None:
            topics.append(build(
                m.DescribeTopicPartitionsResponseTopic,
                error_code=ErrorCode.unknown_topic_or_partition,
                name=name, topic_id=ZERO_UUID, is_internal=False, partitions=(),
                topic_authorized_operations=authorized_operations(ctx, ResourceType.TOPIC, name, TOPIC_OPERATIONS),
            ))
            continue
        first = 0
        if cursor is not None and name == cursor.topic_name:
            first = min(max(cursor.partition_index, 0), info.partitions)
        end = min(info.partitions, first + remaining)
        partitions = [_partition(ctx, m, name, index) for index in range(first, end)]
        remaining -= end - first
        topics.append(build(
            m.DescribeTopicPartitionsResponseTopic,
            error_code=ErrorCode.none,
            name=name, topic_id=info.topic_id, is_internal=name in INTERNAL_TOPICS,
            partitions=tuple(p for p in partitions if p is not None),
            topic_authorized_operations=authorized_operations(ctx, ResourceType.TOPIC, name, TOPIC_OPERATIONS),
        ))
        if end < info.partitions:
            next_cursor = build(m.Cursor, topic_name=name, partition_index=end)
            break
    return build(
        m.DescribeTopicPartitionsResponse,
        throttle_time=NO_THROTTLE, topics=tuple(topics), next_cursor=next_cursor,
    )


def _partition(ctx: RequestContext[Services], m: object, topic: str, index: int) -> object | None:
    reg = ctx.services.catalogue.partition_registration(topic, index)
    if reg is None:
        return None
    live = {b[0] for b in ctx.services.cluster.live_brokers()}
    return build(
        m.DescribeTopicPartitionsResponsePartition,
        error_code=ErrorCode.none if reg.leader != NO_LEADER else ErrorCode.leader_not_available,
        partition_index=index,
        leader_id=reg.leader,
        leader_epoch=reg.leader_epoch,
        replica_nodes=reg.replicas,
        isr_nodes=reg.isr,
        eligible_leader_replicas=reg.elr,
        last_known_elr=reg.last_known_elr,
        offline_replicas=tuple(r for r in reg.replicas if r not in live),
    )
