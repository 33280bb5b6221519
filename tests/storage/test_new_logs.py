"""Many new logs written apart (``write_new_logs``, which the broker runs off its event loop) and
taken in on the manager's thread.

They must behave as logs ``create`` makes: share the manager's descriptor budget, take appends,
survive a restart; and a log the disk refuses (ENOSPC) is left out with no directory behind, so
the ordinary ``create`` meets the error and reports it."""

from __future__ import annotations

import errno
import os

import pytest
from kbroker.protocol.record_builder import build_batch
from kbroker.storage import file_io
from kbroker.storage.file_io import FailPoint, inject
from kbroker.storage.log_config import LogConfig
from kbroker.storage.log_manager import LogManager

NOW = 1_700_000_000_000
PARTITIONS = 40


pytestmark = pytest.mark.usefixtures("no_failpoints_left")


def test_logs_written_apart_take_writes_share_the_descriptor_budget_and_reload(tmp_path):
    manager = LogManager([str(tmp_path)], lambda _topic: LogConfig(), max_open_segment_files=3)
    manager.startup()
    planned = manager.plan_new_logs([("t", p, "AAAAAAAAAAAAAAAAAAAAAA") for p in range(PARTITIONS)])
    assert len(planned) == PARTITIONS
    manager.adopt_new_logs(manager.write_new_logs(planned))
    assert sorted(manager.logs) == [("t", p) for p in range(PARTITIONS)]
    assert manager.plan_new_logs([("t", 0, "AAAAAAAAAAAAAAAAAAAAAA")]) == []  # here now
    for p in range(PARTITIONS):
        plog = manager.get("t", p)
        assert plog is not None and plog.files is manager.files
        batch = build_batch([(None, b"record-%d" % p)], base_timestamp=NOW)
        plog.append_as_leader(memoryview(bytearray(batch)), 0, NOW)
    assert len(manager.files) <= 3
    manager.shutdown()

    again = LogManager([str(tmp_path)], lambda _topic: LogConfig())
    again.startup()
    assert sorted(again.logs) == [("t", p) for p in range(PARTITIONS)]
    assert all(plog.log_end_offset == 1 for plog in again.logs.values())
    again.shutdown()


def test_a_log_the_disk_refuses_is_left_out_with_no_directory(tmp_path):
    manager = LogManager([str(tmp_path)], lambda _topic: LogConfig())
    manager.startup()
    inject(FailPoint("open", errno.ENOSPC, path_contains="t-3", times=0))
    planned = manager.plan_new_logs([("t", p, "AAAAAAAAAAAAAAAAAAAAAA") for p in range(5)])
    manager.adopt_new_logs(manager.write_new_logs(planned))
    assert sorted(manager.logs) == [("t", p) for p in (0, 1, 2, 4)]
    assert not os.path.exists(tmp_path / "t-3")
    with pytest.raises(OSError) as refused:
        manager.create("t", 3, "AAAAAAAAAAAAAAAAAAAAAA")  # the ordinary way meets the same error
    assert refused.value.errno == errno.ENOSPC
    file_io.clear_failpoints()
    manager.shutdown()
