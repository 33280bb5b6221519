"""One compat session: both targets started once, client adapters per (client, target), and
running a scenario on both targets to compare the normalised outcomes.

``CompatSession.run_pair(scenario, client)`` runs the scenario against Apache Kafka and then
against kbroker (each with its own adapter instance of the same client stack), normalises
both outcomes (``compat.normalise``) and returns a ``PairResult`` whose ``diff`` is a unified
diff of the two JSON documents. Every result is kept in ``results`` for the report.
"""

from __future__ import annotations

import difflib
import json
import os
import threading
import time
import traceback
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from compat.clients import CLIENTS
from compat.clients.base import Client
from compat.harness import Harness
from compat.normalise import Context, normalise, normalise_pair
from compat.scenarios import Run, Scenario, ordered
from compat.targets import KbrokerTarget, Target, kafka_target

TARGETS = ("kafka", "kbroker")


@dataclass
class TargetRun:
    outcome: Any  # normalised outcome (None when the scenario raised)
    error: str | None  # traceback when the scenario raised on this target
    seconds: float


@dataclass
class PairResult:
    scenario: str
    client: str
    status: str  # "identical" | "diff" | "error"
    kafka: TargetRun
    kbroker: TargetRun
    diff: str

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def items() -> list[tuple[Scenario, str]]:
    """Every (scenario, client) pair the suite runs: clients whose features cover the needs."""
    return [
        (s, name)
        for s in ordered()
        for name, cls in CLIENTS.items()
        if s.needs <= cls.FEATURES and (s.clients is None or name in s.clients)
    ]


def render(value: Any) -> list[str]:
    return json.dumps(value, indent=1, sort_keys=True, ensure_ascii=False).splitlines()


class Slot:
    """One target with its harness and lazily created client adapters."""

    def __init__(self, target: Target, workdir: Path) -> None:
        self.target = target
        self.workdir = workdir
        self.harness: Harness | None = None
        self.cluster_id = ""
        self.clients: dict[str, Client] = {}

    def start(self) -> None:
        self.target.start()
        self.harness = Harness(self.target.bootstrap, self.workdir / "harness")
        self.cluster_id = self.harness.cluster_id()

    def client(self, name: str) -> Client:
        if name not in self.clients:
            self.clients[name] = CLIENTS[name](self.target.bootstrap, self.workdir / name)
        return self.clients[name]

    def close(self) -> None:
        for client in [*self.clients.values(), *([self.harness] if self.harness is not None else [])]:
            try:
                client.close()
            except Exception:  # a client that cannot close cleanly must not keep the targets up
                traceback.print_exc()
        self.target.close()


def compare(kafka: TargetRun, kbroker: TargetRun) -> tuple[str, str]:
    """("error", who raised what) | ("identical", "") | ("diff", the unified diff of the outcomes)."""
    if kafka.error or kbroker.error:
        return "error", "\n".join(f"--- {name} raised:\n{run.error}" for name, run in
                                   (("kafka", kafka), ("kbroker", kbroker)) if run.error)  # fmt: skip
    if kafka.outcome == kbroker.outcome:
        return "identical", ""
    return "diff", "\n".join(difflib.unified_diff(render(kafka.outcome), render(kbroker.outcome),
                                                  "kafka", "kbroker", lineterm=""))  # fmt: skip


def start_side_by_side(starts: Sequence[Callable[[], None]], close: Callable[[], None]) -> None:
    """Run every start at once, each in its own thread; if any fails, ``close`` and raise the first error."""
    errors: list[BaseException] = []

    def start(step: Callable[[], None]) -> None:
        try:
            step()
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=start, args=(step,)) for step in starts]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        close()
        raise errors[0]


class CompatSession:
    def __init__(self, workdir: Path) -> None:
        workdir.mkdir(parents=True, exist_ok=True)
        self.slots = {
            "kafka": Slot(kafka_target(workdir / "kafka"), workdir / "kafka-clients"),
            "kbroker": Slot(KbrokerTarget(workdir / "kbroker"), workdir / "kbroker-clients"),
        }
        self.results: list[PairResult] = []

    def start(self) -> None:
        """Start both targets at once (Kafka's JVM takes a few seconds)."""
        start_side_by_side([slot.start for slot in self.slots.values()], self.close)

    def run_on(self, target: str, scenario: Scenario, client: str) -> TargetRun:
        slot = self.slots[target]
        assert slot.harness is not None
        run = Run(scenario, slot.client(client), slot.harness, slot.target)
        started, t0 = int(time.time() * 1000), time.monotonic()
        try:
            raw = json.loads(json.dumps(scenario.fn(run)))  # must be plain JSON
            error = None
        except Exception:
            raw, error = None, traceback.format_exc()
        ctx = Context(slot.target.bootstrap, slot.cluster_id, (started, int(time.time() * 1000)))
        return TargetRun(normalise(raw, ctx), error, round(time.monotonic() - t0, 3))

    def run_pair(self, scenario: Scenario, client: str) -> PairResult:
        """Run on both targets (at the same time: each has its own adapter, harness and
        processes; ``COMPAT_SERIAL=1`` runs them one after the other) and compare."""
        if os.environ.get("COMPAT_SERIAL") == "1":
            kafka = self.run_on("kafka", scenario, client)
            kbroker = self.run_on("kbroker", scenario, client)
        else:
            with ThreadPoolExecutor(2, thread_name_prefix="compat") as pool:
                on_kafka = pool.submit(self.run_on, "kafka", scenario, client)
                on_kbroker = pool.submit(self.run_on, "kbroker", scenario, client)
                kafka, kbroker = on_kafka.result(), on_kbroker.result()
        kafka.outcome, kbroker.outcome = normalise_pair(kafka.outcome, kbroker.outcome)
        status, diff = compare(kafka, kbroker)
        result = PairResult(scenario.id, client, status, kafka, kbroker, diff)
        self.results.append(result)
        return result

    def write_results(self, path: Path) -> None:
        path.write_text(json.dumps([r.to_json() for r in self.results], indent=1, ensure_ascii=False))

    def close(self) -> None:
        for slot in self.slots.values():
            slot.close()
