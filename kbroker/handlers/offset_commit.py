"""OffsetCommit (key 8), v2-10 (Kafka 4.3's range; v0-1 were removed in Kafka 4).

As Kafka's KafkaApis, partitions of topics that do not exist (v10 names topics by id:
UNKNOWN_TOPIC_ID) or beyond a topic's partition count get UNKNOWN_TOPIC_OR_PARTITION first; a
request left with no partition is answered without reaching the group coordinator. The rest go
through the GroupCoordinator's checks (``validate_commit``), whose error applies to all of them:
a commit at generation -1 to a group that does not exist creates a simple group and is accepted
whatever member id it carries (librdkafka's consumers with group.protocol=consumer that assign
their partitions send their own id); a generation for an unknown group: ILLEGAL_GENERATION
(GROUP_ID_NOT_FOUND v9+); for a known classic group UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID (v7+),
ILLEGAL_GENERATION, or REBALANCE_IN_PROGRESS while CompletingRebalance. A consumer (KIP-848)
group checks the member epoch instead (ConsumerGroupCoordinator.validate_commit):
UNKNOWN_MEMBER_ID, STALE_MEMBER_EPOCH, UNSUPPORTED_VERSION below v9; an older member epoch is
accepted when every partition has been the member's since that epoch. Then per partition
OFFSET_METADATA_TOO_LARGE past offset.metadata.max.bytes. An empty group id is a group id like
any other, as in Kafka (only a null one, which the schema cannot carry, is INVALID_GROUP_ID).
The retention time of v2-4 is ignored, as Kafka 4 does (offsets.retention.minutes applies).
With an authorizer the group needs READ (else GROUP_AUTHORIZATION_FAILED for every partition)
and each topic READ (else TOPIC_AUTHORIZATION_FAILED), as Kafka checks them.
"""

from __future__ import annotations

from typing import Protocol

from kbroker.coordinator_errors import coordinator_write_error
from kbroker.groups.offset_store import OffsetAndMetadata
from kbroker.handlers.security import HasSecurity, allowed, denied_names
from kbroker.handlers.services import HasCatalogue, HasClassicGroups, HasClock, HasGroupOffsets, HasSettings
from kbroker.network.context import RequestContext
from kbroker.protocol.acl import AclOperation, ResourceType
from kbroker.protocol.codec import NO_THROTTLE, build, response_module
from kbroker.protocol.errors import ErrorCode, KafkaError

API_KEY = 8
MIN_VERSION = 2
MAX_VERSION = 10
COMMIT_TIMEOUT_MS = 5000  # Kafka's offsets.commit.timeout.ms


class Services(HasCatalogue, HasClassicGroups, HasGroupOffsets, HasSettings, HasClock, HasSecurity, Protocol): ...


def topic_names_by_id(ctx: RequestContext[Services]) -> dict[object, str]:
    return {info.topic_id: name for name, info in ctx.services.catalogue.topics.items()}


async def handle(ctx: RequestContext[Services], request: object) -> object:
    m = response_module(API_KEY, ctx.api_version)
    services = ctx.services
    topics_known = services.catalogue.topics
    by_id = topic_names_by_id(ctx) if ctx.api_version >= 10 else {}
    errors: dict[tuple[int, int], ErrorCode] = {}
    known: list[tuple[int, int, str]] = []  # (topic index, partition index, topic name) of existing partitions
    # Kafka's checks come first: READ on the group (else every partition is refused), then READ
    # on each topic, before its existence is disclosed.
    group_allowed = allowed(ctx, AclOperation.READ, ResourceType.GROUP, request.group_id)
    names = [by_id.get(topic.topic_id) if ctx.api_version >= 10 else topic.name for topic in request.topics]
    denied = denied_names(ctx, AclOperation.READ, ResourceType.TOPIC, (n for n in names if n is not None))
    for ti, topic in enumerate(request.topics):
        name = names[ti]
        for pi, p in enumerate(topic.partitions):
            if not group_allowed:
                errors[ti, pi] = ErrorCode.group_authorization_failed
            elif name is None:
                errors[ti, pi] = ErrorCode.unknown_topic_id
            elif denied and name in denied:
                errors[ti, pi] = ErrorCode.topic_authorization_failed
            elif name not in topics_known or not 0 <= p.partition_index < topics_known[name].partitions:
                errors[ti, pi] = ErrorCode.unknown_topic_or_partition
            else:
                known.append((ti, pi, name))
    # As Kafka's KafkaApis: unknown partitions are answered first, and a request left with none
    # is answered without reaching the group coordinator (no group check, no simple group made).
    group_error = ErrorCode.none
    max_metadata = services.settings.offset_metadata_max_bytes
    if known:
        try:
            check = services.classic_groups.validate_commit(
                request.group_id, request.generation_id_or_member_epoch, request.member_id,
                getattr(request, "group_instance_id", None), ctx.api_version)
            # An older member epoch: every partition with acceptable metadata must have been the
            # member's since then, or the whole commit fails (as Kafka 4.3's per-partition check).
            for ti, pi, name in known if check is not None else ():
                p = request.topics[ti].partitions[pi]
                if len((p.committed_metadata or "").encode()) <= max_metadata:
                    check(topics_known[name].topic_id, p.partition_index)
        except KafkaError as exc:
            group_error = exc.code
    now_ms = services.clock.wall_ms()
    offsets: dict[tuple[str, int], OffsetAndMetadata] = {}
    for ti, pi, name in known:
        topic = request.topics[ti]
        p = topic.partitions[pi]
        metadata = p.committed_metadata or ""
        if group_error:
            errors[ti, pi] = group_error
        elif len(metadata.encode()) > max_metadata:
            errors[ti, pi] = ErrorCode.offset_metadata_too_large
        else:
            errors[ti, pi] = ErrorCode.none
            offsets[(name, p.partition_index)] = OffsetAndMetadata(
                p.committed_offset, getattr(p, "committed_leader_epoch", -1), metadata, now_ms,
                topics_known[name].topic_id)  # Kafka records the topic's id whatever the version
    if offsets:
        try:
            services.classic_groups.commit(request.group_id, offsets)
            # In a cluster the commit is acknowledged once the ISR has it (acks=all), as Kafka does.
            replicated = await services.group_offsets.wait_replicated(request.group_id, COMMIT_TIMEOUT_MS)
        except (OSError, KafkaError) as exc:
            replicated = coordinator_write_error(exc)  # nothing was acknowledged
        if replicated:
            for key, error in errors.items():
                if error == ErrorCode.none:
                    errors[key] = replicated
    topics = tuple(
        build(m.OffsetCommitResponseTopic, name=getattr(topic, "name", None), topic_id=getattr(topic, "topic_id", None),
              partitions=tuple(build(m.OffsetCommitResponsePartition, partition_index=p.partition_index,
                                     error_code=errors[ti, pi]) for pi, p in enumerate(topic.partitions)))
        for ti, topic in enumerate(request.topics))
    return build(m.OffsetCommitResponse, throttle_time=NO_THROTTLE, topics=topics)
