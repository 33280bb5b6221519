"""CreateAcls (key 30), v1–3: ``kafka-acls --add``, ``Admin.createAcls``.

Without an authorizer (kbroker has none yet) Kafka answers every creation with SECURITY_DISABLED
"No Authorizer is configured.", and so does kbroker. With one plugged in
(``SecurityFeatures.authorizer``) each creation gets the authorizer's result.
"""

from __future__ import annotations

from typing import Protocol

from kbroker.handlers.security import AclBinding, HasSecurity
from kbroker.network.context import RequestContext
from kbroker.protocol.codec import NO_THROTTLE, build, response_module
from kbroker.protocol.errors import ErrorCode, KafkaError

API_KEY = 30
MIN_VERSION = 1
MAX_VERSION = 3
NO_AUTHORIZER = "No Authorizer is configured."


class Services(HasSecurity, Protocol): ...


async def handle(ctx: RequestContext[Services], request: object) -> object:
    m = response_module(API_KEY, ctx.api_version)
    authorizer = ctx.services.security.authorizer
    if authorizer is None:
        outcomes: list[KafkaError | None] = [KafkaError(ErrorCode.security_disabled, NO_AUTHORIZER)
                                             for _ in request.creations]
    else:
        outcomes = list(await authorizer.create_acls([
            AclBinding(c.resource_type, c.resource_name, c.resource_pattern_type, c.principal, c.host, c.operation,
                       c.permission_type)
            for c in request.creations]))
    return build(m.CreateAclsResponse, throttle_time=NO_THROTTLE, results=tuple(
        build(m.AclCreationResult, error_code=ErrorCode.none if e is None else e.code,
              error_message=None if e is None else e.message)
        for e in outcomes))
