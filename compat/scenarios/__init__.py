"""The scenario registry, and ``Run``: what a scenario function gets to work with.

A scenario is a function ``fn(run) -> outcome`` registered with ``@scenario(id, needs=...)``.
It drives the client under test (``run.client``), uses ``run.harness`` for set-up and
waiting, and returns a plain JSON-able outcome. The same function runs once against Apache
Kafka and once against kbroker; the two outcomes must be equal after ``compat.normalise``.
``needs`` names the client features it uses (see ``compat.clients.base``); it runs with every
client that has them (``clients=`` narrows that where a scenario is costly).
"""

from __future__ import annotations

import importlib
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from compat.clients.base import Client, Rec
from compat.harness import Harness
from compat.targets import Target

Json = Any
HOUR_MS = 3_600_000
# Timestamps scenarios set on records: hours before now (older than the broker's
# log.message.timestamp checks allow for the future, far from the run's wall clock, inside the
# default 7-day retention), aligned to the hour so outcomes read easily.
BASE_TS = (int(time.time() * 1000) - 2 * HOUR_MS) // HOUR_MS * HOUR_MS


@dataclass(frozen=True)
class Scenario:
    id: str
    fn: Callable[[Run], Json]
    needs: frozenset[str]
    clients: tuple[str, ...] | None
    doc: str
    order: int  # registration order; restart scenarios register last


SCENARIOS: dict[str, Scenario] = {}
# Scenario modules in run order; restart (which stops and kills the targets) runs last.
MODULES = ("admin", "configs", "config_resources", "produce", "consume", "offsets", "records", "retention",
           "protocol", "transactions", "compaction", "groups", "storage_formats", "jbod", "versions", "feature_off",
           "quotas", "restart")


def scenario(
    id: str, needs: tuple[str, ...] | set[str] = (), clients: tuple[str, ...] | None = None, doc: str = ""
) -> Callable[[Callable[[Run], Json]], Callable[[Run], Json]]:
    """Register ``fn`` as scenario ``id``; its docstring (or ``doc``) says what it checks."""

    def register(fn: Callable[[Run], Json]) -> Callable[[Run], Json]:
        if id in SCENARIOS:
            raise ValueError(f"duplicate scenario id {id}")
        text = (doc or fn.__doc__ or "").strip()
        SCENARIOS[id] = Scenario(id, fn, frozenset(needs), clients, text, len(SCENARIOS))
        return fn

    return register


@dataclass
class Run:
    """One scenario run on one target with one client."""

    scenario: Scenario
    client: Client
    harness: Harness
    target: Target

    def name(self, suffix: str = "") -> str:
        """A topic name unique to (scenario, client); identical on both targets."""
        raw = f"c-{self.scenario.id}-{self.client.name}" + (f"-{suffix}" if suffix else "")
        return re.sub(r"[^a-zA-Z0-9-]", "-", raw)

    def topic(self, suffix: str = "", partitions: int = 1, configs: dict[str, str] | None = None) -> str:
        """Create (through the harness) and return a fresh topic for this run."""
        return self.harness.create(self.name(suffix), partitions, configs)

    def restart(self, crash: bool) -> None:
        """Restart the target (SIGKILL first when ``crash``), then drop the client's and the
        harness's long-lived connections, which a real application would see fail and renew."""
        self.target.restart(crash=crash)
        self.client.reconnect()
        self.harness.reconnect()

    def supports(self, feature: str) -> bool:
        return feature in self.client.FEATURES

    def ts(self, i: int) -> int | None:
        """The i-th scenario timestamp, or None when the client cannot set timestamps."""
        return BASE_TS + i * 1000 if self.supports("produce.timestamp") else None

    def recs(self, n: int, prefix: str = "v", keyed: bool = True, headers: bool = True, size: int = 0) -> list[Rec]:
        """n simple records: keys k<i>, values <prefix><i> (padded to ``size``), a header each."""
        out = []
        for i in range(n):
            value = f"{prefix}{i}".encode()
            if size:
                value = value.ljust(size, b".")
            out.append(Rec(value, f"k{i}".encode() if keyed else None,
                           ((("seq", str(i).encode()),) if headers else ()), 0, self.ts(i)))  # fmt: skip
        return out


def ordered() -> list[Scenario]:
    """All scenarios (importing every scenario module), in registration order."""
    for module in MODULES:
        importlib.import_module(f"compat.scenarios.{module}")
    return sorted(SCENARIOS.values(), key=lambda s: s.order)
