"""ControllerProducerIdManager: a broker's producer ids, in blocks from the active controller.

Producer ids are never reused, across restarts and crashes: the controller hands out blocks of
``BLOCK_SIZE`` (AllocateProducerIds), each recorded in the metadata log before it is answered,
as Kafka's controller does; a crash skips at most the unused rest of one block.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from kbroker.protocol.errors import ErrorCode, KafkaError

log = logging.getLogger(__name__)

BLOCK_SIZE = 1000


class ControllerProducerIdManager:
    """Blocks come from the active controller (AllocateProducerIds), as in Kafka.

    The next block is fetched when a tenth of the current one is left, so InitProducerId
    rarely waits; with no id at hand it answers COORDINATOR_LOAD_IN_PROGRESS (retriable) while
    the block is fetched, as Kafka's RPCProducerIdManager does.
    """

    def __init__(self, fetch_block: Callable[[], Awaitable[tuple[int, int]]]) -> None:
        self.fetch_block = fetch_block
        self.next_id = 0
        self.block_end = 0
        self._pending: tuple[int, int] | None = None
        self._fetching: asyncio.Task[None] | None = None

    def allocate(self) -> int:
        if self.next_id >= self.block_end and self._pending is not None:
            (self.next_id, length), self._pending = self._pending, None
            self.block_end = self.next_id + length
        if self.block_end - self.next_id <= BLOCK_SIZE // 10:
            self.prefetch()
        if self.next_id >= self.block_end:
            raise KafkaError(ErrorCode.coordinator_load_in_progress, "waiting for a producer id block")
        producer_id = self.next_id
        self.next_id += 1
        return producer_id

    def prefetch(self) -> None:
        if self._pending is None and (self._fetching is None or self._fetching.done()):
            self._fetching = asyncio.get_running_loop().create_task(self._fetch())

    async def _fetch(self) -> None:
        try:
            self._pending = await self.fetch_block()
        except (ConnectionError, TimeoutError, KafkaError) as exc:
            log.warning("cannot get a producer id block from the controller: %s", exc)
