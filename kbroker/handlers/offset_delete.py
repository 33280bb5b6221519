"""OffsetDelete (key 47), v0.

Deletes a group's committed offsets (tombstones in ``__consumer_offsets``). GROUP_ID_NOT_FOUND
for an unknown group; for a group with members, NON_EMPTY_GROUP unless it uses the consumer
protocol type, and then GROUP_SUBSCRIBED_TO_TOPIC for partitions of topics its members
subscribe to (all topics, when the subscriptions cannot be read). An unknown topic:
UNKNOWN_TOPIC_OR_PARTITION.
With an authorizer the group needs DELETE (else GROUP_AUTHORIZATION_FAILED) and each topic READ
(else TOPIC_AUTHORIZATION_FAILED), as Kafka.
"""

from __future__ import annotations

from typing import Protocol

from kbroker.coordinator_errors import coordinator_write_error
from kbroker.handlers.security import HasSecurity, allowed, denied_names
from kbroker.handlers.services import HasCatalogue, HasClassicGroups, HasGroupOffsets
from kbroker.network.context import RequestContext
from kbroker.protocol.acl import AclOperation, ResourceType
from kbroker.protocol.codec import NO_THROTTLE, build, response_module
from kbroker.protocol.errors import ErrorCode, KafkaError

API_KEY = 47
MIN_VERSION = 0
MAX_VERSION = 0


class Services(HasCatalogue, HasClassicGroups, HasGroupOffsets, HasSecurity, Protocol): ...


async def handle(ctx: RequestContext[Services], request: object) -> object:
    m = response_module(API_KEY, ctx.api_version)
    services = ctx.services
    if not allowed(ctx, AclOperation.DELETE, ResourceType.GROUP, request.group_id):
        return build(m.OffsetDeleteResponse, error_code=ErrorCode.group_authorization_failed,
                     throttle_time=NO_THROTTLE, topics=())
    denied = denied_names(ctx, AclOperation.READ, ResourceType.TOPIC, (t.name for t in request.topics))
    try:
        _group, subscribed = services.classic_groups.validate_offset_delete(request.group_id)
    except KafkaError as exc:
        return build(m.OffsetDeleteResponse, error_code=exc.code, throttle_time=NO_THROTTLE, topics=())
    errors: dict[tuple[str, int], ErrorCode] = {}
    for topic in request.topics:
        for p in topic.partitions:
            tp = (topic.name, p.partition_index)
            if denied and topic.name in denied:
                errors[tp] = ErrorCode.topic_authorization_failed
            elif topic.name not in services.catalogue.topics:
                errors[tp] = ErrorCode.unknown_topic_or_partition
            elif subscribed is None or topic.name in subscribed:
                errors[tp] = ErrorCode.group_subscribed_to_topic
            else:
                errors[tp] = ErrorCode.none
    deletable = [tp for tp, error in errors.items() if error == ErrorCode.none]
    try:
        services.group_offsets.delete_offsets(request.group_id, deletable)
    except (OSError, KafkaError) as exc:
        for tp in deletable:
            errors[tp] = coordinator_write_error(exc)
    topics = tuple(
        build(m.OffsetDeleteResponseTopic, name=topic.name, partitions=tuple(
            build(m.OffsetDeleteResponsePartition, partition_index=p.partition_index,
                  error_code=errors[(topic.name, p.partition_index)])
            for p in topic.partitions))
        for topic in request.topics)
    return build(m.OffsetDeleteResponse, error_code=ErrorCode.none, throttle_time=NO_THROTTLE, topics=topics)
