"""DeleteAcls (key 31), v1–3, on the controller: brokers forward their clients' ACL deletions here.

Each filter removes the stored ACLs it matches (RemoveAccessControlEntryRecords, committed before
the answer) and answers them, as Kafka's AclControlManager does. The sender is authorized as for
CreateAcls (controller_handlers/create_acls.py ``refused``).
"""

from __future__ import annotations

from typing import Protocol

from kbroker.controller_handlers.create_acls import refused
from kbroker.controller_handlers.services import HasClock, HasQuorumController
from kbroker.handlers.security import HasSecurity
from kbroker.network.context import RequestContext
from kbroker.protocol.acl import AclBindingFilter
from kbroker.protocol.codec import NO_THROTTLE, build, response_module
from kbroker.protocol.errors import ErrorCode, KafkaError
from kbroker.replication.quorum.acl_control_manager import AclControlManager

API_KEY = 31
MIN_VERSION = 1
MAX_VERSION = 3


class Services(HasQuorumController, HasClock, HasSecurity, Protocol): ...


async def handle(ctx: RequestContext[Services], request: object) -> object:
    m = response_module(API_KEY, ctx.api_version)
    filters = [AclBindingFilter(f.resource_type_filter, f.resource_name_filter, f.pattern_type_filter,
                                f.principal_filter, f.host_filter, f.operation, f.permission_type)
               for f in request.filters]
    try:
        if refused(ctx):
            raise KafkaError(ErrorCode.cluster_authorization_failed)
        matched = AclControlManager(ctx.services.controller).delete(filters, ctx.services.clock.wall_ms())
        await ctx.services.committed()
    except KafkaError as exc:
        return build(m.DeleteAclsResponse, throttle_time=NO_THROTTLE, filter_results=tuple(
            build(m.DeleteAclsFilterResult, error_code=exc.code, error_message=exc.message, matching_acls=())
            for _ in filters))
    return build(m.DeleteAclsResponse, throttle_time=NO_THROTTLE, filter_results=tuple(
        build(m.DeleteAclsFilterResult, error_code=ErrorCode.none, error_message=None, matching_acls=tuple(
            build(m.DeleteAclsMatchingAcl, error_code=ErrorCode.none, error_message=None,
                  resource_type=a.resource_type, resource_name=a.resource_name, pattern_type=a.pattern_type,
                  principal=a.principal, host=a.host, operation=a.operation, permission_type=a.permission_type)
            for a in found))
        for found in matched))
