"""MemoryPool: ``queued.max.request.bytes``, the memory all connections' requests share.

A connection takes a request's declared size from the pool as soon as it has read the size
prefix, and gives it back once the request has been handled (or the connection closes first).
When the pool is exhausted, a connection whose next request cannot get memory stops being
read ("muted", as Kafka says) and waits in line; released memory wakes the waiting
connections in the order they started waiting.

Kafka's semantics, including the non-strict allocation its socket server uses: a request is
granted while *any* memory is left, even if it is larger than what is left, so the pool can be
overdrawn by at most one request (``socket.request.max.bytes``, which Kafka requires to be no
larger than the pool). Kafka's default -1 (any value <= 0) means no pool: nothing is counted.
"""

from __future__ import annotations

import asyncio
import collections
from typing import Protocol


class MemoryWaiter(Protocol):
    def memory_available(self) -> None:
        """Called when the pool has memory again; the waiter retries its allocation."""


class MemoryPool:
    def __init__(self, size: int) -> None:
        self.size = size
        self.available = size
        self._waiters: collections.deque[MemoryWaiter] = collections.deque()
        self._wake_scheduled = False

    def try_allocate(self, nbytes: int) -> bool:
        """Take ``nbytes`` if any memory is left (non-strict); False if the pool is exhausted."""
        if self.available <= 0:
            return False
        self.available -= nbytes
        return True

    def release(self, nbytes: int) -> None:
        self.available += nbytes
        if self._waiters and self.available > 0 and not self._wake_scheduled:
            # Woken from a callback of their own, never from inside the releasing connection's code.
            self._wake_scheduled = True
            asyncio.get_running_loop().call_soon(self._wake)

    def wait(self, waiter: MemoryWaiter) -> None:
        """``waiter.memory_available()`` is called once memory has been released."""
        self._waiters.append(waiter)

    def cancel_wait(self, waiter: MemoryWaiter) -> None:
        if waiter in self._waiters:
            self._waiters.remove(waiter)

    def _wake(self) -> None:
        self._wake_scheduled = False
        while self._waiters and self.available > 0:
            self._waiters.popleft().memory_available()
