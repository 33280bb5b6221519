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
Deviation: transactions are not implemented yet. A transactional id is refused with
INVALID_REQUEST (clients fail at once with an "unexpected error ... see the broker logs"
message; the broker log says why) rather than a retriable error that would hang them.
"""

from __future__ import annotations

import logging
import os
import weakref
from typing import TYPE_CHECKING

from kbroker.context import RequestContext
from kbroker.protocol.codec import NO_THROTTLE, build, response_module
from kbroker.protocol.errors import ErrorCode
from kbroker.storage.file_io import replace_atomically

if TYPE_CHECKING:
    from kbroker.broker import Broker

API_KEY = 22
MIN_VERSION = 0
MAX_VERSION = 5

PRODUCER_ID_FILE = "kbroker-producer-ids"
BLOCK_SIZE = 1000
NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1

log = logging.getLogger(__name__)


class ProducerIdAllocator:
    """Unique producer ids: the file holds the first id of no block handed out yet."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.next_id = 0
        self.block_end = 0  # exclusive; nothing reserved yet in this process

    def allocate(self) -> int:
        if self.next_id >= self.block_end:
            start = max(self.next_id, self._reserved_until())
            # Reserve before handing out: after a crash the next process starts past it.
            replace_atomically(self.path, f"{start + BLOCK_SIZE}\n".encode())
            self.next_id, self.block_end = start, start + BLOCK_SIZE
        producer_id = self.next_id
        self.next_id += 1
        return producer_id

    def _reserved_until(self) -> int:
        try:
            with open(self.path, encoding="ascii") as fh:
                return int(fh.read().strip() or 0)
        except FileNotFoundError:
            return 0


_allocators: weakref.WeakKeyDictionary[Broker, ProducerIdAllocator] = weakref.WeakKeyDictionary()


def allocator_for(broker: Broker) -> ProducerIdAllocator:
    allocator = _allocators.get(broker)
    if allocator is None:
        path = os.path.join(broker.log_dirs[0], PRODUCER_ID_FILE)
        allocator = _allocators[broker] = ProducerIdAllocator(path)
    return allocator


async def handle(ctx: RequestContext, request: object) -> object:
    m = response_module(API_KEY, ctx.api_version)
    producer_id, epoch, error = NO_PRODUCER_ID, NO_PRODUCER_EPOCH, ErrorCode.none
    given_id = getattr(request, "producer_id", NO_PRODUCER_ID)
    given_epoch = getattr(request, "producer_epoch", NO_PRODUCER_EPOCH)
    if request.transactional_id is not None:
        log.warning(
            "InitProducerId for transactional.id %r from client %r refused: transactions are "
            "not supported by kbroker yet", request.transactional_id, ctx.header.client_id,
        )
        error = ErrorCode.invalid_request
    elif (given_id == NO_PRODUCER_ID) != (given_epoch == NO_PRODUCER_EPOCH):
        error = ErrorCode.invalid_request
    else:
        try:
            producer_id, epoch = allocator_for(ctx.broker).allocate(), 0
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
