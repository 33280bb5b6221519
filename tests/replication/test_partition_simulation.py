"""Partition replication (Partition, ReplicaFetcher, ReplicaManager, the controller's ISR and election
rules) survives a fixed range of simulated seeds without a safety or liveness violation.

Each seed runs three brokers on real logs and one controller through message delay, loss and
reordering, broker crashes, controlled shutdowns and restarts, and network partitions between any
of them (see `tests/replication/partition_sim.py`). The range is sized for about 15 s of CPU on a 2-core
machine; run more with `python -m tests.replication.partition_sim`.
"""

from __future__ import annotations

import pytest

from tests.replication.partition_sim import run_seed, run_seeds

SEEDS = 300
CHUNK = 50


@pytest.mark.parametrize("start", range(0, SEEDS, CHUNK))
def test_seeds_hold_every_invariant(start: int) -> None:
    result = run_seeds(start, CHUNK)
    if result.violations:
        first = result.violations[0]
        seeds = " ".join(str(v.seed) for v in result.violations)
        pytest.fail(f"failing seeds: {seeds}\n{first.report()}\nreplay: python -m tests.replication.partition_sim "
                    f"--start {first.seed} --seeds 1", pytrace=False)
    assert result.acked > 0  # the seeds did acknowledge writes for the invariants to guard


def test_a_seed_replays_identically() -> None:
    """A failing seed is only useful if it fails again: one seed, run twice, takes the same steps."""
    first, second = run_seed(7), run_seed(7)
    assert (first.steps, first.acked, list(first.trace)) == (second.steps, second.acked, list(second.trace))
