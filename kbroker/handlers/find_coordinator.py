"""FindCoordinator (key 10), v0-6.

Names the coordinator (node id, advertised host and port) of a group (key type 0) or
transactional id (key type 1). v0-3 ask for one key, v4+ for a list (coordinator_keys),
answered one coordinator per key. Another key type (e.g. 2, share
groups): INVALID_REQUEST.
Transactional ids are coordinated by the TransactionCoordinator, classic groups by the
GroupCoordinator and KIP-848 consumer groups by the ConsumerGroupCoordinator, of the broker
that leads the key's partition of the internal topic: a group's coordinator is the leader of its
``__consumer_offsets`` partition (the topic is created here on first use, with
offsets.topic.num.partitions and offsets.topic.replication.factor; COORDINATOR_NOT_AVAILABLE
while that cannot be done or the partition has no leader). A transactional id's coordinator is
likewise the leader of its ``__transaction_state`` partition (created here on first use with
transaction.state.log.num.partitions, transaction.state.log.replication.factor and
min.insync.replicas = transaction.state.log.min.isr, as Kafka). Deviation: share groups (key
type 2) are not implemented.
With an authorizer the key needs DESCRIBE on its group or transactional id (else
GROUP_AUTHORIZATION_FAILED / TRANSACTIONAL_ID_AUTHORIZATION_FAILED, Kafka's default message).
"""

from __future__ import annotations

import logging
from typing import Protocol

from kbroker.groups.offset_store import CONSUMER_OFFSETS_TOPIC, OFFSETS_TOPIC_CONFIGS
from kbroker.handlers.security import GROUP_DENIED, TRANSACTIONAL_ID_DENIED, HasSecurity, allowed
from kbroker.handlers.services import HasCatalogue, HasCluster, HasGroupOffsets, HasSettings
from kbroker.network.context import RequestContext
from kbroker.network.rate_limited_log import RateLimitedLogger
from kbroker.protocol.acl import AclOperation, ResourceType
from kbroker.protocol.codec import NO_THROTTLE, build, response_module
from kbroker.protocol.errors import ErrorCode, KafkaError
from kbroker.transactions.transaction_log import TRANSACTION_STATE_TOPIC, TRANSACTION_STATE_TOPIC_CONFIGS, partition_for

# Every FindCoordinator asks again while the topic cannot be created (too few brokers).
log = RateLimitedLogger(logging.getLogger(__name__))

API_KEY = 10
MIN_VERSION = 0
MAX_VERSION = 6

KEY_TYPE_GROUP = 0
KEY_TYPE_TRANSACTION = 1


class Services(HasCatalogue, HasCluster, HasGroupOffsets, HasSettings, HasSecurity, Protocol): ...


async def handle(ctx: RequestContext[Services], request: object) -> object:
    m = response_module(API_KEY, ctx.api_version)
    key_type = getattr(request, "key_type", KEY_TYPE_GROUP)
    keys = request.coordinator_keys if hasattr(request, "coordinator_keys") else (request.key,)
    answers = [await _coordinator(ctx, key_type, key) for key in keys]
    if hasattr(request, "coordinator_keys"):
        coordinators = tuple(
            build(m.Coordinator, key=key, node_id=node_id, host=host, port=port, error_code=error,
                  error_message=message)
            for key, (error, message, node_id, host, port) in zip(keys, answers, strict=True)
        )
        return build(m.FindCoordinatorResponse, throttle_time=NO_THROTTLE, coordinators=coordinators)
    error, message, node_id, host, port = answers[0]
    return build(m.FindCoordinatorResponse, throttle_time=NO_THROTTLE, error_code=error, error_message=message,
                 node_id=node_id, host=host, port=port)


Answer = tuple[ErrorCode, str | None, int, str, int]
NOT_AVAILABLE: Answer = (ErrorCode.coordinator_not_available, None, -1, "", -1)


async def _coordinator(ctx: RequestContext[Services], key_type: int, key: str) -> Answer:
    services = ctx.services
    if key_type not in (KEY_TYPE_GROUP, KEY_TYPE_TRANSACTION):
        return ErrorCode.invalid_request, f"Unsupported key type {key_type}", -1, "", -1
    if key_type == KEY_TYPE_GROUP and not allowed(ctx, AclOperation.DESCRIBE, ResourceType.GROUP, key):
        return ErrorCode.group_authorization_failed, GROUP_DENIED, -1, "", -1
    if key_type == KEY_TYPE_TRANSACTION and not allowed(ctx, AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, key):
        return ErrorCode.transactional_id_authorization_failed, TRANSACTIONAL_ID_DENIED, -1, "", -1
    catalogue = services.catalogue
    if key_type == KEY_TYPE_TRANSACTION:
        topic = TRANSACTION_STATE_TOPIC
        configs = {**TRANSACTION_STATE_TOPIC_CONFIGS,
                   "min.insync.replicas": str(services.settings.transaction_state_log_min_isr),
                   "segment.bytes": str(services.settings.transaction_state_log_segment_bytes)}
        partitions = services.settings.transaction_state_log_num_partitions
        replication_factor = services.settings.transaction_state_log_replication_factor
    else:
        topic, configs = CONSUMER_OFFSETS_TOPIC, OFFSETS_TOPIC_CONFIGS
        partitions = services.settings.offsets_topic_num_partitions
        replication_factor = services.settings.offsets_topic_replication_factor
    if topic not in catalogue.topics:
        try:
            await catalogue.create_topic(topic, partitions, replication_factor, configs)
        except KafkaError as exc:
            log.info("cannot create %s yet: %s", topic, exc)
            return NOT_AVAILABLE
    if key_type == KEY_TYPE_TRANSACTION:
        index = partition_for(key, catalogue.topics[topic].partitions)
    else:
        index = services.group_offsets.partition_for(key)
    reg = catalogue.partition_registration(topic, index)
    endpoint = services.cluster.endpoint(reg.leader, ctx.listener) if reg is not None else None
    if reg is None or endpoint is None:
        return NOT_AVAILABLE
    return ErrorCode.none, None, reg.leader, endpoint[0], endpoint[1]
