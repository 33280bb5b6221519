"""AllocateProducerIds (key 67), v0: a broker takes the next block of producer ids.

Blocks of 1000 ids come from a counter in the metadata log (ProducerIdsRecord), so no two
brokers ever hand out the same producer id and ids are never reused after a restart.
"""

from __future__ import annotations

import time

from kbroker.network.context import RequestContext
from kbroker.protocol.codec import NO_THROTTLE, build, response_module
from kbroker.protocol.errors import ErrorCode, KafkaError

API_KEY = 67
MIN_VERSION = 0
MAX_VERSION = 0


async def handle(ctx: RequestContext, request: object) -> object:
    node = ctx.broker
    m = response_module(API_KEY, ctx.api_version)
    try:
        start, length = node.controller.allocate_producer_ids(
            request.broker_id, request.broker_epoch, int(time.time() * 1000))
        await node.committed()
    except KafkaError as exc:
        return build(m.AllocateProducerIdsResponse, throttle_time=NO_THROTTLE, error_code=exc.code,
                     producer_id_start=-1, producer_id_len=0)
    return build(m.AllocateProducerIdsResponse, throttle_time=NO_THROTTLE, error_code=ErrorCode.none,
                 producer_id_start=start, producer_id_len=length)
