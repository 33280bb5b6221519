"""AddOffsetsToTxn (key 25), v0–4.

Adds the group's ``__consumer_offsets`` partition to the ongoing transaction (creating the
topic at first use, as Kafka does), so TxnOffsetCommit may follow and the transaction's
markers resolve those offsets. Errors as for AddPartitionsToTxn. In a cluster the answer
waits until the Ongoing record is replicated.
With an authorizer the transactional id needs WRITE (else TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
and the group READ (else GROUP_AUTHORIZATION_FAILED), as Kafka.
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

API_KEY = 25
MIN_VERSION = 0
MAX_VERSION = 4


class Services(HasTransactions, HasSecurity, Protocol): ...


async def handle(ctx: RequestContext[Services], request: object) -> object:
    m = response_module(API_KEY, ctx.api_version)
    error = ErrorCode.none
    if not allowed(ctx, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, request.transactional_id):
        error = ErrorCode.transactional_id_authorization_failed
    elif not allowed(ctx, AclOperation.READ, ResourceType.GROUP, request.group_id):
        error = ErrorCode.group_authorization_failed
    if error:
        return build(m.AddOffsetsToTxnResponse, throttle_time=NO_THROTTLE, error_code=error)
    try:
        coordinator = ctx.services.transaction_coordinator
        coordinator.add_offsets(request.transactional_id, request.producer_id, request.producer_epoch,
                                request.group_id)
        await coordinator.replicated(request.transactional_id)
    except KafkaError as exc:
        error = for_version(exc.code, ctx.api_version)
    return build(m.AddOffsetsToTxnResponse, throttle_time=NO_THROTTLE, error_code=error)
