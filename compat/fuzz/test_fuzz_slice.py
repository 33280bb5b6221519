"""The CI slice of the protocol fuzzer: a fixed seed against kbroker, checked after every batch.

5,000 cases of seed 13 (every API key kbroker serves, recorded and generated frames, every
mutation operator including partition counts past Kafka's limit and size prefixes near
``socket.request.max.bytes``), in batches of 500 on 8 connections; about 15 s on an idle two-core
machine. Fails on a crash, a hang, an answer that does not parse, a Metadata probe not answered
within 1 s on a new connection after any batch, an ERROR record that names no request, or a
log change on disk no accepted request explains. Kafka is not in the slice: its JVM start and
its slower pace on closed connections (it logs each at ERROR with a stack trace) would take most
of the two minutes, and its own findings (a hang on AlterConfigs with a duplicated resource) are
the long run's report, not a check on kbroker.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from compat.fuzz.corpus import Corpus, load_recorded, served_versions
from compat.fuzz.mutators import Limits
from compat.fuzz.runner import Runner, RunSettings
from compat.targets import KbrokerTarget

SEED = 13
FRAMES = 5_000
BATCH = 500


@pytest.mark.timeout(240)
def test_fuzz_slice(tmp_path: Path) -> None:
    settings = RunSettings(seed=SEED, frames=FRAMES, batch=BATCH)
    runner = Runner(KbrokerTarget(tmp_path / "kbroker"), Corpus(SEED, load_recorded(), Limits()), settings)
    run = asyncio.run(runner.run())
    print(f"\nfuzz slice: {run.frames} frames in {run.seconds:.1f} s; 'unexpected error' records per API: "
          f"{dict(run.explained_log)}; slowest probe {run.slowest_liveness_s * 1000:.0f} ms")  # fmt: skip
    assert run.problems() == []
    assert run.frames == FRAMES and run.batches == FRAMES // BATCH and run.restarts == 0
    assert set(run.apis) == set(served_versions())
