"""IncrementalAlterConfigs (key 44), v0–1, on the controller: forwarded config changes.

Brokers send the final SET (0) and DELETE (1) operations for a topic (resource type 2) or for
the cluster-wide broker default (type 4, name ""); values were validated by the broker.
"""

from __future__ import annotations

from typing import Protocol

from kbroker.controller_handlers.services import HasClock, HasQuorumController
from kbroker.network.context import RequestContext
from kbroker.protocol.codec import NO_THROTTLE, build, response_module
from kbroker.protocol.errors import ErrorCode, KafkaError

API_KEY = 44
MIN_VERSION = 0
MAX_VERSION = 1
SET, DELETE = 0, 1


class Services(HasQuorumController, HasClock, Protocol): ...


async def handle(ctx: RequestContext[Services], request: object) -> object:
    services = ctx.services
    m = response_module(API_KEY, ctx.api_version)
    results = []
    for resource in request.resources:
        error, message = ErrorCode.none, None
        try:
            values: dict[str, str | None] = {}
            for entry in resource.configs:
                if entry.config_operation not in (SET, DELETE):
                    raise KafkaError(ErrorCode.invalid_request, "only SET and DELETE are forwarded")
                values[entry.name] = entry.value if entry.config_operation == SET else None
            if not request.validate_only:
                services.controller.set_configs(resource.resource_type, resource.resource_name, values,
                                            services.clock.wall_ms())
                await services.committed()
        except KafkaError as exc:
            error, message = exc.code, exc.message
        results.append(build(m.AlterConfigsResourceResponse, error_code=error, error_message=message,
                             resource_type=resource.resource_type, resource_name=resource.resource_name))
    return build(m.IncrementalAlterConfigsResponse, throttle_time=NO_THROTTLE, responses=tuple(results))
