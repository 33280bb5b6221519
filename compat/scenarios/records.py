"""DeleteRecords: moving the log start offset (middle, to the end with -1, backwards, past
the end), unknown partitions and compacted topics."""

from __future__ import annotations

from typing import Any

from compat.clients.base import Rec
from compat.scenarios import BASE_TS, Run, scenario

D = {"admin.delete_records"}


def ten(run: Run, **topic: Any) -> str:
    t = run.topic(**topic)
    run.harness.put(t, [Rec(f"v{i}".encode(), f"k{i}".encode(), (), 0, BASE_TS + i) for i in range(10)])
    return t


@scenario("delete-records/middle", needs=D)
def middle(run: Run) -> Any:
    """Delete before offset 5 of 10: low watermark 5; earliest and latest after it."""
    t = ten(run)
    return {"delete": run.client.delete_records(t, 0, 5), "offsets": run.harness.offsets(t)}


@scenario("delete-records/to-high-watermark", needs=D)
def to_high_watermark(run: Run) -> Any:
    """Offset -1 means "up to the high watermark": everything goes, low watermark 10."""
    t = ten(run)
    return {"delete": run.client.delete_records(t, 0, -1), "offsets": run.harness.offsets(t)}


@scenario("delete-records/backwards", needs=D)
def backwards(run: Run) -> Any:
    """Deleting before 3 after deleting before 6 changes nothing and answers 6."""
    t = ten(run)
    return {"first": run.client.delete_records(t, 0, 6), "second": run.client.delete_records(t, 0, 3),
            "offsets": run.harness.offsets(t)}


@scenario("delete-records/past-high-watermark", needs=D)
def past_high_watermark(run: Run) -> Any:
    """Deleting before 11 of 10 records: OFFSET_OUT_OF_RANGE, nothing deleted."""
    t = ten(run)
    return {"delete": run.client.delete_records(t, 0, 11), "offsets": run.harness.offsets(t)}


@scenario("delete-records/unknown-partition", needs=D, clients=("kafka-python", "aiokafka", "confluent"))
def unknown_partition(run: Run) -> Any:
    """DeleteRecords on partition 4 of a one-partition topic. (The Java Admin client and the
    CLI wait for metadata naming the partition until their timeout, never asking the broker.)"""
    return run.client.delete_records(run.topic(), 4, 0)


@scenario("delete-records/compacted-topic", needs=D)
def compacted_topic(run: Run) -> Any:
    """cleanup.policy=compact (no delete): POLICY_VIOLATION."""
    t = ten(run, configs={"cleanup.policy": "compact"})
    return {"delete": run.client.delete_records(t, 0, 5), "offsets": run.harness.offsets(t)}
