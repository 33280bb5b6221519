"""Per-topic throughput samples for the console's sparklines.

A sample is, per topic, the sum over this broker's replicas of the log end offset (records and
markers appended) and of the log size in bytes, taken when the page asks (at most once per
``MIN_INTERVAL_S``), so nothing runs while nobody looks; the rate between two samples is
what the page draws. Only the last ``KEEP`` samples are kept.
"""

from __future__ import annotations

import time
from collections import deque
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kbroker.node.broker import Broker

JSON = dict[str, Any]
KEEP = 120
MIN_INTERVAL_S = 0.5


class ThroughputSampler:
    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.samples: deque[tuple[float, dict[str, tuple[int, int]]]] = deque(maxlen=KEEP)

    def _take(self) -> None:
        totals: dict[str, tuple[int, int]] = {}
        for (topic, _index), partition in self.broker.replica_manager.partitions.items():
            records, size = totals.get(topic, (0, 0))
            totals[topic] = (records + partition.log_end_offset, size + partition.log.size_in_bytes)
        self.samples.append((time.time(), totals))

    def series(self) -> JSON:
        """Per topic: (time, records/s, bytes/s) between consecutive samples."""
        if not self.samples or time.time() - self.samples[-1][0] >= MIN_INTERVAL_S:
            self._take()
        out: dict[str, list[list[float]]] = {}
        pairs = list(zip(list(self.samples)[:-1], list(self.samples)[1:], strict=True))
        for (t0, before), (t1, after) in pairs:
            elapsed = max(t1 - t0, 1e-3)
            for topic, (records, size) in after.items():
                old_records, old_size = before.get(topic, (records, size))
                out.setdefault(topic, []).append(
                    [round(t1, 3), max(records - old_records, 0) / elapsed, max(size - old_size, 0) / elapsed])
        return {"topics": out, "this_broker": self.broker.node_id}
