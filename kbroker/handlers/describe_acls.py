"""DescribeAcls (key 29), v1–3: ``kafka-acls --list``, ``Admin.describeAcls``.

Without an authorizer Kafka answers SECURITY_DISABLED with "No Authorizer is configured on the
broker" and no resources, and so does kbroker. With one (``SecurityFeatures.authorizer``) a caller
without DESCRIBE on the cluster gets CLUSTER_AUTHORIZATION_FAILED; otherwise the ACLs the filter
matches in this broker's metadata image, grouped by resource pattern.
"""

from __future__ import annotations

from typing import Protocol

from kbroker.handlers.security import HasSecurity, cluster_allowed
from kbroker.network.context import RequestContext
from kbroker.protocol.acl import AclBinding, AclBindingFilter, AclOperation
from kbroker.protocol.codec import NO_THROTTLE, build, response_module
from kbroker.protocol.errors import ErrorCode

API_KEY = 29
MIN_VERSION = 1
MAX_VERSION = 3
NO_AUTHORIZER = "No Authorizer is configured on the broker"


class Services(HasSecurity, Protocol): ...


async def handle(ctx: RequestContext[Services], request: object) -> object:
    m = response_module(API_KEY, ctx.api_version)
    authorizer = ctx.services.security.authorizer
    if authorizer is None:
        return build(m.DescribeAclsResponse, throttle_time=NO_THROTTLE, error_code=ErrorCode.security_disabled,
                     error_message=NO_AUTHORIZER, resources=())
    if not cluster_allowed(ctx, AclOperation.DESCRIBE):
        return build(m.DescribeAclsResponse, throttle_time=NO_THROTTLE,
                     error_code=ErrorCode.cluster_authorization_failed, error_message=None, resources=())
    matching = AclBindingFilter(request.resource_type_filter, request.resource_name_filter,
                                request.pattern_type_filter, request.principal_filter, request.host_filter,
                                request.operation, request.permission_type)
    by_resource: dict[tuple[int, str, int], list[AclBinding]] = {}
    for acl in authorizer.acls(matching):
        by_resource.setdefault((acl.resource_type, acl.resource_name, acl.pattern_type), []).append(acl)
    resources = tuple(
        build(m.DescribeAclsResource, resource_type=rtype, resource_name=name, pattern_type=pattern,
              acls=tuple(build(m.AclDescription, principal=a.principal, host=a.host, operation=a.operation,
                               permission_type=a.permission_type) for a in acls))
        for (rtype, name, pattern), acls in by_resource.items()
    )
    return build(m.DescribeAclsResponse, throttle_time=NO_THROTTLE, error_code=ErrorCode.none, error_message=None,
                 resources=resources)
