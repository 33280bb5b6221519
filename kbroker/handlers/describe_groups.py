"""DescribeGroups (key 15), v0-6.

Each group's state, protocol type, and members (id, v4+ group.instance.id, client id, client
host); the chosen protocol and each member's metadata and assignment only when the group is
Stable, as Kafka's. An unknown group: v6+ GROUP_ID_NOT_FOUND with a message, earlier versions
state "Dead" and no error; a consumer (KIP-848) group likewise, v6+ with Kafka's message
"Group X is not a classic group.". v3+ authorized operations when asked: READ, DELETE and
DESCRIBE (no authorizer, so everything a group has).
With an authorizer each group needs DESCRIBE (else GROUP_AUTHORIZATION_FAILED), and the
authorized operations are those its ACLs allow.
"""

from __future__ import annotations

from typing import Protocol

from kbroker.groups.classic_group import GroupState
from kbroker.handlers.security import HasSecurity, allowed, authorized_operations
from kbroker.handlers.services import HasClassicGroups, HasConsumerGroups
from kbroker.network.context import RequestContext
from kbroker.protocol.acl import AclOperation, ResourceType
from kbroker.protocol.codec import NO_THROTTLE, build, response_module
from kbroker.protocol.errors import ErrorCode

API_KEY = 15
MIN_VERSION = 0
MAX_VERSION = 6
FIRST_NOT_FOUND = 6
_OMITTED = -(2**31)
_GROUP_OPERATIONS = (1 << 3) | (1 << 6) | (1 << 8)  # READ, DELETE, DESCRIBE


class Services(HasClassicGroups, HasConsumerGroups, HasSecurity, Protocol): ...


def _not_found_message(ctx: RequestContext[Services], group_id: str) -> str:
    # A KIP-848 consumer group is not described here (ConsumerGroupDescribe is); Kafka's words.
    if ctx.services.consumer_groups.group(group_id) is not None:
        return f"Group {group_id} is not a classic group."
    return f"Group {group_id} not found."


async def handle(ctx: RequestContext[Services], request: object) -> object:
    m = response_module(API_KEY, ctx.api_version)
    include_operations = getattr(request, "include_authorized_operations", False)
    described = []
    for group_id in request.groups:
        if not allowed(ctx, AclOperation.DESCRIBE, ResourceType.GROUP, group_id):
            described.append(build(
                m.DescribedGroup, error_code=ErrorCode.group_authorization_failed, error_message=None,
                group_id=group_id, group_state="", protocol_type="", protocol_data="", members=(),
                authorized_operations=_OMITTED))
            continue
        operations = authorized_operations(ctx, ResourceType.GROUP, group_id, _GROUP_OPERATIONS) if (
            include_operations) else _OMITTED
        not_here = ctx.services.classic_groups.coordinator_error(group_id)
        if not_here:
            described.append(build(
                m.DescribedGroup, error_code=not_here, error_message=None, group_id=group_id, group_state="",
                protocol_type="", protocol_data="", members=(), authorized_operations=operations))
            continue
        group = ctx.services.classic_groups.groups.get(group_id)
        if group is None or group.state is GroupState.DEAD:
            missing = ctx.api_version >= FIRST_NOT_FOUND
            described.append(build(
                m.DescribedGroup, error_code=ErrorCode.group_id_not_found if missing else ErrorCode.none,
                error_message=(_not_found_message(ctx, group_id) if missing else None), group_id=group_id,
                group_state=GroupState.DEAD.value, protocol_type="", protocol_data="", members=(),
                authorized_operations=operations))
            continue
        stable = group.state is GroupState.STABLE
        members = tuple(
            build(m.DescribedGroupMember, member_id=member.member_id, group_instance_id=member.group_instance_id,
                  client_id=member.client_id, client_host=member.client_host,
                  member_metadata=member.metadata(group.protocol_name) if stable else b"",
                  member_assignment=member.assignment if stable else b"")
            for member in group.members.values())
        described.append(build(
            m.DescribedGroup, error_code=ErrorCode.none, error_message=None, group_id=group_id,
            group_state=group.state.value, protocol_type=group.protocol_type or "",
            protocol_data=(group.protocol_name or "") if stable else "", members=members,
            authorized_operations=operations))
    return build(m.DescribeGroupsResponse, throttle_time=NO_THROTTLE, groups=tuple(described))
