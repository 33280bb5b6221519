"""ManualClock: time that moves only when a test says so (Kafka's MockTime)."""

from __future__ import annotations


class ManualClock:
    def __init__(self, wall_ms: int = 1_700_000_000_000, monotonic: float = 0.0) -> None:
        self._wall_ms = wall_ms
        self._monotonic = monotonic

    def wall_ms(self) -> int:
        return self._wall_ms

    def monotonic(self) -> float:
        return self._monotonic

    def advance(self, ms: int) -> None:
        self._wall_ms += ms
        self._monotonic += ms / 1000
