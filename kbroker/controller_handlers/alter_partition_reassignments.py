"""AlterPartitionReassignments (key 45), v0–1, on the controller: start or cancel moves.

Per partition: NONE when the reassignment was started (or completed at once, when the target
replicas are already in sync), NO_REASSIGNMENT_IN_PROGRESS for a cancel with nothing to cancel,
INVALID_REPLICA_ASSIGNMENT for an empty list, a broker twice or an unregistered broker,
INVALID_REPLICATION_FACTOR when v1's allow_replication_factor_change is false and the count
changes (KIP-860), UNKNOWN_TOPIC_OR_PARTITION. Rules: replication/quorum/partition_reassignment.py.
"""

from __future__ import annotations

from typing import Protocol

from kbroker.controller_handlers.services import HasClock, HasQuorumController
from kbroker.network.context import RequestContext
from kbroker.protocol.codec import NO_THROTTLE, build, response_module
from kbroker.protocol.errors import ErrorCode, KafkaError

API_KEY = 45
MIN_VERSION = 0
MAX_VERSION = 1


class Services(HasQuorumController, HasClock, Protocol): ...


async def handle(ctx: RequestContext[Services], request: object) -> object:
    services = ctx.services
    m = response_module(API_KEY, ctx.api_version)
    wanted = [(t.name, p.partition_index, p.replicas) for t in request.topics for p in t.partitions]
    try:
        results = services.controller.alter_reassignments(
            wanted, getattr(request, "allow_replication_factor_change", True), services.clock.wall_ms())
        await services.committed()
    except KafkaError as exc:
        return build(m.AlterPartitionReassignmentsResponse, throttle_time=NO_THROTTLE, error_code=exc.code,
                     error_message=exc.message, responses=())
    return build(
        m.AlterPartitionReassignmentsResponse, throttle_time=NO_THROTTLE, error_code=ErrorCode.none,
        error_message=None, responses=tuple(
            build(m.ReassignableTopicResponse, name=t.name, partitions=tuple(
                build(m.ReassignablePartitionResponse, partition_index=p.partition_index,
                      error_code=results[(t.name, p.partition_index)][0],
                      error_message=results[(t.name, p.partition_index)][1])
                for p in t.partitions))
            for t in request.topics),
    )
