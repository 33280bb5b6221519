"""EndTxn (key 26), v0–5.

Commit or abort the ongoing transaction: the coordinator logs PrepareCommit/PrepareAbort,
writes a COMMIT/ABORT marker to every partition of the transaction (offsets partitions
included, which makes TxnOffsetCommit's offsets visible or drops them), then logs
CompleteCommit/CompleteAbort — all before answering. A retry after completion answers NONE;
ending a transaction in the wrong state is INVALID_TXN_STATE.
Deviation: transaction version 2 (KIP-890 epoch bump per transaction) is not implemented;
v5's producer id / epoch fields echo the current ones.
"""

from __future__ import annotations

from kbroker.context import RequestContext
from kbroker.protocol.codec import NO_THROTTLE, build, response_module
from kbroker.protocol.errors import ErrorCode, KafkaError

from .txn_errors import for_version

API_KEY = 26
MIN_VERSION = 0
MAX_VERSION = 5


async def handle(ctx: RequestContext, request: object) -> object:
    m = response_module(API_KEY, ctx.api_version)
    error = ErrorCode.none
    try:
        ctx.broker.transaction_coordinator.end_txn(
            request.transactional_id, request.producer_id, request.producer_epoch, request.committed
        )
    except KafkaError as exc:
        error = for_version(exc.code, ctx.api_version)
    return build(m.EndTxnResponse, throttle_time=NO_THROTTLE, error_code=error,
                 producer_id=request.producer_id, producer_epoch=request.producer_epoch)
