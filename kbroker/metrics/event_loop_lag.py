"""kbroker's analogue of Kafka's request-handler idle ratio: how late the event loop runs a
timer. Kafka's RequestHandlerAvgIdlePercent falls as its handler threads fill up; kbroker answers
every request on one event loop, so a busy broker shows as timers that fire late. A probe sleeps
``PROBE_INTERVAL_S`` and records by how much it overslept."""

from __future__ import annotations

import asyncio

from prometheus_client import CollectorRegistry, Gauge, Histogram

PROBE_INTERVAL_S = 0.25
LAG_BUCKETS_S = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5)


class EventLoopLag:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.lag = Histogram("kbroker_event_loop_lag_seconds", "How late the event loop ran a "
                             f"{PROBE_INTERVAL_S} s timer (kbroker's request handler busy analogue)",
                             buckets=LAG_BUCKETS_S, registry=registry)
        self.last = Gauge("kbroker_event_loop_lag_last_seconds", "The event loop's lag at the last probe",
                          registry=registry)
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._probe())

    def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()

    async def _probe(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            due = loop.time() + PROBE_INTERVAL_S
            await asyncio.sleep(PROBE_INTERVAL_S)
            late = max(loop.time() - due, 0.0)
            self.lag.observe(late)
            self.last.set(late)
