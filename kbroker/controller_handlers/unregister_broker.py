"""UnregisterBroker (key 64), v0, on the controller: ``kafka-cluster unregister --id N``.

Sent by ``kafka-cluster --bootstrap-controller`` or forwarded by a broker. An id with no
registration is BROKER_ID_NOT_REGISTERED ("Broker ID N is not currently registered", Kafka's
words); otherwise the registration is removed (UnregisterBrokerRecord) once the broker is out
of every ISR, leadership and ELR, and the answer waits until that is committed. Kafka accepts
a live broker as well; so does kbroker. Deviation: a live kbroker broker then finds its epoch
stale at its next heartbeat and registers again, where Kafka's keeps running unregistered.
"""

from __future__ import annotations

from typing import Protocol

from kbroker.controller_handlers.services import HasClock, HasQuorumController
from kbroker.network.context import RequestContext
from kbroker.protocol.codec import NO_THROTTLE, build, response_module
from kbroker.protocol.errors import ErrorCode, KafkaError

API_KEY = 64
MIN_VERSION = 0
MAX_VERSION = 0


class Services(HasQuorumController, HasClock, Protocol): ...


async def handle(ctx: RequestContext[Services], request: object) -> object:
    services = ctx.services
    m = response_module(API_KEY, ctx.api_version)
    error, message = ErrorCode.none, None
    try:
        services.controller.unregister_broker(request.broker_id, services.clock.wall_ms())
        await services.committed()
    except KafkaError as exc:
        error, message = exc.code, exc.message
    return build(m.UnregisterBrokerResponse, throttle_time=NO_THROTTLE, error_code=error, error_message=message)
