"""FindCoordinator (key 10), v0-6.

Names this broker (node id, advertised host and port) as the coordinator of any group
(key type 0) or transactional id (key type 1), error NONE. v0-3 ask for one key, v4+ for a
list (coordinator_keys), answered one coordinator per key. Another key type (e.g. 2, share
groups): INVALID_REQUEST.
Transactional ids are coordinated here by the TransactionCoordinator (``__transaction_state``
is created at its first use), classic groups by the GroupCoordinator and KIP-848 consumer
groups by the ConsumerGroupCoordinator (``__consumer_offsets`` is created at the first commit
or group write). In a multi-node cluster a group's coordinator is the leader of its
``__consumer_offsets`` partition (the topic is created here on first use, with
offsets.topic.num.partitions and offsets.topic.replication.factor; COORDINATOR_NOT_AVAILABLE
while that cannot be done or the partition has no leader). Deviations: share groups (key type
2) are not implemented; in a multi-node cluster transactional ids get COORDINATOR_NOT_AVAILABLE
(the transaction coordinator is single-node only).
"""

from __future__ import annotations

import logging

from kbroker.context import RequestContext
from kbroker.groups.offset_store import CONSUMER_OFFSETS_TOPIC, OFFSETS_TOPIC_CONFIGS
from kbroker.protocol.codec import NO_THROTTLE, build, response_module
from kbroker.protocol.errors import ErrorCode, KafkaError

log = logging.getLogger(__name__)

API_KEY = 10
MIN_VERSION = 0
MAX_VERSION = 6

KEY_TYPE_GROUP = 0
KEY_TYPE_TRANSACTION = 1
TRANSACTIONS_NOT_CLUSTERED = "the transaction coordinator is single-node only in this kbroker"


async def handle(ctx: RequestContext, request: object) -> object:
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


async def _coordinator(ctx: RequestContext, key_type: int, key: str) -> Answer:
    broker = ctx.broker
    if key_type not in (KEY_TYPE_GROUP, KEY_TYPE_TRANSACTION):
        return ErrorCode.invalid_request, f"Unsupported key type {key_type}", -1, "", -1
    if not broker.cluster_mode:
        host, port = broker.advertised
        return ErrorCode.none, None, broker.node_id, host, port
    if key_type == KEY_TYPE_TRANSACTION:
        return ErrorCode.coordinator_not_available, TRANSACTIONS_NOT_CLUSTERED, -1, "", -1
    controller = broker.controller
    if CONSUMER_OFFSETS_TOPIC not in controller.topics:
        try:
            await controller.create_topic(
                CONSUMER_OFFSETS_TOPIC, broker.config.get_int("offsets.topic.num.partitions"),
                broker.config.get_int("offsets.topic.replication.factor"), OFFSETS_TOPIC_CONFIGS)
        except KafkaError as exc:
            log.info("cannot create %s yet: %s", CONSUMER_OFFSETS_TOPIC, exc)
            return NOT_AVAILABLE
    reg = controller.partition_registration(CONSUMER_OFFSETS_TOPIC, broker.offset_store.partition_for(key))
    endpoint = broker.lifecycle.endpoint(reg.leader) if reg is not None and broker.lifecycle is not None else None
    if reg is None or endpoint is None:
        return NOT_AVAILABLE
    return ErrorCode.none, None, reg.leader, endpoint[0], endpoint[1]
