"""CreateTopics (key 19), v2-7.

Each topic is created by the controller (partition count and replication factor -1 mean
``num.partitions`` / ``default.replication.factor``; configs are validated as overrides).
validate_only checks everything and creates nothing. Errors come back per topic with Kafka's
code and message: TOPIC_ALREADY_EXISTS, INVALID_TOPIC_EXCEPTION, INVALID_PARTITIONS,
INVALID_REPLICATION_FACTOR, INVALID_CONFIG. A name given twice in one request: one
INVALID_REQUEST result for it, as Kafka answers. More than 10,000 partitions asked for in one
request (counting every topic): POLICY_VIOLATION "Excessively large number of partitions per
request." for every topic and nothing created, as Kafka's controller answers. Manual assignments are accepted when each
partition's replicas are exactly this node, partitions numbered 0..n-1, with num_partitions
and replication_factor both -1; anything else is INVALID_REPLICA_ASSIGNMENT (or
INVALID_REQUEST when mixed with a count), as with Kafka on a one-broker cluster.
v5+ results carry the partition count, replication factor and every resolved config (name,
value, source; sorted by name); v7+ the topic id. A failed topic has the zero topic id, -1
for both counts and no configs.
With an authorizer a topic needs CREATE on the cluster or on the topic (else
TOPIC_AUTHORIZATION_FAILED "Authorization failed."), and its configs are answered only with
DESCRIBE_CONFIGS on it (else topic_config_error_code TOPIC_AUTHORIZATION_FAILED), as Kafka's
controller decides.
With a ``controller_mutation_rate`` quota for the caller (KIP-599) each topic created takes its
partitions from the quota; from v6 a topic asked for while the quota is used up is refused
with THROTTLING_QUOTA_EXCEEDED (older versions are served and told to wait), and the response
carries the throttle time (kbroker/quotas/client_quotas.py).
The answer comes once the controller has committed the topic and this broker's metadata has it
(Kafka's broker returns at the controller's commit), so Metadata asked of this broker next lists
it with its leaders; the partitions' logs are made after that, on every broker, and a produce that
arrives first is told UNKNOWN_TOPIC_OR_PARTITION and retried, as clients do against Kafka.
Deviation: the request timeout is unused.
"""

from __future__ import annotations

from typing import Protocol

from kbroker.handlers.security import HasSecurity, allowed, cluster_allowed
from kbroker.handlers.services import HasCatalogue, HasClientQuotas
from kbroker.network.context import RequestContext
from kbroker.protocol.acl import AclOperation, ResourceType
from kbroker.protocol.codec import ZERO_UUID, build, has_field, response_module
from kbroker.protocol.errors import ErrorCode, KafkaError
from kbroker.replication.quorum.topic_rules import TopicInfo, check_partitions_requested
from kbroker.storage.log_config import resolve_topic_configs

API_KEY = 19
MIN_VERSION = 2
MAX_VERSION = 7
STRICT_QUOTA_SINCE = 6


class Services(HasCatalogue, HasSecurity, HasClientQuotas, Protocol): ...


async def handle(ctx: RequestContext[Services], request: object) -> object:
    m = response_module(API_KEY, ctx.api_version)
    catalogue = ctx.services.catalogue
    counts: dict[str, int] = {}
    for topic in request.topics:
        counts[topic.name] = counts.get(topic.name, 0) + 1
    refused: KafkaError | None = None  # the whole request, before anything is created
    try:
        check_partitions_requested([t for t in request.topics if counts[t.name] == 1], catalogue.default_partitions)
    except KafkaError as exc:
        refused = exc
    may_create_any = cluster_allowed(ctx, AclOperation.CREATE)
    quota = ctx.services.client_quotas.mutation_quota(ctx, STRICT_QUOTA_SINCE)
    results = []
    for topic in request.topics:
        if counts[topic.name] == 0:
            continue  # a duplicate, already answered
        info: TopicInfo | None = None
        error, message = ErrorCode.none, None
        try:
            if counts[topic.name] > 1:
                counts[topic.name] = 0
                raise KafkaError(ErrorCode.invalid_request, "Duplicate topic name.")
            if not may_create_any and not allowed(ctx, AclOperation.CREATE, ResourceType.TOPIC, topic.name):
                raise KafkaError(ErrorCode.topic_authorization_failed, "Authorization failed.")
            if refused is not None:
                raise refused
            partitions, replication = _counts(ctx, topic)
            configs = {c.name: c.value for c in topic.configs}
            assignments = [a.broker_ids for a in sorted(topic.assignments, key=lambda a: a.partition_index)]
            quota.check()
            info = await catalogue.create_topic(
                topic.name, partitions, replication, configs, request.validate_only, assignments
            )
            quota.record(info.partitions)
        except KafkaError as exc:
            error, message = exc.code, exc.message
        results.append(_result(ctx, m, topic.name, info, error, message))
    return build(m.CreateTopicsResponse, throttle_time=quota.throttle_time(), topics=tuple(results))


def _counts(ctx: RequestContext[Services], topic: object) -> tuple[int, int]:
    """Partition count and replication factor, from the request or its manual assignment."""
    if not topic.assignments:
        return topic.num_partitions, topic.replication_factor
    if topic.num_partitions != -1:
        raise KafkaError(
            ErrorCode.invalid_request,
            "A manual partition assignment was specified, but numPartitions was not set to -1.",
        )
    if topic.replication_factor != -1:
        raise KafkaError(
            ErrorCode.invalid_request,
            "A manual partition assignment was specified, but replication factor was not set to -1.",
        )
    indexes = sorted(a.partition_index for a in topic.assignments)
    if indexes != list(range(len(indexes))):
        raise KafkaError(
            ErrorCode.invalid_replica_assignment,
            "partitions should be a consecutive 0-based integer sequence",
        )
    ctx.services.catalogue.check_replica_assignment([a.broker_ids for a in topic.assignments])
    return len(indexes), len(topic.assignments[0].broker_ids)


def _result(
    ctx: RequestContext[Services],
    m: object,
    name: str,
    info: TopicInfo | None,
    error: ErrorCode,
    message: str | None,
) -> object:
    configs = ()
    config_error = ErrorCode.none
    if info is not None and not allowed(ctx, AclOperation.DESCRIBE_CONFIGS, ResourceType.TOPIC, name):
        config_error = ErrorCode.topic_authorization_failed
    elif info is not None and has_field(m.CreatableTopicResult, "configs"):  # v5+
        resolved = resolve_topic_configs(info.configs, ctx.services.catalogue.broker_layers)
        configs = tuple(
            build(
                m.CreatableTopicConfigs,
                name=entry.name,
                value=entry.value,
                read_only=False,
                config_source=int(entry.source),
                is_sensitive=False,
            )
            for entry in sorted(resolved.values(), key=lambda e: e.name)
        )
    return build(
        m.CreatableTopicResult,
        name=name,
        topic_id=info.topic_id if info is not None else ZERO_UUID,
        error_code=error,
        error_message=message,
        topic_config_error_code=config_error,
        num_partitions=info.partitions if info is not None else -1,
        replication_factor=info.replication_factor if info is not None else -1,
        configs=configs,
    )
