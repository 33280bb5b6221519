"""DescribeClientQuotas (key 48), v0–1: ``kafka-configs --describe --entity-type users/clients/ips``.

Answered from this broker's replayed metadata, with Kafka's filter (ClientQuotasImage.describe):
each component names an entity type and matches it EXACT (that name), DEFAULT (the type's
default entity) or SPECIFIED (any entity having that type); every component must hold, and
``strict`` also excludes entities with types the filter does not name. A filter that repeats a
type, names an unknown match type or mixes ip with user/client-id is INVALID_REQUEST (an
unknown entity type UNSUPPORTED_VERSION) with Kafka's message and no entries. With an
authorizer the caller needs DESCRIBE_CONFIGS on the cluster, else CLUSTER_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

from kbroker.handlers.security import CLUSTER_DENIED, HasSecurity, cluster_allowed
from kbroker.handlers.services import HasClientQuotas
from kbroker.network.context import RequestContext
from kbroker.protocol.acl import AclOperation
from kbroker.protocol.codec import NO_THROTTLE, build, response_module
from kbroker.protocol.errors import ErrorCode, KafkaError
from kbroker.replication.quorum.client_quota_control_manager import CLIENT_ID, IP, USER, QuotaEntity

API_KEY = 48
MIN_VERSION = 0
MAX_VERSION = 1
MATCH_EXACT, MATCH_DEFAULT, MATCH_SPECIFIED = 0, 1, 2


class Services(HasClientQuotas, HasSecurity, Protocol): ...


async def handle(ctx: RequestContext[Services], request: object) -> object:
    m = response_module(API_KEY, ctx.api_version)
    if not cluster_allowed(ctx, AclOperation.DESCRIBE_CONFIGS):
        return build(m.DescribeClientQuotasResponse, throttle_time=NO_THROTTLE,
                     error_code=ErrorCode.cluster_authorization_failed, error_message=CLUSTER_DENIED, entries=None)
    try:
        exact, specified = _filter(request.components)
    except KafkaError as exc:
        return build(m.DescribeClientQuotasResponse, throttle_time=NO_THROTTLE, error_code=exc.code,
                     error_message=exc.message, entries=None)
    configs = ctx.services.client_quotas.configs()
    entries = tuple(
        build(m.EntryData,
              entity=tuple(build(m.EntityData, entity_type=kind, entity_name=name) for kind, name in entity),
              values=tuple(build(m.ValueData, key=key, value=value) for key, value in sorted(values.items())))
        for entity, values in configs.items() if _matches(entity, exact, specified, request.strict)
    )
    # Kafka's answer carries an empty (not null) message when there is no error.
    return build(m.DescribeClientQuotasResponse, throttle_time=NO_THROTTLE, error_code=ErrorCode.none,
                 error_message="", entries=entries)


def _filter(components: object) -> tuple[dict[str, str | None], set[str]]:
    """(type -> name to match exactly, None for the default entity), types that must be present."""
    exact: dict[str, str | None] = {}
    specified: set[str] = set()
    for c in components:
        kind = c.entity_type
        if not kind:
            raise KafkaError(ErrorCode.invalid_request, "Invalid empty entity type.")
        if kind in exact or kind in specified:
            raise KafkaError(ErrorCode.invalid_request,
                             f"Entity type {kind} cannot appear more than once in the filter.")
        if kind not in (IP, USER, CLIENT_ID):
            raise KafkaError(ErrorCode.unsupported_version, f"Unsupported entity type {kind}")
        if c.match_type == MATCH_EXACT:
            if c.match is None:
                raise KafkaError(ErrorCode.invalid_request,
                                 "Request specified MATCH_TYPE_EXACT, but set match string to null.")
            exact[kind] = c.match
        elif c.match_type == MATCH_DEFAULT:
            if c.match is not None:
                raise KafkaError(ErrorCode.invalid_request,
                                 "Request specified MATCH_TYPE_DEFAULT, but also specified a match string.")
            exact[kind] = None
        elif c.match_type == MATCH_SPECIFIED:
            if c.match is not None:
                raise KafkaError(ErrorCode.invalid_request,
                                 "Request specified MATCH_TYPE_SPECIFIED, but also specified a match string.")
            specified.add(kind)
        else:
            raise KafkaError(ErrorCode.invalid_request, f"Unknown match type {c.match_type}")
    named = exact.keys() | specified
    if IP in named and (USER in named or CLIENT_ID in named):
        raise KafkaError(ErrorCode.invalid_request, "Invalid entity filter component combination. IP filter "
                                                    "component should not be used with user or clientId filter "
                                                    "component.")
    return exact, specified


def _matches(entity: QuotaEntity, exact: Mapping[str, str | None], specified: set[str], strict: bool) -> bool:
    names = dict(entity)
    if strict and len(names) != len(exact) + len(specified):
        return False
    return (all(kind in names and names[kind] == name for kind, name in exact.items())
            and all(kind in names for kind in specified))
