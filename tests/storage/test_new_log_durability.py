"""A new log's directory entry becomes durable with the log's first flush, not at creation.

Creating a log fsyncs nothing (a thousand new partitions cost no fsync); the first flush, which
moves the recovery point past the first records, fsyncs the new directory and then its log dir,
so a flushed log cannot vanish in an OS crash. Both ways of creating logs (one by one, and many
on the writer threads) do this."""

from __future__ import annotations

import pytest
from kbroker.protocol.record_builder import build_batch
from kbroker.storage import file_io
from kbroker.storage.log_config import LogConfig
from kbroker.storage.log_manager import LogManager

NOW = 1_700_000_000_000
TOPIC_ID = "AAAAAAAAAAAAAAAAAAAAAA"


@pytest.fixture
def fsynced_dirs(monkeypatch) -> list[str]:
    seen: list[str] = []
    real = file_io.fsync_dir

    def recording(path: str) -> None:
        seen.append(path)
        real(path)

    monkeypatch.setattr(file_io, "fsync_dir", recording)
    return seen


@pytest.mark.parametrize("how", ["one by one", "on the writer threads"])
def test_the_first_flush_makes_the_new_directory_durable_in_its_log_dir(tmp_path, fsynced_dirs, how):
    manager = LogManager([str(tmp_path)], lambda _topic: LogConfig())
    manager.startup()
    fsynced_dirs.clear()
    if how == "one by one":
        plog = manager.create("t", 0, TOPIC_ID)
    else:
        manager.adopt_new_logs(manager.write_new_logs(manager.plan_new_logs([("t", p, TOPIC_ID) for p in range(3)])))
        plog = manager.get("t", 0)
        assert plog is not None
    assert fsynced_dirs == []  # creating costs no fsync
    plog.append_as_leader(memoryview(bytearray(build_batch([(None, b"v")], base_timestamp=NOW))), 0, NOW)
    plog.flush(NOW)
    assert str(tmp_path) in fsynced_dirs  # the log dir holding the new directory's entry
    assert plog.directory in fsynced_dirs
    fsynced_dirs.clear()
    plog.append_as_leader(memoryview(bytearray(build_batch([(None, b"w")], base_timestamp=NOW))), 0, NOW)
    plog.flush(NOW)
    assert str(tmp_path) not in fsynced_dirs  # once is enough
    manager.shutdown()
