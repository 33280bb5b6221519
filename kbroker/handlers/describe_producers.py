"""DescribeProducers (key 61), v0.

The active producers of each partition from its ProducerStateManager: producer id, epoch,
last sequence, last timestamp, coordinator epoch and the first offset of its open
transaction (-1 if none). An unknown partition gets UNKNOWN_TOPIC_OR_PARTITION, one the cluster
has but this broker holds no replica of NOT_LEADER_OR_FOLLOWER.
With an authorizer each topic needs READ (else TOPIC_AUTHORIZATION_FAILED), as Kafka.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from kbroker.handlers.security import TOPIC_DENIED, HasSecurity, denied_names
from kbroker.handlers.services import HasReplicas
from kbroker.network.context import RequestContext
from kbroker.protocol.acl import AclOperation, ResourceType
from kbroker.protocol.codec import NO_THROTTLE, build, response_module
from kbroker.protocol.errors import ErrorCode, KafkaError

if TYPE_CHECKING:  # annotations only: the codec imports an API's kio module when it is first used
    from kio.schema.describe_producers.v0.request import DescribeProducersRequest
    from kio.schema.describe_producers.v0.response import DescribeProducersResponse

API_KEY = 61
MIN_VERSION = 0
MAX_VERSION = 0


class Services(HasReplicas, HasSecurity, Protocol): ...


async def handle(ctx: RequestContext[Services], request: DescribeProducersRequest) -> DescribeProducersResponse:
    m = response_module(API_KEY, ctx.api_version)
    replica_manager = ctx.services.replicas
    denied = denied_names(ctx, AclOperation.READ, ResourceType.TOPIC, (t.name for t in request.topics))
    topics = []
    for topic in request.topics:
        partitions = []
        for index in topic.partition_indexes:
            try:
                if denied and topic.name in denied:
                    raise KafkaError(ErrorCode.topic_authorization_failed, TOPIC_DENIED)
                partition = replica_manager.get_partition(topic.name, index)
                partition.check_leader()
            except KafkaError as exc:
                partitions.append(build(m.PartitionResponse, partition_index=index, error_code=exc.code,
                                        error_message=exc.message, active_producers=()))
                continue
            producers = tuple(
                build(m.ProducerState, producer_id=e.producer_id, producer_epoch=e.producer_epoch,
                      last_sequence=e.last_seq, last_timestamp=e.last_timestamp,
                      coordinator_epoch=e.coordinator_epoch, current_txn_start_offset=e.current_txn_first_offset)
                for e in partition.log.producer_state.producers.values()
            )
            partitions.append(build(m.PartitionResponse, partition_index=index, error_code=ErrorCode.none,
                                    error_message=None, active_producers=producers))
        topics.append(build(m.TopicResponse, name=topic.name, partitions=tuple(partitions)))
    return build(m.DescribeProducersResponse, throttle_time=NO_THROTTLE, topics=tuple(topics))
