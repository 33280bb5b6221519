"""AddOffsetsToTxn (key 25), v0–4.

Adds the group's ``__consumer_offsets`` partition to the ongoing transaction (creating the
topic at first use, as Kafka does), so TxnOffsetCommit may follow and the transaction's
markers resolve those offsets. Errors as for AddPartitionsToTxn. In a cluster the answer
waits until the Ongoing record is replicated.
"""

from __future__ import annotations

from typing import Protocol

from kbroker.handlers.services import HasTransactions
from kbroker.network.context import RequestContext
from kbroker.protocol.codec import NO_THROTTLE, build, response_module
from kbroker.protocol.errors import ErrorCode, KafkaError

from .txn_errors import for_version

API_KEY = 25
MIN_VERSION = 0
MAX_VERSION = 4


class Services(HasTransactions, Protocol): ...


async def handle(ctx: RequestContext[Services], request: object) -> object:
    m = response_module(API_KEY, ctx.api_version)
    error = ErrorCode.none
    try:
        coordinator = ctx.services.transaction_coordinator
        coordinator.add_offsets(request.transactional_id, request.producer_id, request.producer_epoch,
                                request.group_id)
        await coordinator.replicated(request.transactional_id)
    except KafkaError as exc:
        error = for_version(exc.code, ctx.api_version)
    return build(m.AddOffsetsToTxnResponse, throttle_time=NO_THROTTLE, error_code=error)
