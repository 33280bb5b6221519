"""SyncGroup (key 14), v0-5.

The leader's assignment reaches every member: followers are parked until the leader syncs,
then the generation is stored (GroupMetadataValue in ``__consumer_offsets``) and the group is
Stable. A member syncing a Stable generation gets its assignment at once. Errors as Kafka:
UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID (v3+ static members), ILLEGAL_GENERATION,
REBALANCE_IN_PROGRESS, and v5+ INCONSISTENT_GROUP_PROTOCOL when the protocol type or name
differs from the group's.
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

API_KEY = 14
MIN_VERSION = 0
MAX_VERSION = 5


class Services(HasClassicGroups, HasSecurity, Protocol): ...


async def handle(ctx: RequestContext[Services], request: object) -> object:
    m = response_module(API_KEY, ctx.api_version)
    if not allowed(ctx, AclOperation.READ, ResourceType.GROUP, request.group_id):
        return build(m.SyncGroupResponse, throttle_time=NO_THROTTLE, error_code=ErrorCode.group_authorization_failed,
                     protocol_type=None, protocol_name=None, assignment=b"")
    result = await ctx.services.classic_groups.sync(
        request.group_id, request.generation_id, request.member_id, getattr(request, "group_instance_id", None),
        getattr(request, "protocol_type", None), getattr(request, "protocol_name", None),
        {a.member_id: a.assignment for a in request.assignments},
    )
    return build(m.SyncGroupResponse, throttle_time=NO_THROTTLE, error_code=result.error,
                 protocol_type=result.protocol_type, protocol_name=result.protocol_name,
                 assignment=result.assignment)
