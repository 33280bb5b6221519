"""AlterUserScramCredentials (key 51), v0, on the controller: ``kafka-configs --alter
--entity-type users --add-config 'SCRAM-SHA-256=[iterations=8192,password=...]'`` (or
``--delete-config``), forwarded by a broker.

ScramControlManager checks each user's change against the image with Kafka's errors; the
accepted ones are committed together and the answer waits until they are. A controller that
is not active answers every user NOT_CONTROLLER.
"""

from __future__ import annotations

from typing import Protocol

from kbroker.controller_handlers.services import HasClock, HasQuorumController
from kbroker.network.context import RequestContext
from kbroker.protocol.codec import NO_THROTTLE, build, response_module
from kbroker.protocol.errors import KafkaError
from kbroker.replication.quorum.scram_control_manager import (
    AlterResult,
    ScramControlManager,
    ScramDeletion,
    ScramUpsertion,
)

API_KEY = 51
MIN_VERSION = 0
MAX_VERSION = 0


class Services(HasQuorumController, HasClock, Protocol): ...


async def handle(ctx: RequestContext[Services], request: object) -> object:
    services = ctx.services
    m = response_module(API_KEY, ctx.api_version)
    deletions = [ScramDeletion(d.name, d.mechanism) for d in request.deletions]
    upsertions = [ScramUpsertion(u.name, u.mechanism, u.iterations, bytes(u.salt), bytes(u.salted_password))
                  for u in request.upsertions]
    try:
        results = ScramControlManager(services.controller).alter(deletions, upsertions, services.clock.wall_ms())
        await services.committed()
    except KafkaError as exc:
        users = dict.fromkeys([d.name for d in deletions] + [u.name for u in upsertions])
        results = [AlterResult(user, exc.code, exc.message) for user in users]
    return build(m.AlterUserScramCredentialsResponse, throttle_time=NO_THROTTLE, results=tuple(
        build(m.AlterUserScramCredentialsResult, user=r.user, error_code=r.error, error_message=r.message)
        for r in results))
