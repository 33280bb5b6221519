"""Clock: the one source of time for a node, given to every part that needs it.

Kafka passes a ``Time`` to its components so that tests can move time by hand; the Raft core here
already takes ``now_ms`` as an argument. Everything else takes a ``Clock`` from its composition
root (``kbroker.node``) instead of calling ``time.time()`` itself: ``SYSTEM_CLOCK`` in a running
node, a manual clock (``tests/support/clock.py``) in a test that must cross a retention or
session deadline without waiting for it.

Two kinds of time, as in Kafka: wall-clock milliseconds (record timestamps, retention by time,
anything written to disk or sent to a client) and a monotonic clock (timeouts and durations,
which must not jump when the wall clock is set).
"""

from __future__ import annotations

import time
from typing import Protocol


class Clock(Protocol):
    def wall_ms(self) -> int:
        """Milliseconds since the epoch (what Kafka's ``time.milliseconds()`` is)."""
        ...

    def monotonic(self) -> float:
        """Seconds on a clock that never goes back (what Kafka's ``time.nanoseconds()`` is for)."""
        ...


class SystemClock:
    def wall_ms(self) -> int:
        return int(time.time() * 1000)

    def monotonic(self) -> float:
        return time.monotonic()


SYSTEM_CLOCK = SystemClock()

