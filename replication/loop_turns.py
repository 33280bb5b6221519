"""LoopTurns: long metadata work (creating or deleting thousands of replicas) shares the loop.

Creating a replica's log touches the disk (a directory, ``partition.metadata``, an fsync or
two: about a millisecond); a topic of 5,000 partitions done in one go would stop every other
client for seconds. Work that walks many partitions calls ``maybe_yield`` between them and
gives the event loop a turn whenever it has run for ``budget_s`` since the last one.
"""

from __future__ import annotations

import asyncio
import time

TURN_BUDGET_S = 0.002


class LoopTurns:
    def __init__(self, budget_s: float = TURN_BUDGET_S) -> None:
        self.budget_s = budget_s
        self.turns = 0
        self._since = time.monotonic()

    async def maybe_yield(self) -> None:
        if time.monotonic() - self._since >= self.budget_s:
            await asyncio.sleep(0)
            self.turns += 1
            self._since = time.monotonic()
