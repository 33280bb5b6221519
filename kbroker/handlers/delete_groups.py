"""DeleteGroups (key 42), v0-2.

Deletes groups without members: tombstones for their offsets and metadata in
``__consumer_offsets``. GROUP_ID_NOT_FOUND for an unknown group, NON_EMPTY_GROUP for a group
with members.
With an authorizer each group needs DELETE (else GROUP_AUTHORIZATION_FAILED).
"""

from __future__ import annotations

from typing import Protocol

from kbroker.coordinator_errors import coordinator_write_error
from kbroker.handlers.security import HasSecurity, allowed
from kbroker.handlers.services import HasClassicGroups
from kbroker.network.context import RequestContext
from kbroker.protocol.acl import AclOperation, ResourceType
from kbroker.protocol.codec import NO_THROTTLE, build, response_module
from kbroker.protocol.errors import ErrorCode, KafkaError

API_KEY = 42
MIN_VERSION = 0
MAX_VERSION = 2


class Services(HasClassicGroups, HasSecurity, Protocol): ...


async def handle(ctx: RequestContext[Services], request: object) -> object:
    m = response_module(API_KEY, ctx.api_version)
    results = []
    for group_id in request.groups_names:
        try:
            if not allowed(ctx, AclOperation.DELETE, ResourceType.GROUP, group_id):
                raise KafkaError(ErrorCode.group_authorization_failed)
            error = ctx.services.classic_groups.delete_group(group_id)
        except KafkaError as exc:
            error = exc.code
        except OSError as exc:
            error = coordinator_write_error(exc)  # the tombstones could not be written
        results.append(build(m.DeletableGroupResult, group_id=group_id, error_code=error))
    return build(m.DeleteGroupsResponse, throttle_time=NO_THROTTLE, results=tuple(results))
