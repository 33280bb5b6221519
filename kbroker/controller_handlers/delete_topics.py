"""DeleteTopics (key 20), v1–6, on the controller: brokers forward their clients' deletions."""

from __future__ import annotations

import time

from kbroker.network.context import RequestContext
from kbroker.protocol.codec import NO_THROTTLE, build, response_module
from kbroker.protocol.errors import ErrorCode, KafkaError

API_KEY = 20
MIN_VERSION = 1
MAX_VERSION = 6


async def handle(ctx: RequestContext, request: object) -> object:
    node = ctx.broker
    m = response_module(API_KEY, ctx.api_version)
    names = [t.name for t in request.topics] if ctx.api_version >= 6 else list(request.topic_names)
    results = []
    for name in names:
        error, message, topic_id = ErrorCode.none, None, None
        try:
            topic_id = node.controller.delete_topic(name or "", int(time.time() * 1000)).topic_id
            await node.committed()
        except KafkaError as exc:
            error, message = exc.code, exc.message
        results.append(build(m.DeletableTopicResult, name=name, topic_id=topic_id, error_code=error,
                             error_message=message))
    return build(m.DeleteTopicsResponse, throttle_time=NO_THROTTLE, responses=tuple(results))
