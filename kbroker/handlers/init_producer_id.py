"""InitProducerId (key 22), v0-5.

Idempotent producers (no transactional id) get a new producer id with epoch 0, as Kafka
gives them, also when they send their current id and epoch (KIP-360: a bump for a
non-transactional producer is a fresh id). Giving only one of producer id / epoch is
INVALID_REQUEST, as in Kafka.
Producer ids are never reused, across restarts and crashes: ids come from blocks of 1000 the
active controller records in the metadata log before handing them out (AllocateProducerIds),
as Kafka's controller does; while the next block is on its way the answer is
COORDINATOR_LOAD_IN_PROGRESS, which clients retry.
Transactional producers (a transactional id) are answered by the TransactionCoordinator: the
first time a new producer id with epoch 0, after that the same id with the epoch bumped
(fencing older sessions; an open transaction of the old session is aborted first). The
transaction timeout must be in (0, transaction.max.timeout.ms] (else
INVALID_TRANSACTION_TIMEOUT). A given producer id/epoch (KIP-360) that is not the current one
is PRODUCER_FENCED (INVALID_PRODUCER_EPOCH before v4). The answer waits until the state
record is replicated (a failed write of it: NOT_COORDINATOR); an open transaction of the old
session is aborted asynchronously and the request answered CONCURRENT_TRANSACTIONS meanwhile
(the client retries).
With an authorizer, as Kafka: a transactional id needs WRITE on it (else
TRANSACTIONAL_ID_AUTHORIZATION_FAILED); an idempotent producer IDEMPOTENT_WRITE on the cluster or
WRITE on some topic (else CLUSTER_AUTHORIZATION_FAILED).
"""

from __future__ import annotations

from typing import Protocol

from kbroker.handlers.security import HasSecurity, allowed, allowed_any, cluster_allowed
from kbroker.handlers.services import HasProducerIds, HasTransactions
from kbroker.network.context import RequestContext
from kbroker.protocol.acl import AclOperation, ResourceType
from kbroker.protocol.codec import NO_THROTTLE, build, response_module
from kbroker.protocol.errors import ErrorCode, KafkaError

from .txn_errors import for_version

API_KEY = 22
MIN_VERSION = 0
MAX_VERSION = 5

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1


class Services(HasTransactions, HasProducerIds, HasSecurity, Protocol): ...


async def handle(ctx: RequestContext[Services], request: object) -> object:
    m = response_module(API_KEY, ctx.api_version)
    producer_id, epoch, error = NO_PRODUCER_ID, NO_PRODUCER_EPOCH, ErrorCode.none
    given_id = getattr(request, "producer_id", NO_PRODUCER_ID)
    given_epoch = getattr(request, "producer_epoch", NO_PRODUCER_EPOCH)
    if request.transactional_id is not None and not allowed(
            ctx, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, request.transactional_id):
        error = ErrorCode.transactional_id_authorization_failed
    elif request.transactional_id is None and not (
            cluster_allowed(ctx, AclOperation.IDEMPOTENT_WRITE)
            or allowed_any(ctx, AclOperation.WRITE, ResourceType.TOPIC)):
        error = ErrorCode.cluster_authorization_failed
    elif (given_id == NO_PRODUCER_ID) != (given_epoch == NO_PRODUCER_EPOCH):
        error = ErrorCode.invalid_request
    elif request.transactional_id is not None:
        timeout_ms = int(request.transaction_timeout.total_seconds() * 1000)
        coordinator = ctx.services.transaction_coordinator
        try:
            producer_id, epoch = coordinator.init_producer_id(request.transactional_id, timeout_ms, given_id,
                                                              given_epoch)
            await coordinator.replicated(request.transactional_id)
        except KafkaError as exc:
            producer_id, epoch = NO_PRODUCER_ID, NO_PRODUCER_EPOCH
            error = for_version(exc.code, ctx.api_version, first_fenced_version=4)
    else:
        try:
            producer_id, epoch = ctx.services.producer_ids.allocate(), 0
        except KafkaError as exc:  # the next block is still on its way from the controller
            error = exc.code
    return build(
        m.InitProducerIdResponse,
        throttle_time=NO_THROTTLE,
        error_code=error,
        producer_id=producer_id,
        producer_epoch=epoch,
    )
