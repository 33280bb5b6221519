"""AddPartitionsToTxn (key 24), v0–5.

v0–3 (clients): one transactional id, its partitions join the ongoing transaction (the
coordinator logs Ongoing with them before answering). v4+ (brokers, KIP-890 part 1) may carry
several transactions and ``verify_only``: then nothing is added, and each partition answers
NONE if it is already in the ongoing transaction, else INVALID_TXN_STATE.
Errors as Kafka: an unknown topic/partition gets UNKNOWN_TOPIC_OR_PARTITION and the others
OPERATION_NOT_ATTEMPTED; a wrong producer id INVALID_PRODUCER_ID_MAPPING; an old epoch
PRODUCER_FENCED (INVALID_PRODUCER_EPOCH before v2); the whole-transaction error is given
for every partition. The coordinator answers once the Ongoing record is replicated
(NOT_COORDINATOR / COORDINATOR_NOT_AVAILABLE for every partition when that fails, the state
unchanged), and CONCURRENT_TRANSACTIONS while another change of the id is pending (not to
verify_only, which reads the replicated state, as Kafka); v4+ also
comes from partition leaders verifying a transactional write (AddPartitionsToTxnManager).
With an authorizer, as Kafka: v4+ (broker to broker) needs CLUSTER_ACTION; the transactional id
WRITE (else TRANSACTIONAL_ID_AUTHORIZATION_FAILED); each topic WRITE (else
TOPIC_AUTHORIZATION_FAILED, the others OPERATION_NOT_ATTEMPTED).
"""

from __future__ import annotations

from typing import Protocol

from kbroker.handlers.security import HasSecurity, allowed, cluster_allowed, denied_names
from kbroker.handlers.services import HasTransactions
from kbroker.network.context import RequestContext
from kbroker.protocol.acl import AclOperation, ResourceType
from kbroker.protocol.codec import NO_THROTTLE, build, response_module
from kbroker.protocol.errors import ErrorCode, KafkaError

from .txn_errors import for_version

API_KEY = 24
MIN_VERSION = 0
MAX_VERSION = 5
FIRST_BATCHED = 4


class Services(HasTransactions, HasSecurity, Protocol): ...


async def _add(ctx: RequestContext[Services], m: object, transactional_id: str, producer_id: int, producer_epoch: int,
         topics: tuple, verify_only: bool) -> tuple:
    wanted = [(t.name, p) for t in topics for p in t.partitions]
    coordinator = ctx.services.transaction_coordinator
    errors = _refused(ctx, transactional_id, wanted)
    if errors is None:
        try:
            errors = coordinator.add_partitions(transactional_id, producer_id, producer_epoch, wanted, verify_only)
            if not verify_only:
                await coordinator.replicated(transactional_id)
        except KafkaError as exc:
            errors = {tp: exc.code for tp in wanted}
    return tuple(
        build(m.AddPartitionsToTxnTopicResult, name=t.name, results_by_partition=tuple(
            build(m.AddPartitionsToTxnPartitionResult, partition_index=p,
                  partition_error_code=for_version(errors[(t.name, p)], ctx.api_version))
            for p in t.partitions
        ))
        for t in topics
    )


def _refused(ctx: RequestContext[Services], transactional_id: str,
             wanted: list[tuple[str, int]]) -> dict[tuple[str, int], ErrorCode] | None:
    """Kafka's checks before the coordinator is asked: WRITE on the transactional id (else every
    partition is refused), then WRITE on each topic; a topic refused or unknown leaves the others
    OPERATION_NOT_ATTEMPTED. None when the request may go on."""
    if not allowed(ctx, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, transactional_id):
        return {tp: ErrorCode.transactional_id_authorization_failed for tp in wanted}
    denied = denied_names(ctx, AclOperation.WRITE, ResourceType.TOPIC, (topic for topic, _p in wanted))
    if not denied:
        return None
    return {(topic, p): ErrorCode.topic_authorization_failed if topic in denied else ErrorCode.operation_not_attempted
            for topic, p in wanted}


async def handle(ctx: RequestContext[Services], request: object) -> object:
    m = response_module(API_KEY, ctx.api_version)
    if ctx.api_version >= FIRST_BATCHED and not cluster_allowed(ctx, AclOperation.CLUSTER_ACTION):
        return build(m.AddPartitionsToTxnResponse, throttle_time=NO_THROTTLE,
                     error_code=ErrorCode.cluster_authorization_failed, results_by_transaction=())
    if ctx.api_version >= FIRST_BATCHED:
        results = []
        for txn in request.transactions:
            topic_results = await _add(ctx, m, txn.transactional_id, txn.producer_id, txn.producer_epoch,
                                       txn.topics, txn.verify_only)
            results.append(build(m.AddPartitionsToTxnResult, transactional_id=txn.transactional_id,
                                 topic_results=topic_results))
        return build(m.AddPartitionsToTxnResponse, throttle_time=NO_THROTTLE, error_code=ErrorCode.none,
                     results_by_transaction=tuple(results))
    results = await _add(ctx, m, request.v3_and_below_transactional_id, request.v3_and_below_producer_id,
                   request.v3_and_below_producer_epoch, request.v3_and_below_topics, False)
    return build(m.AddPartitionsToTxnResponse, throttle_time=NO_THROTTLE, results_by_topic_v3_and_below=results)
