"""ListGroups (key 16), v0-5.

Every group the coordinators hold, with its protocol type; v4+ its state and a state filter,
v5+ its type ("classic", or "consumer" for KIP-848 groups, whose protocol type is "consumer"
and states Empty/Assigning/Reconciling/Stable) and a type filter. Filters compare without regard
to case, as Kafka's. Dead groups are not listed.
With an authorizer: every group for a caller with DESCRIBE on the cluster, else the groups it may
DESCRIBE, as Kafka filters them.
"""

from __future__ import annotations

from typing import Protocol

from kbroker.groups.classic_group import GroupState
from kbroker.handlers.security import HasSecurity, cluster_allowed, denied_names
from kbroker.handlers.services import HasClassicGroups, HasConsumerGroups
from kbroker.network.context import RequestContext
from kbroker.protocol.acl import AclOperation, ResourceType
from kbroker.protocol.codec import NO_THROTTLE, build, response_module
from kbroker.protocol.errors import ErrorCode

API_KEY = 16
MIN_VERSION = 0
MAX_VERSION = 5
GROUP_TYPE = "classic"
CONSUMER_GROUP_TYPE = "consumer"


class Services(HasClassicGroups, HasConsumerGroups, HasSecurity, Protocol): ...


async def handle(ctx: RequestContext[Services], request: object) -> object:
    m = response_module(API_KEY, ctx.api_version)
    states = {s.lower() for s in getattr(request, "states_filter", ())}
    types = {t.lower() for t in getattr(request, "types_filter", ())}
    groups = []
    if not types or GROUP_TYPE in types:
        for group in ctx.services.classic_groups.groups.values():
            if group.state is GroupState.DEAD or (states and group.state.value.lower() not in states):
                continue
            groups.append(build(m.ListedGroup, group_id=group.group_id, protocol_type=group.protocol_type or "",
                                group_state=group.state.value, group_type=GROUP_TYPE))
    if not types or CONSUMER_GROUP_TYPE in types:  # KIP-848 groups (consumer_coordinator.py)
        for cgroup in ctx.services.consumer_groups.groups.values():
            state = cgroup.state.value
            if cgroup.dead or (states and state.lower() not in states):
                continue
            groups.append(build(m.ListedGroup, group_id=cgroup.group_id, protocol_type="consumer",
                                group_state=state, group_type=CONSUMER_GROUP_TYPE))
    if not cluster_allowed(ctx, AclOperation.DESCRIBE):  # else only the groups the caller may DESCRIBE
        hidden = denied_names(ctx, AclOperation.DESCRIBE, ResourceType.GROUP, (g.group_id for g in groups))
        groups = [g for g in groups if g.group_id not in hidden]
    return build(m.ListGroupsResponse, throttle_time=NO_THROTTLE, error_code=ErrorCode.none, groups=tuple(groups))
