"""Tallies of a fuzz run, saved as JSON per target, and the markdown report of one or two targets.

A case ends in one outcome:

- ``ok``: answered, every error code in the answer is 0
- ``error``: answered with at least one non-zero error code (each code counted once per answer)
- ``silent``: an acks=0 Produce the broker processed without answering (as it should)
- ``closed``: the broker closed the connection without answering
- ``incomplete``: the size prefix announced more bytes than were sent and the broker neither
  answered nor closed (it waits for the rest, as it should)
- ``parked``: no answer within the hang timeout to a request that asked the broker to wait
  (a Fetch's max wait, a JoinGroup/SyncGroup waiting for other members)
- ``hang``: no answer and no close within the hang timeout, for no such reason
- ``crash``: the broker process died while the case was in flight (the first case to see it)
- ``bad answer``: an answer that does not decode, or carries another correlation id

``render`` puts targets side by side per API key (frames, each outcome, the commonest error
codes) with the run's checks: liveness failures, crashes, restarts, unexplained ERROR records,
"unexpected error" records per API, disk-invariant violations, peak RSS.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from kbroker.protocol.errors import ErrorCode

from kbroker.handlers import HANDLERS

OK, ERROR, SILENT, CLOSED, INCOMPLETE, PARKED, HANG, CRASH, BAD_ANSWER = (
    "ok", "error", "silent", "closed", "incomplete", "parked", "hang", "crash", "bad answer",
)  # fmt: skip
OUTCOMES = (OK, ERROR, SILENT, CLOSED, INCOMPLETE, PARKED, HANG, CRASH, BAD_ANSWER)
FAILURES = (HANG, CRASH, BAD_ANSWER)  # outcomes that are broker bugs whatever the request
SAMPLES_PER_KIND = 5
INCIDENTS_KEPT = 50
TOP_CODES = 4
TOP_FORMS = 5  # ERROR-record forms shown with a sample


def api_name(api_key: int) -> str:
    """Kafka's name of an API key kbroker serves ("produce" -> "Produce")."""
    module = HANDLERS[api_key].__name__.rsplit(".", 1)[-1]
    return "".join(part.capitalize() for part in module.split("_"))


def code_name(code: int) -> str:
    try:
        return ErrorCode(code).name.upper()
    except ValueError:
        return str(code)


@dataclass
class ApiTally:
    frames: int = 0
    outcomes: Counter[str] = field(default_factory=Counter)
    error_codes: Counter[int] = field(default_factory=Counter)
    slowest_s: float = 0.0  # the longest a broker took to answer


@dataclass
class TargetRun:
    """Everything one target's run produced; JSON-able (``save``/``load``)."""

    target: str
    seed: int
    frames: int = 0
    seconds: float = 0.0
    batches: int = 0
    apis: dict[int, ApiTally] = field(default_factory=dict)
    operators: dict[str, Counter[str]] = field(default_factory=dict)  # primary operator -> outcomes
    sources: Counter[str] = field(default_factory=Counter)  # recorded client or "generated"
    liveness_failures: list[dict[str, Any]] = field(default_factory=list)
    slowest_liveness_s: float = 0.0
    crashes: list[dict[str, Any]] = field(default_factory=list)
    restarts: int = 0
    restart_seconds: list[float] = field(default_factory=list)  # how long each restart took to listen
    aborted: str | None = None  # why the run ended before its last case, if it did
    unexplained_log: list[str] = field(default_factory=list)
    unexplained_log_count: int = 0
    explained_log: Counter[str] = field(default_factory=Counter)
    explained_log_samples: dict[str, list[str]] = field(default_factory=dict)
    disk_violations: list[str] = field(default_factory=list)
    bad_answers: list[str] = field(default_factory=list)  # the first few, with why
    effects_unknown: int = 0  # accepted answers kio could not decode (their disk effects not known)
    max_rss_mb: float = 0.0
    max_loop_lag_s: float = 0.0  # the fuzzer's own event loop, late by at most this
    check_seconds: float = 0.0  # spent on the checks between batches (and restarts)
    incidents: list[str] = field(default_factory=list)  # the first few failures, with wall-clock time
    samples: dict[str, list[int]] = field(default_factory=dict)  # "<API> <outcome>" -> case indices
    settings: dict[str, Any] = field(default_factory=dict)
    recorded_versions: dict[str, list[int]] = field(default_factory=dict)  # API key -> versions clients sent

    def tally(self, api_key: int, outcome: str, operators: tuple[str, ...], source: str, index: int,
              codes: list[int], context: str = "") -> None:  # fmt: skip
        api = self.apis.setdefault(api_key, ApiTally())
        api.frames += 1
        api.outcomes[outcome] += 1
        api.error_codes.update(set(c for c in codes if c != 0))
        self.operators.setdefault(operators[0] if operators else "none", Counter())[outcome] += 1
        self.sources[source] += 1
        self.frames += 1
        if outcome in FAILURES:
            samples = self.samples.setdefault(f"{api_name(api_key)} {outcome}", [])
            if len(samples) < SAMPLES_PER_KIND:
                samples.append(index)
            if len(self.incidents) < INCIDENTS_KEPT:
                when = time.strftime("%H:%M:%S")
                self.incidents.append(f"{when} case {index} {api_name(api_key)} {outcome} {context}".rstrip())

    def note_latency(self, api_key: int, seconds: float) -> None:
        api = self.apis.setdefault(api_key, ApiTally())
        api.slowest_s = max(api.slowest_s, seconds)

    def save(self, path: Path) -> None:
        # asdict() would rebuild each Counter from its (key, count) pairs, counting the pairs.
        raw = {f.name: getattr(self, f.name) for f in fields(self)}
        raw["apis"] = {k: {"frames": a.frames, "outcomes": dict(a.outcomes), "error_codes": dict(a.error_codes),
                           "slowest_s": a.slowest_s} for k, a in self.apis.items()}  # fmt: skip
        raw["operators"] = {k: dict(v) for k, v in self.operators.items()}
        path.write_text(json.dumps(raw, indent=1, sort_keys=True))

    @classmethod
    def load(cls, path: Path) -> TargetRun:
        raw = json.loads(path.read_text())
        run = cls(**{k: v for k, v in raw.items() if k not in ("apis", "operators")})
        run.apis = {int(k): ApiTally(v["frames"], Counter(v["outcomes"]), Counter({int(c): n for c, n in
                    v["error_codes"].items()}), v["slowest_s"]) for k, v in raw["apis"].items()}  # fmt: skip
        run.operators = {k: Counter(v) for k, v in raw["operators"].items()}
        run.sources = Counter(run.sources)
        run.explained_log = Counter(run.explained_log)
        return run

    def problems(self) -> list[str]:
        """What a CI slice fails on: crashes, hangs, bad answers, unanswered liveness probes,
        unexplained ERROR records, disk violations."""
        out = []
        for key, api in sorted(self.apis.items()):
            for outcome in FAILURES:
                if api.outcomes[outcome]:
                    cases = self.samples.get(f"{api_name(key)} {outcome}", [])
                    out.append(f"{api_name(key)}: {api.outcomes[outcome]} {outcome} (cases {cases})")
        out += [f"liveness: {({k: v for k, v in f.items() if k != 'log_tail'})}" for f in self.liveness_failures]
        out += [f"crash: {c['summary']}" for c in self.crashes]
        out += [f"unexplained ERROR: {e}" for e in self.unexplained_log]
        out += [f"disk: {v}" for v in self.disk_violations]
        out += [f"bad answer: {b}" for b in self.bad_answers]
        if self.aborted:
            out.append(f"run ended early: {self.aborted}")
        return out


def _cell(values: list[int]) -> str:
    return " / ".join(str(v) for v in values)


def _codes(api: ApiTally | None) -> str:
    if api is None or not api.error_codes:
        return "–"
    return ", ".join(f"{code_name(c)} {n}" for c, n in api.error_codes.most_common(TOP_CODES))


def _label(run: TargetRun, runs: list[TargetRun]) -> str:
    """The target's name, with its stretch of cases when the same target ran more than one."""
    if sum(r.target == run.target for r in runs) == 1:
        return run.target
    first = int(run.settings.get("first_case", 0))
    return f"{run.target} (cases {first:,}–{first + run.frames - 1:,})"


def render(runs: list[TargetRun], command: str) -> str:
    """The markdown report: per-API outcomes with the targets side by side ("a / b" cells)."""
    names = [_label(r, runs) for r in runs]
    lines = [
        f"# Protocol fuzzing: {' and '.join(names)}",
        "",
        f"Command: `{command}`",
        "",
        "| target | frames | wall time (checks) | frames/s | batches | liveness failures (> 1 s) | slowest probe | "
        "crashes | restarts | unexplained ERROR records | disk violations | peak RSS | fuzzer loop lag |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r, name in zip(runs, names, strict=True):
        rate = r.frames / r.seconds if r.seconds else 0.0
        lines.append(
            f"| {name} | {r.frames:,} | {r.seconds / 60:.1f} min ({r.check_seconds / 60:.1f}) | {rate:.0f} | "
            f"{r.batches} | "
            f"{len(r.liveness_failures)} | {r.slowest_liveness_s * 1000:.0f} ms | {len(r.crashes)} | {r.restarts} | "
            f"{r.unexplained_log_count} | {len(r.disk_violations)} | {r.max_rss_mb:.0f} MB | "
            f"{r.max_loop_lag_s * 1000:.0f} ms |"
        )
    lines += [
        "",
        f"Seed {runs[0].seed}; settings: `{json.dumps(runs[0].settings, sort_keys=True)}`. Outcomes are defined in "
        "`compat/fuzz/report.py`; each cell is " + " / ".join(names) + ". A case counts under the API of the frame "
        "it was made from; a mutated header can make it another API's request, so codes of other APIs appear.",
        "",
        "| API | key | frames | ok | error | silent | closed | incomplete | parked | hang | crash | bad answer | "
        "slowest answer (s) |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    keys = sorted(set().union(*(r.apis for r in runs)))
    for key in keys:
        tallies = [r.apis.get(key, ApiTally()) for r in runs]
        cells = [_cell([t.frames for t in tallies])] + [_cell([t.outcomes[o] for t in tallies]) for o in OUTCOMES]
        cells.append(" / ".join(f"{t.slowest_s:.1f}" for t in tallies))
        lines.append(f"| {api_name(key)} | {key} | " + " | ".join(cells) + " |")
    totals = [sum((t.outcomes for t in r.apis.values()), Counter()) for r in runs]
    lines.append("| **all** | | " + " | ".join(
        [_cell([r.frames for r in runs])] + [_cell([t[o] for t in totals]) for o in OUTCOMES]) + " | |")  # fmt: skip
    lines += ["", "Commonest error codes in answers (count of answers carrying each):", "",
              "| API | " + " | ".join(names) + " |", "|---|" + "---|" * len(runs)]  # fmt: skip
    for key in keys:
        lines.append(f"| {api_name(key)} | " + " | ".join(_codes(r.apis.get(key)) for r in runs) + " |")
    operators = sorted(set().union(*(r.operators for r in runs)))
    lines += ["", "Outcomes per mutation operator (the case's first operator; `none`: sent unmutated):", "",
              "| operator | " + " | ".join(f"{n}: frames, ok, error, closed" for n in names) + " |",
              "|---|" + "---|" * len(runs)]  # fmt: skip
    for op in operators:
        cells = []
        for r in runs:
            c = r.operators.get(op, Counter())
            cells.append(f"{sum(c.values())}, {c[OK]}, {c[ERROR]}, {c[CLOSED]}")
        lines.append(f"| {op} | " + " | ".join(cells) + " |")
    lines += ["", "Corpus: versions kbroker serves, and those with frames recorded from real clients (the rest are "
              "generated only):", "", "| API | served | recorded |", "|---|---|---|"]  # fmt: skip
    for key in keys:
        served = HANDLERS[key]
        recorded = runs[0].recorded_versions.get(str(key), [])
        lines.append(f"| {api_name(key)} | v{served.MIN_VERSION}–{served.MAX_VERSION} | "
                     f"{', '.join(f'v{v}' for v in recorded) or '–'} |")  # fmt: skip
    for r in runs:
        lines += ["", f"## {r.target}", ""]
        if r.aborted:
            lines += [f"**The run ended after {r.frames:,} frames:** {r.aborted}", ""]
        if r.restart_seconds:
            lines += [f"Restarts took {', '.join(f'{s:.0f} s' for s in r.restart_seconds)} to listen again.", ""]
        lines.append("Frames by source: " + ", ".join(f"{s} {n:,}" for s, n in sorted(r.sources.items())) + ".")
        if r.explained_log:
            intro = ("ERROR records naming the request they came from (\"unexpected error handling <API>\"; the "
                     "connection is closed)" if r.target == "kbroker" else
                     "ERROR records by form (Kafka logs at ERROR much of what a bad request causes)")  # fmt: skip
            lines += ["", intro + ": " + ", ".join(f"{api} {n:,}" for api, n in r.explained_log.most_common()) + "."]
            for api, _n in r.explained_log.most_common(TOP_FORMS):
                lines += ["", f"{api}, first record:", "", "```", r.explained_log_samples[api][0], "```"]
        for title, items in (("Failures as they happened", r.incidents),
                             ("Liveness failures", r.liveness_failures), ("Crashes", r.crashes),
                             ("Unexplained ERROR records", r.unexplained_log), ("Disk violations", r.disk_violations),
                             ("Bad answers", r.bad_answers)):
            if items:
                shown = [{k: v for k, v in i.items() if k != "log_tail"} if isinstance(i, dict) else i for i in items]
                lines += ["", f"{title}:", ""] + [f"- `{str(i)[:400]}`" for i in shown[:10]]
        if r.samples:
            lines += ["", "Cases to replay (`python -m compat.fuzz replay --seed S --case N`):", ""]
            lines += [f"- {kind}: {cases}" for kind, cases in sorted(r.samples.items())]
    return "\n".join(lines) + "\n"
