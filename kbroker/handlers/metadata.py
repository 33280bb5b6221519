"""Metadata (key 3), v0–13.

Lists the live brokers, the cluster id, the "controller" (a live broker, as KRaft brokers
answer) and the requested topics with topic ids, leader, leader epoch, replicas, ISR and offline
replicas; a partition without a leader is LEADER_NOT_AVAILABLE. A null topic list (v0: empty) means all
topics. Topics may be named or (v10+) given by id; an unknown id answers UNKNOWN_TOPIC_ID, and
a topic with neither INVALID_REQUEST (named "" before v12, where the answer's name is not nullable,
as Kafka answers).
Authorized operations (v8+ for topics, v8–10 for the cluster) are answered only when asked for,
and then all of those Kafka defines on the resource, as a Kafka broker without an authorizer
answers, or with one those the ACLs allow; otherwise Kafka's "omitted" value, INT32_MIN.
With an authorizer, as Kafka's KafkaApis: a request for all topics lists those the caller may
DESCRIBE; a named topic it may not DESCRIBE is TOPIC_AUTHORIZATION_FAILED whether it exists or
not; auto-creating a topic needs CREATE on the cluster or on the topic (else
TOPIC_AUTHORIZATION_FAILED).
Auto-creation happens when the request allows it (v4+; always before) and
``auto.create.topics.enable`` is true, with ``num.partitions``/``default.replication.factor``.
Deviation: Kafka answers UNKNOWN_TOPIC_OR_PARTITION for an auto-created topic on the first
request and the topic appears ~50 ms later; kbroker creates synchronously and returns it.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Sequence
from typing import NamedTuple, Protocol

from kbroker.handlers.security import HasSecurity, allowed, authorized_operations, cluster_allowed, denied_names
from kbroker.handlers.services import HasCatalogue, HasCluster, HasSettings
from kbroker.network.context import EncodedResponse, RequestContext
from kbroker.protocol.acl import CLUSTER_NAME, AclOperation, ResourceType
from kbroker.protocol.codec import ZERO_UUID, response_header
from kbroker.protocol.errors import ErrorCode, KafkaError
from kbroker.protocol.wire import Writer, encode_unsigned_varint
from kbroker.replication.quorum.partition_registration import NO_LEADER
from kbroker.replication.quorum.topic_rules import INTERNAL_TOPICS

API_KEY = 3
MIN_VERSION = 0
MAX_VERSION = 13
FIRST_FLEXIBLE = 9

_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")
_PARTITION_HEAD = struct.Struct(">hii")  # error code, partition index, leader id

AUTHORIZED_OPERATIONS_OMITTED = -(2**31)
# READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE, DESCRIBE_CONFIGS, ALTER_CONFIGS: no ACLs, all allowed.
TOPIC_OPERATIONS = sum(1 << op for op in (3, 4, 5, 6, 7, 8, 10, 11))
# CREATE, ALTER, DESCRIBE, CLUSTER_ACTION, DESCRIBE_CONFIGS, ALTER_CONFIGS, IDEMPOTENT_WRITE: the
# operations Kafka 4.3.1 answers on the cluster resource without an authorizer (measured).
CLUSTER_OPERATIONS = sum(1 << op for op in (5, 7, 8, 9, 10, 11, 12))


class Services(HasCatalogue, HasCluster, HasSettings, HasSecurity, Protocol): ...


async def handle(ctx: RequestContext[Services], request: object) -> object:
    services = ctx.services
    catalogue = services.catalogue
    version = ctx.api_version
    requested = request.topics
    auto_create = services.settings.auto_create_topics_enable and getattr(
        request, "allow_auto_topic_creation", True
    )
    include_ops = getattr(request, "include_topic_authorized_operations", False)
    include_cluster_ops = getattr(request, "include_cluster_authorized_operations", False)  # v8-10
    topics = []
    brokers = services.cluster.live_brokers(ctx.listener)  # their endpoints on the request's listener
    live = {b[0] for b in brokers}
    if requested is None or (version == 0 and not requested):
        hidden = denied_names(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, catalogue.topics)
        wanted = [(name, None) for name in catalogue.topics if name not in hidden]
        hidden = frozenset()
    else:
        wanted = [(t.name, getattr(t, "topic_id", None)) for t in requested]
        hidden = denied_names(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, (
            name if name else info.name for name, info in (
                (t.name, catalogue.topics_by_id.get(getattr(t, "topic_id", None) or ZERO_UUID)) for t in requested)
            if name or info is not None))
    for name, topic_id in wanted:
        error = ErrorCode.none
        info = None
        # By id: the Java client leaves the name at its default "" (not null) when it asks by id.
        if not name and topic_id is not None and topic_id != ZERO_UUID:
            info = catalogue.topics_by_id.get(topic_id)
            if info is None:
                error = ErrorCode.unknown_topic_id
            elif info.name in hidden:
                info, error = None, ErrorCode.topic_authorization_failed
        elif name is not None and name in hidden:
            error = ErrorCode.topic_authorization_failed
        elif name is not None:
            info = catalogue.topics.get(name)
            if info is None and auto_create and not (
                    cluster_allowed(ctx, AclOperation.CREATE) or allowed(ctx, AclOperation.CREATE, ResourceType.TOPIC,
                                                                          name)):
                error = ErrorCode.topic_authorization_failed
            elif info is None and auto_create:
                try:
                    info = await catalogue.create_topic(name, -1, -1, {})
                except KafkaError as exc:
                    error = exc.code
            elif info is None:
                error = ErrorCode.unknown_topic_or_partition
        else:
            error = ErrorCode.invalid_request
        partitions = []
        if info is not None:
            for index in range(info.partitions):
                reg = catalogue.partition_registration(info.name, index)
                if reg is None:
                    continue
                partitions.append((
                    # Kafka answers LEADER_NOT_AVAILABLE for a partition without a live leader.
                    ErrorCode.none if reg.leader != NO_LEADER else ErrorCode.leader_not_available,
                    index, reg.leader, reg.leader_epoch, reg.replicas, reg.isr,
                    tuple(r for r in reg.replicas if r not in live),
                ))
        if info is not None:
            name = info.name
        elif name is None and version < 12:
            name = ""  # a v10-11 answer cannot carry a null name: Kafka answers "" with INVALID_REQUEST
        topics.append(MetadataTopic(
            error, name, info.topic_id if info is not None else ZERO_UUID, name in INTERNAL_TOPICS, partitions,
            authorized_operations(ctx, ResourceType.TOPIC, name or "", TOPIC_OPERATIONS)
            if include_ops and error != ErrorCode.topic_authorization_failed else AUTHORIZED_OPERATIONS_OMITTED,
        ))
    cluster_operations = authorized_operations(ctx, ResourceType.CLUSTER, CLUSTER_NAME, CLUSTER_OPERATIONS) \
        if include_cluster_ops else AUTHORIZED_OPERATIONS_OMITTED
    error_counts: dict[int, int] = {}
    frame = encode_response(ctx.header.correlation_id, version, brokers, services.cluster.cluster_id,
                            services.cluster.controller_id, topics, cluster_operations, error_counts)
    return EncodedResponse([frame], error_counts)


class MetadataTopic(NamedTuple):
    error: int
    name: str | None
    topic_id: uuid.UUID
    is_internal: bool
    # (error code, index, leader, leader epoch, replicas, ISR, offline replicas)
    partitions: list[tuple[int, int, int, int, Sequence[int], Sequence[int], Sequence[int]]]
    authorized_operations: int


def encode_response(correlation_id: int, version: int, brokers: Sequence[tuple[int, str, int, str | None]],
                    cluster_id: str | None, controller_id: int, topics: list[MetadataTopic],
                    cluster_operations: int, error_counts: dict[int, int]) -> bytes:
    """The answer's frame, written by hand: a topic of thousands of partitions is encoded in a
    few milliseconds on the event loop (the generic kio writer took tens, and a Metadata answer
    is asked for by every client). Each topic's and partition's error code is tallied into
    ``error_counts`` (Kafka's MetadataResponse.errorCounts) on the way."""
    flexible = version >= FIRST_FLEXIBLE
    w = Writer(flexible, bytearray(b"\x00\x00\x00\x00"))
    out = w.out
    out += response_header(correlation_id, API_KEY, flexible)
    if version >= 3:
        out += _INT32.pack(0)  # throttle_time_ms (a client over its quota gets it patched in)
    w.array_length(len(brokers))
    for node_id, host, port, rack in brokers:
        out += _INT32.pack(node_id)
        w.nullable_string(host)
        out += _INT32.pack(port)
        if version >= 1:
            w.nullable_string(rack)
        w.tagged_fields()
    if version >= 2:
        w.nullable_string(cluster_id)
    if version >= 1:
        out += _INT32.pack(controller_id)
    w.array_length(len(topics))
    for topic in topics:
        out += _INT16.pack(topic.error)
        error_counts[topic.error] = error_counts.get(topic.error, 0) + 1
        w.nullable_string(topic.name)
        if version >= 10:
            out += topic.topic_id.bytes
        if version >= 1:
            out += b"\x01" if topic.is_internal else b"\x00"
        w.array_length(len(topic.partitions))
        for error, index, leader, leader_epoch, replicas, isr, offline in topic.partitions:
            out += _PARTITION_HEAD.pack(error, index, leader)
            error_counts[error] = error_counts.get(error, 0) + 1
            if version >= 7:
                out += _INT32.pack(leader_epoch)
            _int32_array(w, replicas)
            _int32_array(w, isr)
            if version >= 5:
                _int32_array(w, offline)
            w.tagged_fields()
        if version >= 8:
            out += _INT32.pack(topic.authorized_operations)
        w.tagged_fields()
    if 8 <= version <= 10:
        out += _INT32.pack(cluster_operations)
    if version >= 13:
        out += _INT16.pack(ErrorCode.none)
    w.tagged_fields()
    _INT32.pack_into(out, 0, len(out) - 4)
    return bytes(out)


# Encoded replica lists: a cluster has few distinct ones ((1, 2, 3), (2, 3, 1), ...), so most are
# looked up rather than written again. Emptied when it grows past a bound.
_ARRAYS: dict[tuple[bool, tuple[int, ...]], bytes] = {}
_ARRAYS_BOUND = 50_000


def _int32_array(w: Writer, values: Sequence[int]) -> None:
    key = (w.flexible, tuple(values))
    encoded = _ARRAYS.get(key)
    if encoded is None:
        if len(_ARRAYS) >= _ARRAYS_BOUND:
            _ARRAYS.clear()
        length = encode_unsigned_varint(len(values) + 1) if w.flexible else _INT32.pack(len(values))
        encoded = _ARRAYS[key] = length + struct.pack(f">{len(values)}i", *values)
    w.out += encoded
