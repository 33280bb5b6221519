"""CreateTopics (key 19), v2–7, on the controller: brokers forward their clients' requests.

The forwarding broker has already validated names and config values; they are checked again
here because the controller is the one place that decides (Kafka does the same). Placement is
round-robin over live brokers, alternating racks (``QuorumController._place``). More than
10,000 partitions asked for in one request: POLICY_VIOLATION for every topic, nothing created.
"""

from __future__ import annotations

from typing import Protocol

from kbroker.controller_handlers.services import HasClock, HasQuorumController
from kbroker.network.context import RequestContext
from kbroker.protocol.codec import NO_THROTTLE, build, response_module
from kbroker.protocol.errors import ErrorCode, KafkaError
from kbroker.replication.quorum.topic_rules import check_partitions_requested, validate_topic_name
from kbroker.storage.log_config import InvalidConfig, validate_topic_config

API_KEY = 19
MIN_VERSION = 2
MAX_VERSION = 7


class Services(HasQuorumController, HasClock, Protocol): ...


async def handle(ctx: RequestContext[Services], request: object) -> object:
    services = ctx.services
    m = response_module(API_KEY, ctx.api_version)
    now_ms = services.clock.wall_ms()
    refused: KafkaError | None = None
    try:
        check_partitions_requested(request.topics, services.controller.settings.default_partitions)
    except KafkaError as exc:
        refused = exc
    results = []
    for topic in request.topics:
        error, message, topic_id, partitions, rf = ErrorCode.none, None, None, -1, -1
        try:
            if refused is not None:
                raise refused
            validate_topic_name(topic.name)
            configs: dict[str, str] = {}
            for entry in topic.configs:
                try:
                    validate_topic_config(entry.name, entry.value)
                except InvalidConfig as exc:
                    raise KafkaError(ErrorCode.invalid_config, str(exc)) from None
                assert entry.value is not None
                configs[entry.name] = entry.value
            assignments = {a.partition_index: list(a.broker_ids) for a in topic.assignments}
            created = services.controller.create_topic(
                topic.name, topic.num_partitions, topic.replication_factor, assignments, configs,
                request.validate_only, now_ms,
            )
            await services.committed()
            topic_id = created.topic_id
            if created.partitions:
                partitions = len(created.partitions)
                rf = len(created.partitions[0].replicas)
        except KafkaError as exc:
            error, message = exc.code, exc.message
        results.append(build(m.CreatableTopicResult, name=topic.name, topic_id=topic_id, error_code=error,
                             error_message=message, num_partitions=partitions, replication_factor=rf,
                             configs=None))
    return build(m.CreateTopicsResponse, throttle_time=NO_THROTTLE, topics=tuple(results))
