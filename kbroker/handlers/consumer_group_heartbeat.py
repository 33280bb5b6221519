"""ConsumerGroupHeartbeat (key 68), v0-1 (Kafka 4.3's range): the KIP-848 consumer protocol.

Joins (member epoch 0), heartbeats, and leaves (-1; -2 for a static member leaving for now)
a consumer group, through the ConsumerGroupCoordinator (kbroker/groups/consumer_coordinator.py):
group epoch, server-side assignor (uniform or range, ``group.consumer.assignors``, a member's
ServerAssignor), member epochs, revocation before assignment, regex subscriptions. v1 members
generate their own member id (empty: INVALID_REQUEST); v0 lets the coordinator pick one.
The assignment is answered when it changed, or on a full request (rebalance timeout,
subscription and owned partitions all set), as Kafka does; heartbeat interval is
``group.consumer.heartbeat.interval.ms``, the session ``group.consumer.session.timeout.ms``.

Errors as Kafka's, with its messages: INVALID_REQUEST, INVALID_REGULAR_EXPRESSION (v1+, which
brought the regex field),
UNSUPPORTED_ASSIGNOR, UNKNOWN_MEMBER_ID, FENCED_MEMBER_EPOCH, FENCED_INSTANCE_ID,
UNRELEASED_INSTANCE_ID, GROUP_MAX_SIZE_REACHED, GROUP_ID_NOT_FOUND (a classic group with
members under that id).

Group state is persisted as Kafka's records in ``__consumer_offsets`` (ConsumerGroupMetadata,
member metadata, target assignment metadata and members, current member assignment; see
``kbroker/groups/consumer_group_records.py``) and replayed on start, so members keep their
epochs and assignments across a restart. Deviations: a failed write of those records is logged
and the heartbeat still answered (Kafka fails it); resolved regexes (record type 16) and the
subscription metadata hash are not stored (recomputed on load); the rack id is recorded but
not used by the assignors; regexes are matched with Python's ``re`` restricted to RE2/J's
features (see ``consumer_group.compile_regex``); a heartbeat for a group that does not exist
with a non-zero epoch gets UNKNOWN_MEMBER_ID (the client rejoins).
While ``group.version`` is finalized below 1 (``kafka-features disable --feature group.version``)
the protocol is off, as in Kafka: every heartbeat is UNSUPPORTED_VERSION and clients use the
classic protocol.
With an authorizer, as Kafka: READ on the group (else GROUP_AUTHORIZATION_FAILED) and DESCRIBE on
every subscribed topic (else TOPIC_AUTHORIZATION_FAILED).
"""

from __future__ import annotations

import datetime
from typing import Protocol

from kbroker.groups.assignors import Assignment
from kbroker.groups.consumer_heartbeat import HeartbeatRequest
from kbroker.handlers.security import HasSecurity, allowed, denied_names
from kbroker.handlers.services import HasCluster, HasConsumerGroups
from kbroker.network.context import RequestContext
from kbroker.protocol.acl import AclOperation, ResourceType
from kbroker.protocol.codec import NO_THROTTLE, build, response_module
from kbroker.protocol.errors import ErrorCode, KafkaError

API_KEY = 68
MIN_VERSION = 0
MAX_VERSION = 1


class Services(HasConsumerGroups, HasCluster, HasSecurity, Protocol): ...


def _millis(value: object) -> int:
    if isinstance(value, datetime.timedelta):
        return int(value / datetime.timedelta(milliseconds=1))
    return int(value)  # type: ignore[call-overload]


def _owned(topic_partitions: object) -> Assignment | None:
    if topic_partitions is None:
        return None
    owned: Assignment = {}
    for tp in topic_partitions:  # type: ignore[attr-defined]
        if tp.partitions:
            owned.setdefault(tp.topic_id, set()).update(tp.partitions)
    return owned


async def handle(ctx: RequestContext[Services], request: object) -> object:
    m = response_module(API_KEY, ctx.api_version)
    _epoch, features = ctx.services.cluster.finalized_features()
    if features.get("group.version", 0) < 1:  # KIP-848 is switched on by group.version 1
        return build(m.ConsumerGroupHeartbeatResponse, throttle_time=NO_THROTTLE,
                     error_code=ErrorCode.unsupported_version, error_message=None, member_id=None, member_epoch=0,
                     heartbeat_interval=datetime.timedelta(0), assignment=None)
    names = request.subscribed_topic_names
    refused = ErrorCode.none
    if not allowed(ctx, AclOperation.READ, ResourceType.GROUP, request.group_id):
        refused = ErrorCode.group_authorization_failed
    elif names and denied_names(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, names):
        refused = ErrorCode.topic_authorization_failed
    if refused:
        return build(m.ConsumerGroupHeartbeatResponse, throttle_time=NO_THROTTLE, error_code=refused,
                     error_message=None, member_id=None, member_epoch=0, heartbeat_interval=datetime.timedelta(0),
                     assignment=None)
    req = HeartbeatRequest(
        group_id=request.group_id, member_id=request.member_id, member_epoch=request.member_epoch,
        instance_id=request.instance_id, rack_id=request.rack_id,
        rebalance_timeout_ms=_millis(request.rebalance_timeout),
        subscribed_topic_names=list(names) if names is not None else None,
        subscribed_topic_regex=getattr(request, "subscribed_topic_regex", None),
        server_assignor=request.server_assignor, owned=_owned(request.topic_partitions),
        client_id=ctx.header.client_id or "", client_host="/" + ctx.client_host,  # InetAddress.toString(), as Kafka
        api_version=ctx.api_version)
    try:
        result = ctx.services.consumer_groups.heartbeat(req)
    except KafkaError as exc:
        return build(m.ConsumerGroupHeartbeatResponse, throttle_time=NO_THROTTLE, error_code=exc.code,
                     error_message=exc.message, member_id=None, member_epoch=0,
                     heartbeat_interval=datetime.timedelta(0), assignment=None)
    assignment = None
    if result.assignment is not None:
        assignment = build(m.Assignment, topic_partitions=tuple(
            build(m.TopicPartitions, topic_id=topic_id, partitions=tuple(sorted(ps)))
            for topic_id, ps in sorted(result.assignment.items(), key=lambda item: str(item[0])) if ps))
    return build(m.ConsumerGroupHeartbeatResponse, throttle_time=NO_THROTTLE, error_code=ErrorCode.none,
                 error_message=None, member_id=result.member_id, member_epoch=result.member_epoch,
                 heartbeat_interval=datetime.timedelta(milliseconds=result.heartbeat_interval_ms),
                 assignment=assignment)
