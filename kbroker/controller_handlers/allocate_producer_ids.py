"""AllocateProducerIds (key 67), v0: a broker takes the next block of producer ids.

Blocks of 1000 ids come from a counter in the metadata log (ProducerIdsRecord), so no two
brokers ever hand out the same producer id and ids are never reused after a restart.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from kbroker.controller_handlers.services import HasClock, HasQuorumController
from kbroker.network.context import RequestContext
from kbroker.protocol.codec import NO_THROTTLE, build, response_module
from kbroker.protocol.errors import ErrorCode, KafkaError

if TYPE_CHECKING:  # annotations only: the codec imports an API's kio module when it is first used
    from kio.schema.allocate_producer_ids.v0.request import AllocateProducerIdsRequest
    from kio.schema.allocate_producer_ids.v0.response import AllocateProducerIdsResponse

API_KEY = 67
MIN_VERSION = 0
MAX_VERSION = 0


class Services(HasQuorumController, HasClock, Protocol): ...


async def handle(ctx: RequestContext[Services], request: AllocateProducerIdsRequest) -> AllocateProducerIdsResponse:
    services = ctx.services
    m = response_module(API_KEY, ctx.api_version)
    try:
        start, length = services.controller.allocate_producer_ids(
            request.broker_id, request.broker_epoch, services.clock.wall_ms())
        await services.committed()
    except KafkaError as exc:
        return build(m.AllocateProducerIdsResponse, throttle_time=NO_THROTTLE, error_code=exc.code,
                     producer_id_start=-1, producer_id_len=0)
    return build(m.AllocateProducerIdsResponse, throttle_time=NO_THROTTLE, error_code=ErrorCode.none,
                 producer_id_start=start, producer_id_len=length)
