"""AlterPartition (key 56), v2–3: a partition leader asks to shrink or expand its ISR.

Checked as Kafka's controller checks it: the sender's broker epoch (STALE_BROKER_EPOCH), that it
leads the partition (NOT_LEADER_OR_FOLLOWER), its leader epoch (FENCED_LEADER_EPOCH) and the
partition epoch the change was computed from (INVALID_UPDATE_VERSION); a replica added to the
ISR must be a live broker (INELIGIBLE_REPLICA). The answer carries the partition as committed.
v3 names ISR members with their broker epochs (KIP-903); kbroker checks the leader's epoch.
"""

from __future__ import annotations

from typing import Protocol

from kbroker.controller_handlers.services import HasClock, HasQuorumController
from kbroker.network.context import RequestContext
from kbroker.protocol.codec import NO_THROTTLE, build, response_module
from kbroker.protocol.errors import ErrorCode, KafkaError

API_KEY = 56
MIN_VERSION = 2
MAX_VERSION = 3


class Services(HasQuorumController, HasClock, Protocol): ...


async def handle(ctx: RequestContext[Services], request: object) -> object:
    services = ctx.services
    m = response_module(API_KEY, ctx.api_version)
    now_ms = services.clock.wall_ms()
    topics = []
    for topic in request.topics:
        partitions = []
        for p in topic.partitions:
            if ctx.api_version >= 3:
                new_isr = [s.broker_id for s in p.new_isr_with_epochs]
            else:
                new_isr = list(p.new_isr)
            try:
                reg = services.controller.alter_partition(
                    request.broker_id, request.broker_epoch, topic.topic_id, p.partition_index, p.leader_epoch,
                    p.partition_epoch, new_isr, now_ms,
                )
                await services.committed()  # the leader acts on the new ISR: it must be durable first
            except KafkaError as exc:
                partitions.append(build(m.PartitionData, partition_index=p.partition_index, error_code=exc.code,
                                        leader_id=-1, leader_epoch=-1, isr=(), leader_recovery_state=0,
                                        partition_epoch=-1))
                continue
            partitions.append(build(m.PartitionData, partition_index=p.partition_index, error_code=ErrorCode.none,
                                    leader_id=reg.leader, leader_epoch=reg.leader_epoch, isr=reg.isr,
                                    leader_recovery_state=0, partition_epoch=reg.partition_epoch))
        topics.append(build(m.TopicData, topic_id=topic.topic_id, partitions=tuple(partitions)))
    return build(m.AlterPartitionResponse, throttle_time=NO_THROTTLE, error_code=ErrorCode.none,
                 topics=tuple(topics))
