"""JoinGroup (key 11), v0-9 (Kafka 4.3's range).

Classic group membership through the GroupCoordinator: the request is parked until the
rebalance completes (every known member rejoined, or the rebalance timeout), then each member
learns the generation, the protocol chosen across members, the leader, and the leader alone
gets every member's metadata. v4+ without a group.instance.id: a first join (empty member id)
is answered MEMBER_ID_REQUIRED with the id to come back with (KIP-394). v5+ static membership
(KIP-345): a known group.instance.id takes over its member's place, the old member id gets
FENCED_INSTANCE_ID, and a Stable group with unchanged metadata does not rebalance (the leader is
told skip_assignment, v9). Session timeout outside group.min/max.session.timeout.ms:
INVALID_SESSION_TIMEOUT; no protocol in common or another protocol type:
INCONSISTENT_GROUP_PROTOCOL; group.max.size: GROUP_MAX_SIZE_REACHED. v0 has no rebalance
timeout: the session timeout stands in, as in Kafka. A JoinGroup to a consumer group (a classic
member of it, after an online upgrade) is answered at once by kbroker/groups/classic_members.py.
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

API_KEY = 11
MIN_VERSION = 0
MAX_VERSION = 9
FIRST_MEMBER_ID_REQUIRED = 4
FIRST_NULLABLE_PROTOCOL = 7


class Services(HasClassicGroups, HasSecurity, Protocol): ...


def millis(value: object) -> int:
    """kio carries timeouts as timedelta; the coordinator works in ms."""
    return int(value.total_seconds() * 1000) if hasattr(value, "total_seconds") else int(value)


async def handle(ctx: RequestContext[Services], request: object) -> object:
    m = response_module(API_KEY, ctx.api_version)
    session_ms = millis(request.session_timeout)
    rebalance_ms = millis(getattr(request, "rebalance_timeout", request.session_timeout))
    if not allowed(ctx, AclOperation.READ, ResourceType.GROUP, request.group_id):
        return build(m.JoinGroupResponse, throttle_time=NO_THROTTLE, error_code=ErrorCode.group_authorization_failed,
                     generation_id=-1, protocol_type=None,
                     protocol_name=None if ctx.api_version >= FIRST_NULLABLE_PROTOCOL else "", leader="",
                     skip_assignment=False, member_id=request.member_id, members=())
    result = await ctx.services.classic_groups.join(
        request.group_id, request.member_id, getattr(request, "group_instance_id", None), request.protocol_type,
        [(p.name, p.metadata) for p in request.protocols], session_ms, rebalance_ms, ctx.header.client_id or "",
        "/" + ctx.client_host, ctx.api_version >= FIRST_MEMBER_ID_REQUIRED,
    )
    nullable = ctx.api_version >= FIRST_NULLABLE_PROTOCOL
    members = tuple(
        build(m.JoinGroupResponseMember, member_id=member_id, group_instance_id=instance, metadata=metadata)
        for member_id, instance, metadata in result.members)
    return build(
        m.JoinGroupResponse, throttle_time=NO_THROTTLE, error_code=result.error, generation_id=result.generation_id,
        protocol_type=result.protocol_type if result.error == 0 else None,
        protocol_name=result.protocol_name if nullable else (result.protocol_name or ""),
        leader=result.leader, skip_assignment=result.skip_assignment, member_id=result.member_id, members=members,
    )
