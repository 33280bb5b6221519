"""AlterClientQuotas (key 49), v0–1, on the controller: quota changes brokers forward.

The rules are Kafka's ClientQuotaControlManager's (replication/quorum/client_quota_control_manager.py);
the records of the entries that passed are committed (unless ``validate_only``) before the
answer, so a DescribeClientQuotas the client sends next sees them once its broker has replayed
them.
"""

from __future__ import annotations

from typing import Protocol

from kbroker.controller_handlers.services import HasClock, HasQuorumController
from kbroker.network.context import RequestContext
from kbroker.protocol.codec import NO_THROTTLE, build, response_module
from kbroker.protocol.errors import ErrorCode, KafkaError
from kbroker.replication.quorum.client_quota_control_manager import QuotaAlteration, alter_client_quotas

API_KEY = 49
MIN_VERSION = 0
MAX_VERSION = 1


class Services(HasQuorumController, HasClock, Protocol): ...


async def handle(ctx: RequestContext[Services], request: object) -> object:
    services = ctx.services
    m = response_module(API_KEY, ctx.api_version)
    alterations = [
        QuotaAlteration(tuple((e.entity_type, e.entity_name) for e in entry.entity),
                        [(op.key, None if op.remove else float(op.value)) for op in entry.ops])
        for entry in request.entries
    ]
    controller = services.controller
    try:
        if not controller.active:
            raise KafkaError(ErrorCode.not_controller)
        results, records = alter_client_quotas(controller.image.client_quotas, alterations)
        if records and not request.validate_only:
            controller.replay_and_commit(records, services.clock.wall_ms())
            await services.committed()
    except KafkaError as exc:
        # Nothing was decided (or its commit is unknown): every entry gets the error.
        failed = exc
        results = [(tuple((e.entity_type, e.entity_name) for e in entry.entity), failed) for entry in request.entries]
    return build(m.AlterClientQuotasResponse, throttle_time=NO_THROTTLE, entries=tuple(
        build(m.EntryData,
              error_code=error.code if error else ErrorCode.none,
              error_message=error.message if error else None,
              entity=tuple(build(m.EntityData, entity_type=kind, entity_name=name) for kind, name in entity))
        for entity, error in results))
