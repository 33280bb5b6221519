"""Restarts: what a client reads after the node is killed (SIGKILL) or stopped (SIGTERM) and
started again on the same data. These run last: they take each target down."""

from __future__ import annotations

from typing import Any

from compat.scenarios import Run, scenario
from compat.scenarios.produce import read_all


@scenario("restart/after-crash", needs={"produce", "consume", "admin.describe_configs"},
          clients=("kafka-python", "java"))
def after_crash(run: Run) -> Any:
    """Acknowledged (acks=all) records and topic configs survive kill -9 and restart."""
    t = run.topic(partitions=2, configs={"retention.ms": "86400000"})
    records = run.recs(20)
    records = [r.__class__(r.value, r.key, r.headers, i % 2, r.timestamp) for i, r in enumerate(records)]
    produced = run.client.produce(t, records, acks="all")
    run.restart(crash=True)
    run.harness.wait_topic(t, 2)
    return {"produce": produced, "read": read_all(run, t, partitions=2),
            "configs": run.client.describe_configs("topic", t, keys=["retention.ms"])}


@scenario("restart/after-clean-stop", needs={"produce", "consume"}, clients=("kcat",))
def after_clean_stop(run: Run) -> Any:
    """Records survive a clean stop (SIGTERM) and restart; producing continues the offsets."""
    t = run.topic()
    first = run.client.produce(t, run.recs(5))
    run.restart(crash=False)
    run.harness.wait_topic(t, 1)
    second = run.client.produce(t, run.recs(2, prefix="again"))
    return {"produce": [first, second], "read": read_all(run, t)}
