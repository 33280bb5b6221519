"""CreatePartitions (key 37), v0-3.

Raises a topic's partition count to ``count``; the new partitions are led by this node and
start empty. validate_only checks and changes nothing. Errors per topic, with Kafka's code
and message: unknown topic UNKNOWN_TOPIC_OR_PARTITION; a count that is not an increase
INVALID_PARTITIONS; the same topic twice in one request one INVALID_REQUEST result, as Kafka
answers. Manual assignments
must give one replica list per new partition, each exactly this node; otherwise
INVALID_REPLICA_ASSIGNMENT. More than 10,000 new partitions in one request (counting every
topic): POLICY_VIOLATION "Unable to perform excessively large batch operation." for every
topic and nothing changed, as Kafka's controller answers.
With a ``controller_mutation_rate`` quota for the caller (KIP-599) each partition added takes its
partitions from the quota; from v3 a topic asked for while the quota is used up is refused
with THROTTLING_QUOTA_EXCEEDED (older versions are served and told to wait), and the response
carries the throttle time (kbroker/quotas/client_quotas.py).
Deviation: the request timeout is unused; the change is synchronous and done on return.
With an authorizer each topic needs ALTER (else TOPIC_AUTHORIZATION_FAILED), as Kafka's controller.
"""

from __future__ import annotations

from typing import Protocol

from kbroker.handlers.security import HasSecurity, allowed
from kbroker.handlers.services import HasCatalogue, HasClientQuotas
from kbroker.network.context import RequestContext
from kbroker.protocol.acl import AclOperation, ResourceType
from kbroker.protocol.codec import build, response_module
from kbroker.protocol.errors import ErrorCode, KafkaError
from kbroker.replication.quorum.topic_rules import check_partitions_added

API_KEY = 37
MIN_VERSION = 0
MAX_VERSION = 3
STRICT_QUOTA_SINCE = 3


class Services(HasCatalogue, HasSecurity, HasClientQuotas, Protocol): ...


async def handle(ctx: RequestContext[Services], request: object) -> object:
    m = response_module(API_KEY, ctx.api_version)
    catalogue = ctx.services.catalogue
    counts: dict[str, int] = {}
    for topic in request.topics:
        counts[topic.name] = counts.get(topic.name, 0) + 1
    refused: KafkaError | None = None  # the whole request, before anything is created
    try:
        check_partitions_added([(t.name, t.count) for t in request.topics if counts[t.name] == 1],
                               {name: info.partitions for name, info in catalogue.topics.items()})
    except KafkaError as exc:
        refused = exc
    quota = ctx.services.client_quotas.mutation_quota(ctx, STRICT_QUOTA_SINCE)
    results = []
    for topic in request.topics:
        if counts[topic.name] == 0:
            continue  # a duplicate, already answered
        error, message = ErrorCode.none, None
        try:
            if counts[topic.name] > 1:
                counts[topic.name] = 0
                raise KafkaError(ErrorCode.invalid_request, "Duplicate topic name.")
            if not allowed(ctx, AclOperation.ALTER, ResourceType.TOPIC, topic.name):
                raise KafkaError(ErrorCode.topic_authorization_failed, "The topic authorization is failed.")
            if refused is not None:
                raise refused
            # Topic and count problems are reported before assignment problems, as Kafka does.
            await catalogue.create_partitions(topic.name, topic.count, validate_only=True)
            quota.check()
            if topic.assignments is not None:
                added = topic.count - catalogue.topics[topic.name].partitions
                if len(topic.assignments) != added:
                    raise KafkaError(
                        ErrorCode.invalid_replica_assignment,
                        f"Attempted to add {added} additional partition(s), but only "
                        f"{len(topic.assignments)} assignment(s) were specified.",
                    )
                catalogue.check_replica_assignment(
                    [a.broker_ids for a in topic.assignments])
            quota.record(topic.count - catalogue.topics[topic.name].partitions)
            if not request.validate_only:
                await catalogue.create_partitions(
                    topic.name, topic.count, assignments=[a.broker_ids for a in topic.assignments or ()])
        except KafkaError as exc:
            error, message = exc.code, exc.message
        results.append(build(
            m.CreatePartitionsTopicResult, name=topic.name, error_code=error, error_message=message
        ))
    return build(m.CreatePartitionsResponse, throttle_time=quota.throttle_time(), results=tuple(results))
