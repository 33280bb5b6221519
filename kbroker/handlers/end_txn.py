"""EndTxn (key 26), v0–5.

Commit or abort the ongoing transaction: the coordinator logs PrepareCommit/PrepareAbort,
writes a COMMIT/ABORT marker to every partition of the transaction (offsets partitions
included, which makes TxnOffsetCommit's offsets visible or drops them), then logs
CompleteCommit/CompleteAbort — all before answering. A retry after completion answers NONE;
ending a transaction in the wrong state is INVALID_TXN_STATE.
v5+ is transaction version 2 (KIP-890 part 2; Kafka decides on the request version alone):
every commit and abort bumps the producer epoch (a new producer id at epoch 0 when the
epoch is exhausted) and the response carries the producer id and epoch to continue with
(-1/-1 on error, as Kafka); a retry carries the epoch before the bump.
The answer follows the replication of PrepareCommit/PrepareAbort (Kafka's order; until then
the change is pending and the state unchanged, and if it cannot be replicated the answer is
COORDINATOR_NOT_AVAILABLE or NOT_COORDINATOR with the transaction still Ongoing); the markers
and the Complete record follow asynchronously, and until then requests for the transactional
id get CONCURRENT_TRANSACTIONS.
With an authorizer the transactional id needs WRITE (else TRANSACTIONAL_ID_AUTHORIZATION_FAILED).
"""

from __future__ import annotations

from typing import Protocol

from kbroker.handlers.security import HasSecurity, allowed
from kbroker.handlers.services import HasTransactions
from kbroker.network.context import RequestContext
from kbroker.protocol.acl import AclOperation, ResourceType
from kbroker.protocol.codec import NO_THROTTLE, build, response_module
from kbroker.protocol.errors import ErrorCode, KafkaError

from .txn_errors import for_version

API_KEY = 26
MIN_VERSION = 0
MAX_VERSION = 5
FIRST_TRANSACTION_V2 = 5


class Services(HasTransactions, HasSecurity, Protocol): ...


async def handle(ctx: RequestContext[Services], request: object) -> object:
    m = response_module(API_KEY, ctx.api_version)
    error = ErrorCode.none
    transaction_version = 2 if ctx.api_version >= FIRST_TRANSACTION_V2 else 1
    if not allowed(ctx, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, request.transactional_id):
        return build(m.EndTxnResponse, throttle_time=NO_THROTTLE,
                     error_code=ErrorCode.transactional_id_authorization_failed, producer_id=-1, producer_epoch=-1)
    try:
        coordinator = ctx.services.transaction_coordinator
        producer_id, producer_epoch = coordinator.end_txn(
            request.transactional_id, request.producer_id, request.producer_epoch, request.committed,
            transaction_version,
        )
        await coordinator.replicated(request.transactional_id)
    except KafkaError as exc:
        error = for_version(exc.code, ctx.api_version)
        producer_id, producer_epoch = -1, -1
    return build(m.EndTxnResponse, throttle_time=NO_THROTTLE, error_code=error,
                 producer_id=producer_id, producer_epoch=producer_epoch)
