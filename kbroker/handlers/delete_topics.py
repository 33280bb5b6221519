"""DeleteTopics (key 20), v1-6.

Deletes topics by name, or (v6) by topic id (the zero id means "use the name"). The
catalogue change is persisted first, then the partitions and their logs are removed, so a
crash in between leaves orphaned logs that are deleted at the next start.
Errors per topic: unknown name UNKNOWN_TOPIC_OR_PARTITION, unknown id UNKNOWN_TOPIC_ID,
both name and id given or the same topic twice INVALID_REQUEST. With
``delete.topic.enable=false`` every topic gets TOPIC_DELETION_DISABLED (INVALID_REQUEST
before v3, which lacks that code), as in Kafka. v6 answers carry each topic's name and id.
With an authorizer (Kafka's controller rules) a topic needs DELETE, and an unknown name is
UNKNOWN_TOPIC_OR_PARTITION only to a caller that may DESCRIBE it: else both are
TOPIC_AUTHORIZATION_FAILED.
With a ``controller_mutation_rate`` quota for the caller (KIP-599) each topic deleted takes its
partitions from the quota; from v5 a topic asked for while the quota is used up is refused
with THROTTLING_QUOTA_EXCEEDED (older versions are served and told to wait), and the response
carries the throttle time (kbroker/quotas/client_quotas.py).
Deviation: the request timeout is unused; deletion is synchronous and done on return.
"""

from __future__ import annotations

import uuid
from typing import Protocol

from kbroker.handlers.security import HasSecurity, allowed
from kbroker.handlers.services import HasCatalogue, HasClientQuotas, HasSettings
from kbroker.network.context import RequestContext
from kbroker.protocol.acl import AclOperation, ResourceType
from kbroker.protocol.codec import ZERO_UUID, build, response_module
from kbroker.protocol.errors import ErrorCode, KafkaError
from kbroker.quotas.client_quotas import MutationQuota

API_KEY = 20
MIN_VERSION = 1
MAX_VERSION = 6
STRICT_QUOTA_SINCE = 5
FIRST_WITH_DELETION_DISABLED = 3
NOT_AUTHORIZED = "Topic authorization failed."


class Services(HasCatalogue, HasSettings, HasSecurity, HasClientQuotas, Protocol): ...


async def handle(ctx: RequestContext[Services], request: object) -> object:
    m = response_module(API_KEY, ctx.api_version)
    if hasattr(request, "topics"):
        wanted = [(t.name, t.topic_id or ZERO_UUID) for t in request.topics]
    else:
        wanted = [(name, ZERO_UUID) for name in request.topic_names]
    names = [name for name, topic_id in wanted if topic_id == ZERO_UUID]
    ids = [topic_id for _name, topic_id in wanted if topic_id != ZERO_UUID]
    enabled = ctx.services.settings.delete_topic_enable
    quota = ctx.services.client_quotas.mutation_quota(ctx, STRICT_QUOTA_SINCE)
    results = []
    for name, topic_id in wanted:
        try:
            if not enabled:
                code = (
                    ErrorCode.topic_deletion_disabled
                    if ctx.api_version >= FIRST_WITH_DELETION_DISABLED
                    else ErrorCode.invalid_request
                )
                raise KafkaError(code, "Topic deletion is disabled.")
            name, topic_id = await _delete(ctx, name, topic_id, names, ids, quota)
            error, message = ErrorCode.none, None
        except KafkaError as exc:
            error, message = exc.code, exc.message
        results.append(build(
            m.DeletableTopicResult,
            name=name,
            topic_id=topic_id,
            error_code=error,
            error_message=message,
        ))
    return build(m.DeleteTopicsResponse, throttle_time=quota.throttle_time(), responses=tuple(results))


async def _delete(
    ctx: RequestContext[Services], name: str | None, topic_id: uuid.UUID, names: list, ids: list,
    quota: MutationQuota,
) -> tuple[str | None, uuid.UUID]:
    """Delete one topic; returns its (name, id) for the answer."""
    catalogue = ctx.services.catalogue
    if topic_id != ZERO_UUID:
        if name is not None:
            raise KafkaError(
                ErrorCode.invalid_request, "You may not specify both topic name and topic id."
            )
        if ids.count(topic_id) > 1:
            raise KafkaError(ErrorCode.invalid_request, "Duplicate topic id.")
        info = catalogue.topics_by_id.get(topic_id)
        if info is None:
            raise KafkaError(ErrorCode.unknown_topic_id, "This server does not host this topic ID.")
        name = info.name
    else:
        if name is None:
            raise KafkaError(ErrorCode.invalid_request, "Neither topic name nor id was specified.")
        if names.count(name) > 1:
            raise KafkaError(ErrorCode.invalid_request, "Duplicate topic name.")
        info = catalogue.topics.get(name)
        if info is None and not allowed(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, name):
            raise KafkaError(ErrorCode.topic_authorization_failed, NOT_AUTHORIZED)
        if info is None:
            raise KafkaError(
                ErrorCode.unknown_topic_or_partition,
                "This server does not host this topic-partition.",
            )
    if not allowed(ctx, AclOperation.DELETE, ResourceType.TOPIC, info.name):
        raise KafkaError(ErrorCode.topic_authorization_failed, NOT_AUTHORIZED)
    quota.check()
    await catalogue.delete_topic(info.name)
    quota.record(info.partitions)
    return name, info.topic_id
