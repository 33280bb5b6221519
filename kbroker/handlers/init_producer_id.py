"""InitProducerId (key 22), v0-5.

Idempotent producers (no transactional id) get a new producer id with epoch 0, as Kafka
gives them, also when they send their current id and epoch (KIP-360: a bump for a
non-transactional producer is a fresh id). Giving only one of producer id / epoch is
INVALID_REQUEST, as in Kafka.
Producer ids are never reused, across restarts and crashes: ids are handed out from blocks
of 1000, and the end of the current block is written to ``kbroker-producer-ids`` in the
first log dir (atomically, fsynced) before any id from the block is used, as Kafka's
controller hands out blocks. A crash skips at most the unused rest of one block. If the file
cannot be written the answer is COORDINATOR_LOAD_IN_PROGRESS, which clients retry.
Transactional producers (a transactional id) are answered by the TransactionCoordinator: the
first time a new producer id with epoch 0, after that the same id with the epoch bumped
(fencing older sessions; an open transaction of the old session is aborted first). The
transaction timeout must be in (0, transaction.max.timeout.ms] (else
INVALID_TRANSACTION_TIMEOUT). A given producer id/epoch (KIP-360) that is not the current one
is PRODUCER_FENCED (INVALID_PRODUCER_EPOCH before v4). In a cluster the answer waits until
the state record is replicated; an open transaction of the old session is aborted
asynchronously and the request answered CONCURRENT_TRANSACTIONS meanwhile (the client retries).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from kbroker.context import RequestContext
from kbroker.protocol.codec import NO_THROTTLE, build, response_module
from kbroker.protocol.errors import ErrorCode, KafkaError
from kbroker.replication.producer_ids import PRODUCER_ID_FILE

from .txn_errors import for_version

if TYPE_CHECKING:
    pass

API_KEY = 22
MIN_VERSION = 0
MAX_VERSION = 5

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1

log = logging.getLogger(__name__)


async def handle(ctx: RequestContext, request: object) -> object:
    m = response_module(API_KEY, ctx.api_version)
    producer_id, epoch, error = NO_PRODUCER_ID, NO_PRODUCER_EPOCH, ErrorCode.none
    given_id = getattr(request, "producer_id", NO_PRODUCER_ID)
    given_epoch = getattr(request, "producer_epoch", NO_PRODUCER_EPOCH)
    if (given_id == NO_PRODUCER_ID) != (given_epoch == NO_PRODUCER_EPOCH):
        error = ErrorCode.invalid_request
    elif request.transactional_id is not None:
        timeout_ms = int(request.transaction_timeout.total_seconds() * 1000)
        coordinator = ctx.broker.transaction_coordinator
        try:
            producer_id, epoch = coordinator.init_producer_id(request.transactional_id, timeout_ms, given_id,
                                                              given_epoch)
            await coordinator.replicated(request.transactional_id)
        except KafkaError as exc:
            producer_id, epoch = NO_PRODUCER_ID, NO_PRODUCER_EPOCH
            error = for_version(exc.code, ctx.api_version, first_fenced_version=4)
        except OSError as exc:
            log.error("cannot log the transaction state of %r: %s", request.transactional_id, exc)
            error = ErrorCode.coordinator_load_in_progress
    else:
        try:
            producer_id, epoch = ctx.broker.producer_ids.allocate(), 0
        except KafkaError as exc:  # cluster mode: the next block is still on its way
            error = exc.code
        except OSError as exc:
            log.error("cannot reserve producer ids in %s: %s", PRODUCER_ID_FILE, exc)
            error = ErrorCode.coordinator_load_in_progress
    return build(
        m.InitProducerIdResponse,
        throttle_time=NO_THROTTLE,
        error_code=error,
        producer_id=producer_id,
        producer_epoch=epoch,
    )
