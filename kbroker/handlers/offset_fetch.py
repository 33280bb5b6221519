"""OffsetFetch (key 9), v1-10 (Kafka 4.3's range; v0 was removed in Kafka 4).

Committed offsets from the OffsetStore: offset, v5+ leader epoch, metadata; -1 and "" for a
partition without one (and for an unknown group). v2+ a null topic list asks for every
committed partition of the group. v7+ require_stable: a partition with offsets pending in an
open transaction answers UNSTABLE_OFFSET_COMMIT (the client retries), as Kafka's. v8+ batches
groups, each with its own error; v10 names topics by id (UNKNOWN_TOPIC_ID for an unknown id).
v9+ member id / member epoch: checked for consumer (KIP-848) groups (UNKNOWN_MEMBER_ID,
STALE_MEMBER_EPOCH; none given: accepted, as from an admin client); not checked for classic
groups, as Kafka's ClassicGroup does not. An empty group id is fetched like any other, as Kafka
does (its INVALID_GROUP_ID is for a null id, which the schema cannot carry).
With an authorizer a group needs DESCRIBE (else GROUP_AUTHORIZATION_FAILED) and a named topic
DESCRIBE (else TOPIC_AUTHORIZATION_FAILED); an all-topics fetch leaves the others out, as Kafka.
"""

from __future__ import annotations

from typing import Protocol

from kbroker.handlers.security import HasSecurity, allowed, denied_names
from kbroker.handlers.services import HasCatalogue, HasClassicGroups, HasConsumerGroups, HasGroupOffsets
from kbroker.network.context import RequestContext
from kbroker.protocol.acl import AclOperation, ResourceType
from kbroker.protocol.codec import NO_THROTTLE, build, response_module
from kbroker.protocol.errors import ErrorCode, KafkaError

from .offset_commit import topic_names_by_id

API_KEY = 9
MIN_VERSION = 1
MAX_VERSION = 10
FIRST_BATCHED = 8


class Services(HasCatalogue, HasClassicGroups, HasConsumerGroups, HasGroupOffsets, HasSecurity, Protocol): ...


def _group_topics(ctx: RequestContext[Services], m: object, group_id: str, topics: object, require_stable: bool,
                  topic_cls: type, partition_cls: type) -> tuple[object, ...]:
    store = ctx.services.group_offsets
    committed = store.fetch(group_id)
    use_ids = ctx.api_version >= 10
    by_id = topic_names_by_id(ctx) if use_ids else {}
    if topics is None:
        wanted: dict[str, list[int]] = {}
        for topic, partition in sorted(committed):
            wanted.setdefault(topic, []).append(partition)
        requested = [(name, ctx.services.catalogue.topics[name].topic_id if use_ids else None, parts)
                     for name, parts in wanted.items() if not use_ids or name in ctx.services.catalogue.topics]
    else:
        requested = [(by_id.get(t.topic_id) if use_ids else t.name, getattr(t, "topic_id", None),
                      list(t.partition_indexes)) for t in topics]
    # Topics the caller may not DESCRIBE: left out of an all-topics answer, refused when named.
    denied = denied_names(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, (n for n, _t, _p in requested if n))
    if topics is None and denied:
        requested = [r for r in requested if r[0] not in denied]
    result = []
    for name, topic_id, partitions in requested:
        answers = []
        for index in partitions:
            offset, epoch, metadata, error = -1, -1, "", ErrorCode.none
            if name is None:
                error = ErrorCode.unknown_topic_id
            elif denied and name in denied:
                error = ErrorCode.topic_authorization_failed
            elif require_stable and store.has_pending(group_id, (name, index)):
                error = ErrorCode.unstable_offset_commit
            elif (name, index) in committed:
                o = committed[(name, index)]
                offset, epoch, metadata = o.offset, o.leader_epoch, o.metadata
            answers.append(build(partition_cls, partition_index=index, committed_offset=offset,
                                 committed_leader_epoch=epoch, metadata=metadata, error_code=error))
        result.append(build(topic_cls, name=name or "", topic_id=topic_id, partitions=tuple(answers)))
    return tuple(result)


async def handle(ctx: RequestContext[Services], request: object) -> object:
    m = response_module(API_KEY, ctx.api_version)
    require_stable = getattr(request, "require_stable", False)
    if ctx.api_version < FIRST_BATCHED:
        error = ErrorCode.group_authorization_failed if not allowed(
            ctx, AclOperation.DESCRIBE, ResourceType.GROUP, request.group_id) else (
            ctx.services.classic_groups.coordinator_error(request.group_id))
        topics = () if error else _group_topics(ctx, m, request.group_id, request.topics, require_stable,
                                                m.OffsetFetchResponseTopic, m.OffsetFetchResponsePartition)
        return build(m.OffsetFetchResponse, throttle_time=NO_THROTTLE, topics=topics, error_code=error)
    groups = []
    for group in request.groups:
        error = ErrorCode.group_authorization_failed if not allowed(
            ctx, AclOperation.DESCRIBE, ResourceType.GROUP, group.group_id) else (
            ctx.services.classic_groups.coordinator_error(group.group_id))
        if not error:
            try:  # v9+ members of a consumer (KIP-848) group fetch at their current member epoch
                ctx.services.consumer_groups.validate_fetch(
                    group.group_id, getattr(group, "member_id", None), getattr(group, "member_epoch", -1))
            except KafkaError as exc:
                error = exc.code
        topics = () if error else _group_topics(ctx, m, group.group_id, group.topics, require_stable,
                                                m.OffsetFetchResponseTopics, m.OffsetFetchResponsePartitions)
        groups.append(build(m.OffsetFetchResponseGroup, group_id=group.group_id, topics=topics, error_code=error))
    return build(m.OffsetFetchResponse, throttle_time=NO_THROTTLE, groups=tuple(groups))
