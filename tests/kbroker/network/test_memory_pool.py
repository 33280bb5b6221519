"""MemoryPool (queued.max.request.bytes): Kafka's non-strict allocation, and waiters woken in
order once memory is released."""

from __future__ import annotations

import asyncio

from kbroker.network.memory_pool import MemoryPool


class Waiter:
    """Retries its allocation when woken, as a muted connection does."""

    def __init__(self, pool: MemoryPool, name: str, size: int, woken: list[str]) -> None:
        self.pool, self.name, self.size, self.woken = pool, name, size, woken

    def memory_available(self) -> None:
        if self.pool.try_allocate(self.size):
            self.woken.append(self.name)
        else:
            self.pool.wait(self)


def test_a_request_larger_than_what_is_left_is_granted_while_any_memory_is_left() -> None:
    pool = MemoryPool(1000)
    assert pool.try_allocate(600)
    assert pool.try_allocate(600)  # 400 left: granted, the pool is overdrawn
    assert pool.available == -200
    assert not pool.try_allocate(1)
    pool.release(600)
    assert pool.available == 400


def test_released_memory_wakes_waiters_in_order_until_it_is_used_up() -> None:
    async def main() -> list[list[str]]:
        pool = MemoryPool(1000)
        woken: list[str] = []
        assert pool.try_allocate(1000)
        for name in ("a", "b", "c"):
            pool.wait(Waiter(pool, name, 600, woken))
        rounds = []
        pool.release(1000)
        await asyncio.sleep(0)  # the waiters are woken from a callback of their own
        rounds.append(list(woken))  # a takes 600, b 600 (non-strict): c waits
        pool.release(600)
        await asyncio.sleep(0)
        rounds.append(list(woken))  # still -200 + 600 = 400 > 0: c gets in
        return rounds

    assert asyncio.run(main()) == [["a", "b"], ["a", "b", "c"]]


def test_a_cancelled_waiter_is_not_woken() -> None:
    async def main() -> list[str]:
        pool = MemoryPool(100)
        woken: list[str] = []
        assert pool.try_allocate(100)
        gone, staying = Waiter(pool, "gone", 10, woken), Waiter(pool, "staying", 10, woken)
        pool.wait(gone)
        pool.wait(staying)
        pool.cancel_wait(gone)
        pool.release(100)
        await asyncio.sleep(0)
        return woken

    assert asyncio.run(main()) == ["staying"]
