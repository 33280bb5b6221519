"""The controller quorum's Raft core survives a fixed range of simulated seeds without a safety or liveness violation.

Each seed runs 3 or 5 voters and an observer through message delay, loss, duplication and reordering,
crashes and restarts, partitions and leader resignations (see `tests/replication/raft_sim.py`). The range is
sized to stay under ~45 s on a 2-core machine; run more with `python -m tests.replication.raft_sim`.
"""

from __future__ import annotations

import pytest

from tests.replication.raft_sim import run_seeds

SEEDS = 2500
CHUNK = 250


@pytest.mark.parametrize("start", range(0, SEEDS, CHUNK))
def test_seeds_hold_every_invariant(start: int) -> None:
    violations = run_seeds(start, CHUNK).violations
    if violations:
        first = violations[0]
        seeds = " ".join(str(v.seed) for v in violations)
        pytest.fail(f"failing seeds: {seeds}\n{first.report()}\nreplay: python -m tests.replication.raft_sim "
                    f"--start {first.seed} --seeds 1", pytrace=False)
