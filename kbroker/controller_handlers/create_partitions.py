"""CreatePartitions (key 37), v0–3, on the controller: brokers forward their clients' requests.

More than 10,000 new partitions in one request: POLICY_VIOLATION for every topic (Kafka's
"excessively large batch"), nothing changed."""

from __future__ import annotations

from typing import Protocol

from kbroker.controller_handlers.services import HasClock, HasQuorumController
from kbroker.network.context import RequestContext
from kbroker.protocol.codec import NO_THROTTLE, build, response_module
from kbroker.protocol.errors import ErrorCode, KafkaError
from kbroker.replication.quorum.topic_rules import check_partitions_added

API_KEY = 37
MIN_VERSION = 0
MAX_VERSION = 3


class Services(HasQuorumController, HasClock, Protocol): ...


async def handle(ctx: RequestContext[Services], request: object) -> object:
    services = ctx.services
    m = response_module(API_KEY, ctx.api_version)
    refused: KafkaError | None = None
    try:
        check_partitions_added([(t.name, t.count) for t in request.topics],
                               {name: len(t.partitions) for name, t in services.controller.image.topics.items()})
    except KafkaError as exc:
        refused = exc
    results = []
    for topic in request.topics:
        error, message = ErrorCode.none, None
        try:
            if refused is not None:
                raise refused
            assignments = [list(a.broker_ids) for a in topic.assignments or ()]
            services.controller.create_partitions(topic.name, topic.count, assignments, request.validate_only,
                                              services.clock.wall_ms())
            await services.committed()
        except KafkaError as exc:
            error, message = exc.code, exc.message
        results.append(build(m.CreatePartitionsTopicResult, name=topic.name, error_code=error,
                             error_message=message))
    return build(m.CreatePartitionsResponse, throttle_time=NO_THROTTLE, results=tuple(results))
