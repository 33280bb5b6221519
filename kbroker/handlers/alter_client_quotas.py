"""AlterClientQuotas (key 49), v0–1: ``kafka-configs --alter --entity-type users/clients/ips``.

Forwarded to the active controller unchanged, its answer returned (``FORWARD_TO_CONTROLLER``,
as Kafka's brokers forward it); the rules are in
replication/quorum/client_quota_control_manager.py. A controller that does not answer: an
answer with no entries, which the Java AdminClient reports as an error for each entity ("did not
contain a result") — the dispatcher's error answer does not see the request's entities.
With an authorizer the caller needs ALTER_CONFIGS on the cluster: checked before forwarding (Kafka's
controller checks it), every entity answered CLUSTER_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

from kbroker.handlers.security import CLUSTER_DENIED, HasSecurity, cluster_allowed
from kbroker.network.context import RequestContext
from kbroker.protocol.acl import AclOperation
from kbroker.protocol.codec import NO_THROTTLE, build, response_module
from kbroker.protocol.errors import ErrorCode

API_KEY = 49
MIN_VERSION = 0
MAX_VERSION = 1
FORWARD_TO_CONTROLLER = True


def answer_locally(ctx: RequestContext[HasSecurity], request: object) -> object | None:
    """Kafka's check: ALTER_CONFIGS on the cluster, else each entity is refused."""
    if cluster_allowed(ctx, AclOperation.ALTER_CONFIGS):
        return None
    m = response_module(API_KEY, ctx.api_version)
    entries = tuple(
        build(m.EntryData, error_code=ErrorCode.cluster_authorization_failed, error_message=CLUSTER_DENIED,
              entity=tuple(build(m.EntityData, entity_type=e.entity_type, entity_name=e.entity_name)
                           for e in entry.entity))
        for entry in request.entries)
    return build(m.AlterClientQuotasResponse, throttle_time=NO_THROTTLE, entries=entries)


def error_response(api_version: int, error: ErrorCode) -> object:
    m = response_module(API_KEY, api_version)
    return build(m.AlterClientQuotasResponse, throttle_time=NO_THROTTLE, entries=())
