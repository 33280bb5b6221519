"""A full disk loses no acknowledged record, on Apache Kafka 4.3.1 and on kbroker (issue 13).

``compat.disk_full`` runs the scenario with real clients (its docstring has the details): the
log dir is a 64 MiB tmpfs, a plain and an idempotent confluent-kafka producer (acks=all) write
10 KB records until the disk is full, then the tmpfs is grown and the broker restarted. Three
runs go side by side once per module, each on its own tmpfs: Kafka; kbroker, which must resume
by itself and is then stopped with SIGTERM; kbroker killed with SIGKILL while writes are being
refused. The tests assert on their reports.

What holds on both brokers: after the restart, every acknowledged record is at its acknowledged
offset exactly once, its value intact. What each is specified to do on the way: Kafka takes its
only log dir offline and stops (its exit status, log and the producers' errors are printed);
kbroker goes further: while the disk is full it answers writes with KAFKA_STORAGE_ERROR and
serves every acknowledged record, and once there is room it acknowledges new records without a
restart and serves everything up to the high watermark.

Needs root where mounts are allowed (CI); skipped otherwise. ``pytest -s`` prints the figures.
"""

from __future__ import annotations

import pytest

from compat.disk_full import (
    REFUSED_ATTEMPTS,
    RESUMED_RECORDS,
    RUNS,
    RunReport,
    can_mount,
    describe,
    run_side_by_side,
)

# What a producer may see while kbroker's disk is full: the plain one gets the broker's answer,
# the idempotent one retries it until message.timeout.ms. Anything else (a disconnect, a
# sequence error) would mean kbroker handled the failed write badly.
KBROKER_FULL_DISK_ERRORS = {"plain": {"KAFKA_STORAGE_ERROR"}, "idempotent": {"_MSG_TIMED_OUT"}}


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, RunReport]:
    """The three runs' reports (they take about 20 s side by side, Kafka's the longest)."""
    if not can_mount():
        pytest.skip("mounts tmpfs: needs root, on a host or container that allows mounts")
    reports = run_side_by_side(tmp_path_factory.mktemp("disk-full"))
    for report in reports.values():
        print("\n" + describe(report))
    return reports


@pytest.mark.parametrize("name", RUNS)
def test_every_acknowledged_record_is_read_back_once_after_the_restart(runs: dict[str, RunReport], name: str) -> None:
    report = runs[name]
    for topic, outcome in report.topics.items():
        assert outcome.acked_while_filling > 1, f"{name} {topic}: nothing acknowledged before the disk filled"
        final = outcome.read_after_restart
        assert final is not None, f"{name} {topic}: not read after the restart"
        assert final.intact, f"{name} {topic} after the restart: {final.summary()}"


def test_kafka_takes_its_only_log_dir_offline_and_stops(runs: dict[str, RunReport]) -> None:
    kafka = runs["kafka"]
    assert kafka.exit_status not in (None, 0), f"kafka: {kafka.stopped}"


@pytest.mark.parametrize("name", ["kbroker", "kbroker-kill-9"])
def test_kbroker_refuses_writes_and_serves_reads_while_the_disk_is_full(
    runs: dict[str, RunReport], name: str
) -> None:
    report = runs[name]
    for topic, outcome in report.topics.items():
        assert set(outcome.fill_failures) == KBROKER_FULL_DISK_ERRORS[outcome.mode], f"{name} {topic}"
        if outcome.mode == "plain":
            assert outcome.refused_while_full == ["KAFKA_STORAGE_ERROR"] * REFUSED_ATTEMPTS, f"{name} {topic}"
        read = outcome.read_while_full
        assert read is not None and read.intact, f"{name} {topic} while full: {read and read.summary()}"


def test_kbroker_resumes_by_itself_once_there_is_room(runs: dict[str, RunReport]) -> None:
    report = runs["kbroker"]
    for topic, outcome in report.topics.items():
        assert outcome.resumed == RESUMED_RECORDS, f"{topic}: failed deliveries {dict(outcome.failures_after_room)}"
        read = outcome.read_before_restart
        assert read is not None and read.intact, f"{topic} before the restart: {read and read.summary()}"
    assert report.exit_status == 0, report.stopped


def test_kbroker_killed_while_refusing_writes_recovers(runs: dict[str, RunReport]) -> None:
    report = runs["kbroker-kill-9"]
    assert report.killed_while_retrying, "the idempotent producer's records were settled before the kill"
    assert any("not shut down cleanly" in line for line in report.notable_log_lines), report.notable_log_lines
