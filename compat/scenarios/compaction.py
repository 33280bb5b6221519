"""Log compaction: a compacted topic keeps the latest record of every key at its original
offset once the cleaner has run (log.cleaner.backoff.ms=100 on both targets,
min.cleanable.dirty.ratio=0.01). Segments roll by record timestamps (segment.ms compares a
batch's timestamp with the segment's first, as Kafka does), so each round carries its own
timestamp one second after the previous round's: every round starts a segment whatever the
wall-clock pace of the produce requests."""

from __future__ import annotations

import time
from typing import Any

from compat.clients.base import Rec
from compat.harness import wait_until
from compat.scenarios import Run, scenario

COMPACTION_WAIT_S = 30.0
TOPIC_CONFIGS = {"cleanup.policy": "compact", "segment.ms": "1", "min.cleanable.dirty.ratio": "0.01"}


@scenario("compaction/latest-per-key", needs={"consume"}, clients=("kafka-python", "confluent"))
def compaction_latest_per_key(run: Run) -> Any:
    """Three rounds over ten keys (overwrites, two tombstones) and a last record that rolls the
    third round's segment: once compacted, the client reads each key once, with its latest
    value, at the offset it was written at. Tombstones are left out of the outcome: whether the
    cleaner has removed them yet (delete.retention.ms) is timing, not behaviour."""
    t = run.topic(configs=TOPIC_CONFIGS)
    base = int(time.time() * 1000) - 60_000
    rounds = [
        [Rec(b"v1-%d" % i, b"k%d" % i, timestamp=base) for i in range(10)],
        [Rec(b"v2-%d" % i, b"k%d" % i, timestamp=base + 1000) for i in range(5)]
        + [Rec(None, b"k5", timestamp=base + 1000), Rec(None, b"k6", timestamp=base + 1000)],
        [Rec(b"v3-%d" % i, b"k%d" % i, timestamp=base + 2000) for i in range(2)],
        [Rec(b"last", b"end", timestamp=base + 3000)],
    ]
    for records in rounds:
        run.harness.put(t, records, sync=True)
    end = sum(len(r) for r in rounds)

    def read() -> list[tuple[int, str, str | None]]:
        got = run.harness.consume(t, [0], "earliest", until={0: end})
        return [(r["offset"], r["key"], r["value"]) for r in got.get("records", [])]

    def compacted(records: list[tuple[int, str, str | None]]) -> bool:
        keys = [key for _offset, key, _value in records]
        return len(keys) == len(set(keys))

    met, records = wait_until(read, compacted, COMPACTION_WAIT_S)
    # What the client under test reads of the compacted log.
    seen = run.client.consume(t, [0], "earliest", until={0: end})
    return {
        "compacted": met,
        "live": [[o, k, v] for o, k, v in records if v is not None],
        "client_live": [[r["offset"], r["key"], r["value"]] for r in seen.get("records", []) if r["value"] is not None],
    }
