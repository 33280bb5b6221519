"""ElectLeaders (key 43), v0–2, on the controller: preferred and unclean elections on request.

Brokers forward their clients' requests here unchanged. Per partition: NONE when the leader
moved, ELECTION_NOT_NEEDED when it is already where asked, PREFERRED_LEADER_NOT_AVAILABLE when
the preferred replica is down or out of sync, ELIGIBLE_LEADERS_NOT_AVAILABLE when no replica is
live for an unclean election, UNKNOWN_TOPIC_OR_PARTITION. A null partition list means all
partitions, and then, as Kafka's controller does, the partitions whose leader is already where
asked (ELECTION_NOT_NEEDED) are left out of the answer, so ``kafka-leader-election
--all-topic-partitions`` on a balanced cluster prints nothing.
"""

from __future__ import annotations

from typing import Protocol

from kbroker.controller_handlers.services import HasClock, HasQuorumController
from kbroker.network.context import RequestContext
from kbroker.protocol.codec import NO_THROTTLE, build, response_module
from kbroker.protocol.errors import ErrorCode, KafkaError

API_KEY = 43
MIN_VERSION = 0
MAX_VERSION = 2


class Services(HasQuorumController, HasClock, Protocol): ...


async def handle(ctx: RequestContext[Services], request: object) -> object:
    services = ctx.services
    m = response_module(API_KEY, ctx.api_version)
    election_type = getattr(request, "election_type", 0)
    wanted = None
    if request.topic_partitions is not None:
        wanted = [(t.topic, p) for t in request.topic_partitions for p in t.partitions]
    try:
        results = services.controller.elect_leaders(election_type, wanted, services.clock.wall_ms())
        await services.committed()
    except KafkaError as exc:
        return build(m.ElectLeadersResponse, throttle_time=NO_THROTTLE, error_code=exc.code,
                     replica_election_results=())
    by_topic: dict[str, list[object]] = {}
    for (topic, index), (error, message) in results.items():
        if wanted is None and error == ErrorCode.election_not_needed:
            continue
        by_topic.setdefault(topic, []).append(
            build(m.PartitionResult, partition_id=index, error_code=error, error_message=message))
    return build(
        m.ElectLeadersResponse, throttle_time=NO_THROTTLE, error_code=ErrorCode.none,
        replica_election_results=tuple(
            build(m.ReplicaElectionResult, topic=topic, partition_result=tuple(parts))
            for topic, parts in by_topic.items()
        ),
    )
