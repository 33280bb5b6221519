"""Leader failover on a 3-broker cluster loses, duplicates and reorders nothing (fault matrix M2/M3, short).

Run on the session's shared clusters (conftest.py): real Apache Kafka 4.3.1 (the positive
control: the harness must report a clean run there) and kbroker.
``compat.failover.run_failover`` keeps idempotent acks=all producers writing unique values to
topic ``failover`` (RF 3, 6 partitions, min.insync.replicas=2) while the
leader of a random partition is SIGKILLed and restarted three times, then SIGSTOPped for 4 s and
SIGCONTed once. Every partition must show a live leader on every surviving broker within 5 s of
each failure, the victim must leave every ISR while it is down or frozen, writes to the
partitions the victim led must be accepted again, the ISR must be back to 3 after each restart,
and the final read_committed drain must show 0 lost acknowledged values, 0 duplicates and 0
acknowledged values away from their acknowledged offset. The seed is printed;
``KBROKER_FAILOVER_SEED=<n>`` replays a schedule. ``test_checker_reports_each_anomaly`` feeds
the checker a hand-made history with one of each anomaly (its negative control).
"""

from __future__ import annotations

import json
import os
import random
from pathlib import Path

import pytest

from compat.cluster import Cluster
from compat.failover import Send, check, one_line, run_failover

KILLS = 3
PAUSES = 1
PAUSE_S = 4.0
LEADER_WITHIN_S = 5.0


def _seed() -> int:
    fixed = os.environ.get("KBROKER_FAILOVER_SEED")
    return int(fixed) if fixed else random.SystemRandom().randrange(2**32)


@pytest.mark.timeout(600)
def test_leader_failover_loses_nothing(cluster: Cluster, tmp_path: Path) -> None:
    seed = _seed()
    print(f"failover seed {seed} on {cluster.name}")
    summary = run_failover(
        cluster, kills=KILLS, pauses=PAUSES, pause_s=PAUSE_S, seed=seed, out=tmp_path / "failover.json"
    )
    print(one_line(summary))
    faults = json.dumps(summary["faults"], indent=1)
    assert (summary["kills"], summary["pauses"]) == (KILLS, PAUSES), faults
    for fault in summary["faults"]:
        assert fault["leader_s"] is not None and fault["leader_s"] <= LEADER_WITHIN_S, faults
        assert fault["isr_shrink_s"] is not None, faults  # the victim left every ISR while it was gone
        assert fault["probe_s"] is not None, faults
        assert fault["isr_s"] is not None, faults
    assert summary["ok"] > 0
    examples = json.dumps(summary.get("examples", {}))
    assert summary["lost"] == 0, examples
    assert summary["duplicates"] == 0, examples
    assert summary["inconsistent"] == 0, examples
    assert summary["nonmonotonic"] == 0, examples
    assert summary["failed_but_read"] == 0, examples
    assert summary["unexpected"] == 0, examples


def test_checker_reports_each_anomaly() -> None:
    """The checker itself, on a hand-made history: each anomaly is found and named (negative control)."""
    sends = [
        Send(0, "p-1", 0, "ok", 0),  # read where acknowledged: fine
        Send(1, "p-1", 0, "ok", 1),  # never read: lost
        Send(2, "p-1", 0, "ok", 2),  # read at offset 3 instead: inconsistent
        Send(3, "p-1", 1, "ok", 5),
        Send(4, "p-1", 1, "ok", 4),  # lower offset than an earlier send of the session: nonmonotonic
        Send(5, "p-2", 1, "fail", None, "NOT_ENOUGH_REPLICAS"),  # definite failure, yet read
        Send(6, "p-2", 1, "info", None, "_MSG_TIMED_OUT"),  # indefinite, read twice: duplicate
        Send(7, "p-3", 2, "ok", None),  # acknowledged without an offset (librdkafka's implicit ack): fine
        Send(8, "p-3", 2, "ok", 2),
        Send(9, "p-3", 2, "ok", None),  # no offset, read before the session's earlier send: nonmonotonic
    ]
    read = {(0, 0): 0, (0, 3): 2, (1, 4): 4, (1, 5): 3, (1, 6): 5, (1, 7): 6, (1, 8): 6, (1, 9): 99,
            (2, 0): 9, (2, 1): 7, (2, 2): 8}  # fmt: skip
    assert check(sends, read) == {
        "lost": [1],
        "duplicates": [6],
        "inconsistent": [2],
        "nonmonotonic": [4, 9],
        "failed_but_read": [5],
        "unexpected": [99],
    }
