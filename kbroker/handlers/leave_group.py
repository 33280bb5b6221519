"""LeaveGroup (key 13), v0-5.

v0-2 name one member id; v3+ a batch of members (member id and/or group.instance.id, KIP-345),
answered one error per member: UNKNOWN_MEMBER_ID, or FENCED_INSTANCE_ID when the instance id
now belongs to another member id. A departure from a Stable or CompletingRebalance group starts
a rebalance; an unknown group is a top-level UNKNOWN_MEMBER_ID.
With an authorizer the group needs READ (else GROUP_AUTHORIZATION_FAILED), as in Kafka.
"""

from __future__ import annotations

from typing import Protocol

from kbroker.handlers.security import HasSecurity, allowed
from kbroker.handlers.services import HasClassicGroups
from kbroker.network.context import RequestContext
from kbroker.protocol.acl import AclOperation, ResourceType
from kbroker.protocol.codec import NO_THROTTLE, build, response_module
from kbroker.protocol.errors import ErrorCode

API_KEY = 13
MIN_VERSION = 0
MAX_VERSION = 5


class Services(HasClassicGroups, HasSecurity, Protocol): ...


async def handle(ctx: RequestContext[Services], request: object) -> object:
    m = response_module(API_KEY, ctx.api_version)
    coordinator = ctx.services.classic_groups
    if not allowed(ctx, AclOperation.READ, ResourceType.GROUP, request.group_id):
        return build(m.LeaveGroupResponse, throttle_time=NO_THROTTLE, error_code=ErrorCode.group_authorization_failed,
                     members=())
    if not hasattr(request, "members"):
        error, errors = coordinator.leave(request.group_id, [(request.member_id, None)])
        return build(m.LeaveGroupResponse, throttle_time=NO_THROTTLE, error_code=error or errors[0])
    leaving = [(member.member_id, member.group_instance_id) for member in request.members]
    error, errors = coordinator.leave(request.group_id, leaving)
    members = tuple(
        build(m.MemberResponse, member_id=member_id, group_instance_id=instance, error_code=member_error)
        for (member_id, instance), member_error in zip(leaving, errors, strict=False))
    return build(m.LeaveGroupResponse, throttle_time=NO_THROTTLE, error_code=error, members=members)
