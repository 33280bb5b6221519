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

import datetime
from typing import Protocol

from kbroker.handlers.security import HasSecurity, allowed, authorized_operations, cluster_allowed, denied_names
from kbroker.handlers.services import HasCatalogue, HasCluster, HasSettings
from kbroker.network.context import RequestContext
from kbroker.protocol.acl import CLUSTER_NAME, AclOperation, ResourceType
from kbroker.protocol.codec import ZERO_UUID, build, response_module
from kbroker.protocol.errors import ErrorCode, KafkaError
from kbroker.replication.quorum.partition_registration import NO_LEADER
from kbroker.replication.quorum.topic_rules import INTERNAL_TOPICS

API_KEY = 3
MIN_VERSION = 0
MAX_VERSION = 13

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
    m = response_module(API_KEY, version)
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
                partitions.append(build(
                    m.MetadataResponsePartition,
                    # Kafka answers LEADER_NOT_AVAILABLE for a partition without a live leader.
                    error_code=ErrorCode.none if reg.leader != NO_LEADER else ErrorCode.leader_not_available,
                    partition_index=index,
                    leader_id=reg.leader,
                    leader_epoch=reg.leader_epoch,
                    replica_nodes=reg.replicas,
                    isr_nodes=reg.isr,
                    offline_replicas=tuple(r for r in reg.replicas if r not in live),
                ))
        if info is not None:
            name = info.name
        elif name is None and version < 12:
            name = ""  # a v10-11 answer cannot carry a null name: Kafka answers "" with INVALID_REQUEST
        topics.append(build(
            m.MetadataResponseTopic,
            error_code=error,
            name=name,
            topic_id=info.topic_id if info is not None else ZERO_UUID,
            is_internal=name in INTERNAL_TOPICS,
            partitions=tuple(partitions),
            topic_authorized_operations=authorized_operations(ctx, ResourceType.TOPIC, name or "", TOPIC_OPERATIONS)
            if include_ops and error != ErrorCode.topic_authorization_failed else AUTHORIZED_OPERATIONS_OMITTED,
        ))
    return build(
        m.MetadataResponse,
        throttle_time=datetime.timedelta(0),
        brokers=tuple(build(m.MetadataResponseBroker, node_id=node, host=host, port=port, rack=rack)
                      for node, host, port, rack in brokers),
        cluster_id=services.cluster.cluster_id,
        controller_id=services.cluster.controller_id,
        topics=tuple(topics),
        cluster_authorized_operations=authorized_operations(ctx, ResourceType.CLUSTER, CLUSTER_NAME, CLUSTER_OPERATIONS)
        if include_cluster_ops else AUTHORIZED_OPERATIONS_OMITTED,
        error_code=ErrorCode.none,
    )
