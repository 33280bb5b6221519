"""Retention: records older than retention.ms and logs larger than retention.bytes are
deleted by the periodic check (log.retention.check.interval.ms=250 on both targets)."""

from __future__ import annotations

from typing import Any

from compat.clients.base import Rec
from compat.harness import wait_until
from compat.scenarios import BASE_TS, HOUR_MS, Run, scenario

RETENTION_WAIT_S = 20.0


@scenario("retention/time", needs={"admin.list_offsets", "consume"})
def retention_time(run: Run) -> Any:
    """retention.ms=6h and records a day old: the check deletes them all (the active segment
    is rolled first); the log then starts at the end, and a new record (2 h old, inside the
    retention) continues the offsets and stays."""
    t = run.topic(configs={"retention.ms": str(6 * HOUR_MS)})
    run.harness.put(t, [Rec(f"old{i}".encode(), None, (), 0, BASE_TS - 24 * HOUR_MS + i) for i in range(5)])
    emptied, offsets = wait_until(lambda: run.harness.offsets(t), lambda o: o[0] == 5, RETENTION_WAIT_S)
    after = {"earliest": run.client.list_offsets(t, 0, "earliest"), "latest": run.client.list_offsets(t, 0, "latest")}
    run.harness.put(t, [Rec(b"fresh", None, (), 0, BASE_TS)])
    return {"emptied": emptied, "offsets_seen": offsets, "after": after,
            "read": run.client.consume(t, [0], "earliest", until={0: 6})}  # fmt: skip


@scenario("retention/bytes", needs={"admin.list_offsets"})
def retention_bytes(run: Run) -> Any:
    """segment.bytes=1 MiB (Kafka 4's minimum), retention.bytes=1.5 MiB, ten 300 kB records
    one batch each: whole oldest segments go while the rest stays above the limit."""
    t = run.topic(configs={"segment.bytes": "1048576", "retention.bytes": "1572864"})
    run.harness.put(t, [Rec(bytes([65 + i]) * 300_000, None, (), 0, BASE_TS + i) for i in range(10)], sync=True)
    trimmed, offsets = wait_until(lambda: run.harness.offsets(t), lambda o: o[0] > 0, RETENTION_WAIT_S)
    return {"trimmed": trimmed, "offsets_seen": offsets,
            "earliest": run.client.list_offsets(t, 0, "earliest")}  # fmt: skip


@scenario("retention/ignores-compacted", needs={"admin.list_offsets"}, clients=("kafka-python", "confluent"))
def retention_ignores_compacted(run: Run) -> Any:
    """retention.ms does not delete from a compact-only topic; a sibling delete topic with the
    same old records is emptied (a bounded wait for the sibling proves a check ran)."""
    compacted = run.topic("compact", configs={"retention.ms": str(HOUR_MS), "cleanup.policy": "compact"})
    sibling = run.topic("delete", configs={"retention.ms": str(HOUR_MS)})
    old = [Rec(f"old{i}".encode(), f"k{i}".encode(), (), 0, BASE_TS - 24 * HOUR_MS + i) for i in range(5)]
    run.harness.put(compacted, old)
    run.harness.put(sibling, old)
    emptied, _ = wait_until(lambda: run.harness.offsets(sibling), lambda o: o[0] == 5, RETENTION_WAIT_S)
    return {"sibling_emptied": emptied, "compacted_earliest": run.client.list_offsets(compacted, 0, "earliest")}
