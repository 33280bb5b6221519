"""``python -m compat.fuzz``: record the corpus, run the fuzzer, render its report, replay one case.

- ``record``: run the client stacks through the recording proxy and rewrite ``recorded.jsonl``
  (``--add``: only the client-specific steps, adding the API versions it lacks).
- ``run --target kbroker|kafka|both --frames N --seed S``: fuzz each target in turn (same
  corpus, same seed, same cases), save ``<target>.json``, the tail of ``<target>.log`` and
  ``report.md`` in ``--out``; exit
  status 1 when a target crashed, hung, answered garbage, failed a liveness probe, logged an
  unexplained ERROR or changed the disk behind an accepted request's back.
- ``report FILE.json...``: render saved runs side by side.
- ``replay --seed S --case N``: play one case alone against a fresh target and show what
  happened (the bytes, the outcome, what the broker logged).
"""

from __future__ import annotations

import argparse
import asyncio
import shlex
import signal
import sys
import tempfile
from pathlib import Path

from compat.fuzz import corpus, record
from compat.fuzz.mutators import DEFAULT_MAX_REQUEST_BYTES, Limits
from compat.fuzz.report import TargetRun, render
from compat.fuzz.runner import Runner, RunSettings, make_target

TARGETS = ("kbroker", "kafka")


def _run_settings(args: argparse.Namespace, frames: int, first_case: int = 0) -> RunSettings:
    limits = Limits(DEFAULT_MAX_REQUEST_BYTES, args.max_partitions, args.max_declared_size)
    return RunSettings(seed=args.seed, frames=frames, first_case=first_case, batch=args.batch, workers=args.workers,
                       hang_timeout_s=args.hang_timeout, limits=limits)  # fmt: skip


def cmd_record(args: argparse.Namespace) -> int:
    with tempfile.TemporaryDirectory(prefix="fuzz-record-") as tmp:
        recorded, failures = record.record(Path(tmp), args.clients, args.kbroker_python, extras_only=args.add)
    if args.add:
        before = corpus.load_recorded()
        recorded = record.add_to(before, recorded)
        note = f"{before.note}; then `python -m compat.fuzz record --add` (the client-specific steps) added "
        note += "the (API key, version) pairs it lacked"
    else:
        note = "recorded by `python -m compat.fuzz record` against kbroker"
    corpus.save_recorded(recorded, note)
    kinds = sorted({(f.api_key, f.api_version) for f in recorded.frames})
    print(f"{len(recorded.frames)} frames, {len(kinds)} (API key, version) pairs -> {corpus.RECORDED}")
    for line in failures:
        print(f"step failed (its traffic is kept): {line}")
    return 0


def cmd_run(args: argparse.Namespace) -> int:
    signal.signal(signal.SIGTERM, signal.default_int_handler)  # stop the brokers on the way out, as Ctrl-C does
    names = TARGETS if args.target == "both" else (args.target,)
    args.out.mkdir(parents=True, exist_ok=True)
    settings = _run_settings(args, args.frames, args.first_case)
    base = corpus.Corpus(args.seed, corpus.load_recorded(), settings.limits)
    runs = []
    with tempfile.TemporaryDirectory(prefix="fuzz-run-") as tmp:
        for name in names:
            target = make_target(name, Path(tmp) / name, args.kbroker_python)
            runner = Runner(target, base, settings, save_to=args.out / f"{name}.json")
            try:
                runs.append(asyncio.run(runner.run()))
            finally:
                keep_log_tail(target.log, args.out / f"{name}.log")
    command = "python -m compat.fuzz " + " ".join(shlex.quote(a) for a in sys.argv[1:])
    (args.out / "report.md").write_text(render(runs, command))
    print(f"report: {args.out / 'report.md'}")
    problems = [f"{r.target}: {p}" for r in runs for p in r.problems()]
    for line in problems:
        print(line)
    return 1 if problems else 0


def keep_log_tail(log: Path, to: Path, limit: int = 20 << 20) -> None:
    """The last ``limit`` bytes of a broker's log, kept for the findings (the run's directory goes)."""
    if not log.exists():
        return
    with open(log, "rb") as f:
        f.seek(max(0, log.stat().st_size - limit))
        to.write_bytes(f.read())


def cmd_report(args: argparse.Namespace) -> int:
    runs = [TargetRun.load(p) for p in args.results]
    text = render(runs, args.command)
    if args.out is None:
        print(text)
    else:
        args.out.write_text(text)
    return 0


def cmd_replay(args: argparse.Namespace) -> int:
    settings = _run_settings(args, frames=1, first_case=args.case)
    base = corpus.Corpus(args.seed, corpus.load_recorded(), settings.limits)
    case = base.case(args.case)
    print(f"case {case.index}: API {case.api_key} v{case.api_version} from {case.source}, "
          f"operators {case.mutated.operators}, size prefix {case.mutated.declared}, {len(case.mutated.frame)} bytes")
    print(case.mutated.wire.hex())
    with tempfile.TemporaryDirectory(prefix="fuzz-replay-") as tmp:
        target = make_target(args.target, Path(tmp) / args.target, args.kbroker_python)
        run = asyncio.run(Runner(target, base, settings).run())
        print(target.log.read_text(errors="replace")[-4000:])
    for key, api in run.apis.items():
        print(f"API {key}: {dict(api.outcomes)} codes {dict(api.error_codes)}")
    for line in run.problems():
        print(line)
    return 1 if run.problems() else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m compat.fuzz", description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)

    def target_options(p: argparse.ArgumentParser) -> None:
        p.add_argument("--seed", type=int, default=13)
        p.add_argument("--batch", type=int, default=1000, help="cases between two rounds of checks")
        p.add_argument("--workers", type=int, default=8, help="concurrent connections")
        p.add_argument("--hang-timeout", type=float, default=5.0, help="seconds without answer or close")
        p.add_argument("--max-partitions", type=int, help="leave out partition counts above this")
        p.add_argument("--max-declared-size", type=int, help="leave out size prefixes above this up to the maximum")
        p.add_argument("--kbroker-python", default=sys.executable, help="interpreter that runs kbroker")

    rec = commands.add_parser("record", help="record the clients' requests into recorded.jsonl")
    rec.add_argument("--clients", nargs="*", help="client stacks to run (default: all)")
    rec.add_argument("--kbroker-python", default=sys.executable)
    rec.add_argument("--add", action="store_true",
                     help="only the client-specific steps; add the (API key, version) pairs recorded.jsonl lacks")
    rec.set_defaults(handler=cmd_record)

    run = commands.add_parser("run", help="fuzz kbroker and/or Kafka and write the report")
    run.add_argument("--target", choices=(*TARGETS, "both"), default="kbroker")
    run.add_argument("--frames", type=int, default=10_000, help="cases per target")
    run.add_argument("--first-case", type=int, default=0, help="index of the first case (to replay a stretch)")
    run.add_argument("--out", type=Path, default=Path("fuzz-results"))
    target_options(run)
    run.set_defaults(handler=cmd_run)

    rep = commands.add_parser("report", help="render saved runs side by side")
    rep.add_argument("results", type=Path, nargs="+")
    rep.add_argument("--out", type=Path)
    rep.add_argument("--command", default="python -m compat.fuzz run ...")
    rep.set_defaults(handler=cmd_report)

    replay = commands.add_parser("replay", help="play one case alone against a fresh target")
    replay.add_argument("--case", type=int, required=True)
    replay.add_argument("--target", choices=TARGETS, default="kbroker")
    target_options(replay)
    replay.set_defaults(handler=cmd_replay)

    args = parser.parse_args(argv)
    return int(args.handler(args))


if __name__ == "__main__":
    sys.exit(main())
