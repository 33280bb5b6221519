"""AlterPartitionReassignments (key 45), v0–1: ``kafka-reassign-partitions --execute``.

In a cluster the request goes to the active controller unchanged and its answer comes back
(rules in kbroker/controller_handlers/alter_partition_reassignments.py). On a single node the
only valid target is this node itself, which is where every partition already is: NONE, with
nothing in progress; a cancel is NO_REASSIGNMENT_IN_PROGRESS; other targets are
INVALID_REPLICA_ASSIGNMENT, as Kafka answers on one broker.
"""

from __future__ import annotations

from kbroker.context import RequestContext
from kbroker.protocol.codec import NO_THROTTLE, build, response_module
from kbroker.protocol.errors import ErrorCode, KafkaError

API_KEY = 45
MIN_VERSION = 0
MAX_VERSION = 1


async def handle(ctx: RequestContext, request: object) -> object:
    broker = ctx.broker
    m = response_module(API_KEY, ctx.api_version)
    if broker.lifecycle is not None:
        answer = await broker.lifecycle.forward(API_KEY, ctx.api_version, request)
        timed_out = ErrorCode.request_timed_out
        return answer or build(m.AlterPartitionReassignmentsResponse, throttle_time=NO_THROTTLE, error_code=timed_out,
                               error_message=None, responses=())
    topics = []
    for t in request.topics:
        partitions = []
        info = broker.controller.topics.get(t.name)
        for p in t.partitions:
            error, message = ErrorCode.none, None
            try:
                if info is None or not 0 <= p.partition_index < info.partitions:
                    raise KafkaError(ErrorCode.unknown_topic_or_partition)
                if p.replicas is None:
                    raise KafkaError(ErrorCode.no_reassignment_in_progress)
                broker.controller.check_replica_assignment([p.replicas])
            except KafkaError as exc:
                error, message = exc.code, exc.message
            partitions.append(build(m.ReassignablePartitionResponse, partition_index=p.partition_index,
                                    error_code=error, error_message=message))
        topics.append(build(m.ReassignableTopicResponse, name=t.name, partitions=tuple(partitions)))
    return build(m.AlterPartitionReassignmentsResponse, throttle_time=NO_THROTTLE, error_code=ErrorCode.none,
                 error_message=None, responses=tuple(topics))
