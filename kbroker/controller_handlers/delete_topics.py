"""DeleteTopics (key 20), v1–6, on the controller: brokers forward their clients' deletions."""

from __future__ import annotations

from typing import Protocol

from kbroker.controller_handlers.services import HasClock, HasQuorumController
from kbroker.network.context import RequestContext
from kbroker.protocol.codec import NO_THROTTLE, build, response_module
from kbroker.protocol.errors import ErrorCode, KafkaError

API_KEY = 20
MIN_VERSION = 1
MAX_VERSION = 6


class Services(HasQuorumController, HasClock, Protocol): ...


async def handle(ctx: RequestContext[Services], request: object) -> object:
    services = ctx.services
    m = response_module(API_KEY, ctx.api_version)
    names = [t.name for t in request.topics] if ctx.api_version >= 6 else list(request.topic_names)
    results = []
    for name in names:
        error, message, topic_id = ErrorCode.none, None, None
        try:
            topic_id = services.controller.delete_topic(name or "", services.clock.wall_ms()).topic_id
            await services.committed()
        except KafkaError as exc:
            error, message = exc.code, exc.message
        results.append(build(m.DeletableTopicResult, name=name, topic_id=topic_id, error_code=error,
                             error_message=message))
    return build(m.DeleteTopicsResponse, throttle_time=NO_THROTTLE, responses=tuple(results))
