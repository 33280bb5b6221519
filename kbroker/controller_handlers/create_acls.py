"""CreateAcls (key 30), v1–3, on the controller: brokers forward their clients' ACL creations here.

The AclControlManager checks each ACL (INVALID_REQUEST with Kafka's message for one it cannot
store) and commits the valid ones as AccessControlEntryRecords; the answer waits for the commit,
so every broker's authorizer has them once it has replayed that far.
A request on the controller listener is authorized first (``refused``): its sender needs ALTER
on the cluster, as Kafka's controller checks a client's. A broker forwarding its client's request
(kbroker forwards without Kafka's envelope) is checked the same way, as the broker's own
principal, which in a secured cluster is a super user as Kafka requires of brokers. One answered
in process comes from this node's broker, which checked its client.
"""

from __future__ import annotations

from typing import Protocol

from kbroker.controller_handlers.services import HasClock, HasQuorumController
from kbroker.handlers.security import HasSecurity, cluster_allowed
from kbroker.network.context import RequestContext
from kbroker.protocol.acl import AclBinding, AclOperation
from kbroker.protocol.codec import NO_THROTTLE, build, response_module
from kbroker.protocol.errors import ErrorCode, KafkaError
from kbroker.replication.quorum.acl_control_manager import AclControlManager

API_KEY = 30
MIN_VERSION = 1
MAX_VERSION = 3


class Services(HasQuorumController, HasClock, HasSecurity, Protocol): ...


def refused(ctx: RequestContext[HasSecurity]) -> bool:
    """Whether the sender may not change ACLs here (see the module docstring)."""
    return bool(ctx.listener) and not cluster_allowed(ctx, AclOperation.ALTER)


async def handle(ctx: RequestContext[Services], request: object) -> object:
    m = response_module(API_KEY, ctx.api_version)
    if refused(ctx):
        return build(m.CreateAclsResponse, throttle_time=NO_THROTTLE, results=tuple(
            build(m.AclCreationResult, error_code=ErrorCode.cluster_authorization_failed, error_message=None)
            for _ in request.creations))
    specs = [AclBinding(c.resource_type, c.resource_name, c.resource_pattern_type, c.principal, c.host, c.operation,
                     c.permission_type) for c in request.creations]
    try:
        outcomes = AclControlManager(ctx.services.controller).create(specs, ctx.services.clock.wall_ms())
        await ctx.services.committed()
    except KafkaError as exc:
        outcomes = [exc] * len(specs)
    return build(m.CreateAclsResponse, throttle_time=NO_THROTTLE, results=tuple(
        build(m.AclCreationResult, error_code=ErrorCode.none if e is None else e.code,
              error_message=None if e is None else e.message)
        for e in outcomes))
