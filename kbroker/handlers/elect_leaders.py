"""ElectLeaders (key 43), v0–2: ``kafka-leader-election`` and AdminClient.electLeaders.

In a cluster the request goes to the active controller unchanged and its answer comes back
(kbroker/controller_handlers/elect_leaders.py has the rules). A single node leads every
partition already: each one named (or every one, for a null list) is ELECTION_NOT_NEEDED, and
an unknown one UNKNOWN_TOPIC_OR_PARTITION, as Kafka answers on one broker.
"""

from __future__ import annotations

from kbroker.context import RequestContext
from kbroker.protocol.codec import NO_THROTTLE, build, response_module
from kbroker.protocol.errors import ErrorCode

API_KEY = 43
MIN_VERSION = 0
MAX_VERSION = 2


async def handle(ctx: RequestContext, request: object) -> object:
    broker = ctx.broker
    m = response_module(API_KEY, ctx.api_version)
    if broker.lifecycle is not None:
        answer = await broker.lifecycle.forward(API_KEY, ctx.api_version, request)
        timed_out = ErrorCode.request_timed_out
        return answer or build(m.ElectLeadersResponse, throttle_time=NO_THROTTLE, error_code=timed_out,
                               replica_election_results=())
    controller = broker.controller
    if request.topic_partitions is None:
        wanted = [(name, i) for name, info in controller.topics.items() for i in range(info.partitions)]
    else:
        wanted = [(t.topic, p) for t in request.topic_partitions for p in t.partitions]
    by_topic: dict[str, list[object]] = {}
    for topic, index in wanted:
        info = controller.topics.get(topic)
        error = ErrorCode.election_not_needed
        if info is None or not 0 <= index < info.partitions:
            error = ErrorCode.unknown_topic_or_partition
        by_topic.setdefault(topic, []).append(
            build(m.PartitionResult, partition_id=index, error_code=error, error_message=None))
    return build(
        m.ElectLeadersResponse, throttle_time=NO_THROTTLE, error_code=ErrorCode.none,
        replica_election_results=tuple(
            build(m.ReplicaElectionResult, topic=topic, partition_result=tuple(parts))
            for topic, parts in by_topic.items()
        ),
    )
