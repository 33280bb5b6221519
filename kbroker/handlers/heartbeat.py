"""Heartbeat (key 12), v0-4.

Keeps a classic member's session alive. REBALANCE_IN_PROGRESS while the group prepares a
rebalance (the member must rejoin), ILLEGAL_GENERATION for another generation,
UNKNOWN_MEMBER_ID for a member (or group) the coordinator does not know, FENCED_INSTANCE_ID
(v3+) for a static member replaced by a newer one. Heartbeats during CompletingRebalance are
accepted, as Kafka does.
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

API_KEY = 12
MIN_VERSION = 0
MAX_VERSION = 4


class Services(HasClassicGroups, HasSecurity, Protocol): ...


async def handle(ctx: RequestContext[Services], request: object) -> object:
    m = response_module(API_KEY, ctx.api_version)
    if not allowed(ctx, AclOperation.READ, ResourceType.GROUP, request.group_id):
        return build(m.HeartbeatResponse, throttle_time=NO_THROTTLE, error_code=ErrorCode.group_authorization_failed)
    error = ctx.services.classic_groups.heartbeat(
        request.group_id, request.generation_id, request.member_id, getattr(request, "group_instance_id", None))
    return build(m.HeartbeatResponse, throttle_time=NO_THROTTLE, error_code=error)
