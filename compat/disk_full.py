"""A full disk on a single node: what Apache Kafka 4.3.1 and kbroker do, and what they keep.

Issue 13's operator scenario with real clients, on both brokers with the same server.properties
(``compat.targets``), each on a tmpfs of its own mounted as its log dir (so this needs root).
Two confluent-kafka producers with acks=all write 10 KB records, each to a topic of its own,
until one of their deliveries fails because the 64 MiB tmpfs is full: a plain one without
retries (its delivery reports carry the broker's own answer, and it never writes a record
twice) and an idempotent one (it retries until ``message.timeout.ms``, the broker dropping
repeated batches). Segments are 4 MiB, so segments roll while the disk fills. Then:

- ``kbroker``: the plain producer writes single records until one is refused (a failed batch
  that is undone leaves room for a few), so that not even one record fits; now its attempts
  must be answered KAFKA_STORAGE_ERROR, and a consumer must read everything acknowledged. The
  tmpfs is grown in place (remount) and kbroker must resume by itself: 20 more records per topic
  are acknowledged and a consumer from offset 0 reaches the high watermark. Then SIGTERM,
  restart, read everything.
- ``kbroker kill -9``: the same up to the refused attempts, then SIGKILL while the idempotent
  producer retries a batch that cannot fit; grow the tmpfs, restart (recovery), read.
- ``kafka``: Kafka takes the failed log dir offline and, as it is its only one, stops; the run
  records the exit status, what the producers saw and what Kafka logged, then grows the tmpfs,
  restarts Kafka and reads everything.

Every read is checked against the acknowledgements (``compat.acked_records``: lost, duplicate,
corrupt). After the restart nothing may be lost, duplicated or corrupt, on either broker.

``python -m compat.disk_full`` (as root) runs the three side by side and prints, per run and
topic, records acknowledged, read back after the restart, lost, duplicates and corrupt, what the
producers saw and how the broker stopped; ``--kbroker-python`` runs kbroker with another
interpreter (another build). ``tests/end_to_end/test_disk_full.py`` asserts on the same runs.
"""

from __future__ import annotations

import argparse
import logging
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from compat.acked_records import (
    ACK_DEADLINE_S,
    CLIENT_LOG,
    PRODUCER_MODES,
    RecordingProducer,
    Tally,
    create_topics,
    fill_disk,
    read_back,
)
from compat.targets import KafkaTarget, KbrokerTarget

TMPFS_MIB = 64
GROWN_TMPFS_MIB = 128
RESUMED_RECORDS = 20
REFUSED_ATTEMPTS = 3  # produce attempts that must be refused while the disk is full (kbroker)
# Records the idempotent producer is retrying when kbroker is killed: 200 KB, far more than the
# room left once a single record no longer fits, so the retries cannot succeed.
RETRIED_AT_KILL = 20
# Same for both brokers. Rolls happen during the fill (4 MiB segments, about 16 for 64 MiB).
SETTINGS = {"log.segment.bytes": str(4 * 1024 * 1024)}
EXIT_DEADLINE_S = 30.0  # for Kafka to stop by itself once its log dir failed
LOG_LINES_KEPT = 20

RUNS = ("kafka", "kbroker", "kbroker-kill-9")
# The two process targets: both have a data_dir (the tmpfs goes there) and a log file.
Broker = KafkaTarget | KbrokerTarget


# --- the disk ---------------------------------------------------------------------------------


def can_mount() -> bool:
    """Whether this process may mount a tmpfs (root, and allowed to mount: not in every
    container), found out by mounting a small one on a scratch directory."""
    if os.geteuid() != 0 or shutil.which("mount") is None:
        return False
    with tempfile.TemporaryDirectory() as scratch:
        tried = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", scratch], capture_output=True)
        if tried.returncode == 0:
            subprocess.run(["umount", scratch], check=True)
        return tried.returncode == 0


@contextmanager
def tmpfs(path: Path, size_mib: int) -> Iterator[Path]:
    """A tmpfs of ``size_mib`` mounted at ``path`` for the duration (unmounted on the way out)."""
    path.mkdir(parents=True, exist_ok=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size_mib}m", "tmpfs", str(path)], check=True)
    try:
        yield path
    finally:
        subprocess.run(["umount", str(path)], check=True)


def grow_tmpfs(path: Path, size_mib: int) -> None:
    """Give the tmpfs at ``path`` room again, in place: files and open descriptors stay."""
    subprocess.run(["mount", "-o", f"remount,size={size_mib}m", str(path)], check=True)


# --- the runs ---------------------------------------------------------------------------------


@dataclass
class TopicOutcome:
    """What one producer's topic went through in one run."""

    mode: str
    acked_while_filling: int = 0
    acked_topping_up: int = 0  # single records acknowledged after the fill, until one was refused
    fill_failures: Counter[str] = field(default_factory=Counter)
    refused_while_full: list[str] = field(default_factory=list)  # outcomes of attempts while full
    failures_after_room: Counter[str] = field(default_factory=Counter)
    resumed: int = 0  # records acknowledged after room came back, before any restart
    read_while_full: Tally | None = None
    read_before_restart: Tally | None = None
    read_after_restart: Tally | None = None


@dataclass
class RunReport:
    """One broker's run: per-topic outcomes, how the broker stopped, what it logged."""

    name: str
    topics: dict[str, TopicOutcome] = field(default_factory=dict)
    stopped: str = ""
    exit_status: int | None = None
    killed_while_retrying: bool = False
    notable_log_lines: list[str] = field(default_factory=list)
    seconds: float = 0.0


@contextmanager
def running_on_tmpfs(broker: Broker) -> Iterator[Broker]:
    """``broker`` started with a fresh tmpfs as its log dir; stopped, and unmounted, after."""
    with tmpfs(broker.data_dir, TMPFS_MIB):
        try:
            broker.start()
            yield broker
        finally:
            broker.close()


def start_producers(broker: Broker, report: RunReport) -> list[RecordingProducer]:
    """One producer per mode, each with its topic and a first record acknowledged: the
    idempotent one needs a producer id first, and without it the plain one fills the disk alone."""
    topics = {f"disk-full-{mode}": mode for mode in PRODUCER_MODES}
    create_topics(broker.bootstrap, list(topics))
    report.topics = {topic: TopicOutcome(mode) for topic, mode in topics.items()}
    producers = [RecordingProducer(broker.bootstrap, topic, mode) for topic, mode in topics.items()]
    for producer in producers:
        failures = producer.acknowledge_more(1, ACK_DEADLINE_S)
        if not producer.acked:
            raise RuntimeError(f"{broker.name} acknowledged no record of {producer.topic}: {dict(failures)}")
    return producers


def fill_then_read(broker: Broker, report: RunReport) -> list[RecordingProducer]:
    """kbroker's runs up to the full disk: producers started, disk filled until not even one
    record fits, everything read."""
    producers = start_producers(broker, report)
    fill_and_record(producers, report)
    plain = producers[0]
    report.topics[plain.topic].acked_topping_up = plain.top_up()
    record_reads(read_back(broker.bootstrap, producers), report, "read_while_full")
    return producers


def fill_and_record(producers: list[RecordingProducer], report: RunReport) -> None:
    """Fill the disk; note each topic's failed deliveries and what was acknowledged before."""
    for topic, failures in fill_disk(producers).items():
        report.topics[topic].fill_failures = failures
    for p in producers:
        report.topics[p.topic].acked_while_filling = len(p.acked)


def record_reads(reads: dict[str, Tally], report: RunReport, phase: str) -> None:
    """Keep each topic's read as its outcome's ``phase`` (read_while_full, ...)."""
    for topic, read in reads.items():
        setattr(report.topics[topic], phase, read)


# What kbroker logs about a failed write, a recovery or a truncation.
KBROKER_NOTABLE = r" (WARNING|ERROR) |recovery|truncat"
# What Kafka logs about a failed log dir and its stop.
KAFKA_NOTABLE = r" (ERROR|FATAL) |[Oo]ffline|[Hh]alt|[Ss]hut ?down broker|No space"


def notable_lines(broker: Broker, pattern: str) -> list[str]:
    """The first lines of the broker's log matching ``pattern``, shortened; of lines differing
    only in numbers (timestamps, offsets) the first."""
    lines: list[str] = []
    kinds: set[str] = set()
    for line in broker.log.read_text(errors="replace").splitlines():
        kind = re.sub(r"\d+", "#", line)
        if re.search(pattern, line) and kind not in kinds:
            kinds.add(kind)
            lines.append(line[:300])
            if len(lines) == LOG_LINES_KEPT:
                break
    return lines


def run_kbroker(workdir: Path, kbroker_python: str) -> RunReport:
    """Full disk, reads and refused writes while full, room again, resume, SIGTERM, restart."""
    report = RunReport("kbroker")
    started = time.monotonic()
    with running_on_tmpfs(KbrokerTarget(workdir, python=kbroker_python, extra=SETTINGS)) as broker:
        producers = fill_then_read(broker, report)
        plain = producers[0]
        report.topics[plain.topic].refused_while_full = [plain.attempt() for _ in range(REFUSED_ATTEMPTS)]
        grow_tmpfs(broker.data_dir, GROWN_TMPFS_MIB)
        for p in producers:
            before = len(p.acked)
            report.topics[p.topic].failures_after_room = p.acknowledge_more(RESUMED_RECORDS, ACK_DEADLINE_S)
            report.topics[p.topic].resumed = len(p.acked) - before
        record_reads(read_back(broker.bootstrap, producers), report, "read_before_restart")
        assert broker.proc is not None
        process = broker.proc
        broker.stop()
        report.exit_status = process.returncode
        report.stopped = f"SIGTERM, exit status {process.returncode}"
        broker.start()
        record_reads(read_back(broker.bootstrap, producers), report, "read_after_restart")
        report.notable_log_lines = notable_lines(broker, KBROKER_NOTABLE)
    report.seconds = time.monotonic() - started
    return report


def run_kbroker_kill_9(workdir: Path, kbroker_python: str) -> RunReport:
    """Full disk, kill -9 while produce attempts are being refused, room again, restart."""
    report = RunReport("kbroker-kill-9")
    started = time.monotonic()
    with running_on_tmpfs(KbrokerTarget(workdir, python=kbroker_python, extra=SETTINGS)) as broker:
        producers = fill_then_read(broker, report)
        plain, idempotent = producers
        for _ in range(RETRIED_AT_KILL):
            idempotent.produce_one()
        report.topics[plain.topic].refused_while_full = [plain.attempt() for _ in range(REFUSED_ATTEMPTS)]
        report.killed_while_retrying = idempotent.outstanding() == RETRIED_AT_KILL
        broker.kill()
        report.stopped = "kill -9"
        for p in producers:
            p.abandon()
        grow_tmpfs(broker.data_dir, GROWN_TMPFS_MIB)
        broker.start()
        record_reads(read_back(broker.bootstrap, producers), report, "read_after_restart")
        report.notable_log_lines = notable_lines(broker, KBROKER_NOTABLE)
    report.seconds = time.monotonic() - started
    return report


def run_kafka(workdir: Path) -> RunReport:
    """Full disk; Kafka takes its log dir offline and stops; room again, restart, read."""
    report = RunReport("kafka")
    started = time.monotonic()
    with running_on_tmpfs(KafkaTarget(workdir, extra=SETTINGS)) as broker:
        producers = start_producers(broker, report)
        fill_and_record(producers, report)
        assert broker.proc is not None
        process = broker.proc
        try:
            report.exit_status = process.wait(EXIT_DEADLINE_S)
            report.stopped = f"stopped by itself, exit status {report.exit_status}"
        except subprocess.TimeoutExpired:
            report.stopped = f"still running {EXIT_DEADLINE_S:.0f} s after the disk filled; stopped with SIGTERM"
            broker.stop()
        grow_tmpfs(broker.data_dir, GROWN_TMPFS_MIB)
        broker.start()
        record_reads(read_back(broker.bootstrap, producers), report, "read_after_restart")
        report.notable_log_lines = notable_lines(broker, KAFKA_NOTABLE)
    report.seconds = time.monotonic() - started
    return report


def run_side_by_side(workdir: Path, names: tuple[str, ...] = RUNS,
                     kbroker_python: str = sys.executable) -> dict[str, RunReport]:
    """The named runs (of ``RUNS``) at the same time, each in ``workdir/<name>`` on its own tmpfs;
    kbroker runs with the interpreter ``kbroker_python``."""
    runners: dict[str, Callable[[], RunReport]] = {
        "kafka": lambda: run_kafka(workdir / "kafka"),
        "kbroker": lambda: run_kbroker(workdir / "kbroker", kbroker_python),
        "kbroker-kill-9": lambda: run_kbroker_kill_9(workdir / "kbroker-kill-9", kbroker_python),
    }
    with ThreadPoolExecutor(len(names)) as pool:
        futures = {name: pool.submit(runners[name]) for name in names}
        return {name: future.result() for name, future in futures.items()}


# --- the report -------------------------------------------------------------------------------


def describe(report: RunReport) -> str:
    """The run as text: the figures table, then what happened on the way."""
    lines = [f"== {report.name} ({report.seconds:.1f} s): {report.stopped}"]
    if report.name == "kbroker-kill-9":
        lines.append(f"   killed while the idempotent producer was retrying: {report.killed_while_retrying}")
    lines.append(f"   {'topic':22} {'acked':>6} {'read back':>9} {'lost':>5} {'dups':>5} {'corrupt':>7}")
    for topic, outcome in report.topics.items():
        final = outcome.read_after_restart
        if final is not None:
            lines.append(f"   {topic:22} {final.acked:6} {final.read_back:9} {len(final.lost):5} "
                         f"{final.duplicates:5} {final.corrupt:7}")
    for topic, outcome in report.topics.items():
        lines.append(f"   {topic}: {outcome.acked_while_filling} acked while filling; "
                     f"failed deliveries {dict(outcome.fill_failures)}")
        if outcome.refused_while_full:
            lines.append(f"     then {outcome.acked_topping_up} single records acknowledged until one was refused; "
                         f"attempts while full: {outcome.refused_while_full}")
        if report.name == "kbroker":
            lines.append(f"     after room came back: {outcome.resumed} acknowledged, "
                         f"failed deliveries {dict(outcome.failures_after_room)}")
        for phase in ("read_while_full", "read_before_restart", "read_after_restart"):
            read = getattr(outcome, phase)
            if read is not None:
                lines.append(f"     {phase.replace('_', ' ')}: {read.summary()}")
    lines += [f"   log: {line}" for line in report.notable_log_lines]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", default=",".join(RUNS), help=f"comma-separated, of {', '.join(RUNS)}")
    parser.add_argument("--kbroker-python", default=sys.executable, help="interpreter that runs kbroker")
    parser.add_argument("--workdir", type=Path, help="keep the brokers' logs here (default: a temp dir)")
    args = parser.parse_args(argv)
    names = tuple(args.runs.split(","))
    if unknown := set(names) - set(RUNS):
        parser.error(f"unknown runs: {', '.join(sorted(unknown))}")
    if not can_mount():
        print("cannot mount a tmpfs here (needs root, and a host or container that allows mounts)", file=sys.stderr)
        return 2
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s %(message)s")
    CLIENT_LOG.setLevel(logging.CRITICAL)  # a stopped broker makes every client log each reconnect
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="disk-full-"))
    started = time.monotonic()
    reports = run_side_by_side(workdir, names, args.kbroker_python)
    for report in reports.values():
        print(describe(report))
    print(f"{len(names)} runs side by side in {time.monotonic() - started:.1f} s; logs under {workdir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
