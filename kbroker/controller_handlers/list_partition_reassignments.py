"""ListPartitionReassignments (key 46), v0, on the controller: the moves in progress.

Each partition being reassigned with its replicas (target and removing), adding and removing
replicas; a null topic list means every partition; finished or unknown partitions are left out.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from kbroker.controller_handlers.services import HasQuorumController
from kbroker.network.context import RequestContext
from kbroker.protocol.codec import NO_THROTTLE, build, response_module
from kbroker.protocol.errors import ErrorCode, KafkaError

if TYPE_CHECKING:  # annotations only: the codec imports an API's kio module when it is first used
    from kio.schema.list_partition_reassignments.v0.request import ListPartitionReassignmentsRequest
    from kio.schema.list_partition_reassignments.v0.response import ListPartitionReassignmentsResponse

API_KEY = 46
MIN_VERSION = 0
MAX_VERSION = 0


class Services(HasQuorumController, Protocol): ...


async def handle(ctx: RequestContext[Services],
                 request: ListPartitionReassignmentsRequest) -> ListPartitionReassignmentsResponse:
    services = ctx.services
    m = response_module(API_KEY, ctx.api_version)
    wanted = None
    if request.topics is not None:
        wanted = [(t.name, i) for t in request.topics for i in t.partition_indexes]
    try:
        ongoing = services.controller.ongoing_reassignments(wanted)
    except KafkaError as exc:
        return build(m.ListPartitionReassignmentsResponse, throttle_time=NO_THROTTLE, error_code=exc.code,
                     error_message=exc.message, topics=())
    by_topic: dict[str, list[object]] = {}
    for (name, index), reg in sorted(ongoing.items()):
        by_topic.setdefault(name, []).append(build(
            m.OngoingPartitionReassignment, partition_index=index, replicas=reg.replicas,
            adding_replicas=reg.adding, removing_replicas=reg.removing))
    return build(m.ListPartitionReassignmentsResponse, throttle_time=NO_THROTTLE, error_code=ErrorCode.none,
                 error_message=None, topics=tuple(build(m.OngoingTopicReassignment, name=name, partitions=tuple(parts))
                                                  for name, parts in by_topic.items()))
