"""DeleteAcls (key 31), v1–3: ``kafka-acls --remove``, ``Admin.deleteAcls``.

Without an authorizer (kbroker has none yet) Kafka answers every filter with SECURITY_DISABLED
"No Authorizer is configured." and no matching ACLs, and so does kbroker. With one plugged in
(``SecurityFeatures.authorizer``) each filter answers the ACLs it deleted.
"""

from __future__ import annotations

from typing import Protocol

from kbroker.handlers.security import AclBindingFilter, HasSecurity
from kbroker.network.context import RequestContext
from kbroker.protocol.codec import NO_THROTTLE, build, response_module
from kbroker.protocol.errors import ErrorCode, KafkaError

API_KEY = 31
MIN_VERSION = 1
MAX_VERSION = 3
NO_AUTHORIZER = "No Authorizer is configured."


class Services(HasSecurity, Protocol): ...


async def handle(ctx: RequestContext[Services], request: object) -> object:
    m = response_module(API_KEY, ctx.api_version)
    authorizer = ctx.services.security.authorizer
    if authorizer is None:
        outcomes: list = [KafkaError(ErrorCode.security_disabled, NO_AUTHORIZER) for _ in request.filters]
    else:
        outcomes = list(await authorizer.delete_acls([
            AclBindingFilter(f.resource_type_filter, f.resource_name_filter, f.pattern_type_filter,
                             f.principal_filter, f.host_filter, f.operation, f.permission_type)
            for f in request.filters]))
    results = []
    for outcome in outcomes:
        if isinstance(outcome, KafkaError):
            results.append(build(m.DeleteAclsFilterResult, error_code=outcome.code, error_message=outcome.message,
                                 matching_acls=()))
            continue
        results.append(build(m.DeleteAclsFilterResult, error_code=ErrorCode.none, error_message=None,
                             matching_acls=tuple(
                                 build(m.DeleteAclsMatchingAcl, error_code=ErrorCode.none, error_message=None,
                                       resource_type=a.resource_type, resource_name=a.resource_name,
                                       pattern_type=a.pattern_type, principal=a.principal, host=a.host,
                                       operation=a.operation, permission_type=a.permission_type)
                                 for a in outcome)))
    return build(m.DeleteAclsResponse, throttle_time=NO_THROTTLE, filter_results=tuple(results))
