"""SegmentFileCache: segment descriptors are opened when used and the least recently used are
closed past the budget, so a node's partition count is not bounded by its descriptor limit."""

from __future__ import annotations

import os
import time

import pytest
from kbroker.protocol.record_builder import build_batch
from kbroker.storage.log_config import LogConfig
from kbroker.storage.log_manager import LogManager

NOW = int(time.time() * 1000)


def open_descriptors() -> int:
    return len(os.listdir("/proc/self/fd"))


def one_record(value: bytes) -> memoryview:
    return memoryview(bytearray(build_batch([(None, value)], base_timestamp=NOW)))


def test_many_partitions_stay_within_the_descriptor_budget(tmp_path):
    baseline = open_descriptors()
    manager = LogManager([str(tmp_path)], lambda _topic: LogConfig(segment_bytes=200), max_open_segment_files=3)
    manager.startup()
    logs = [manager.create("t", p, "id") for p in range(40)]
    for round_ in range(3):  # several segments per partition
        for p, plog in enumerate(logs):
            plog.append_as_leader(one_record(b"%d-%d" % (p, round_) + b"." * 100), 0, NOW)
    assert all(len(plog.segments) == 3 for plog in logs)
    assert len(manager.files) <= 3
    assert open_descriptors() <= baseline + 3
    for p, plog in enumerate(logs):  # every segment is still readable (reopened on use)
        for round_ in range(3):
            piece = plog.read(round_, 1 << 20, plog.log_end_offset, True)
            assert b"%d-%d." % (p, round_) in piece.segment.read_bytes(piece.position, piece.length)
    assert open_descriptors() <= baseline + 3
    manager.shutdown()
    assert open_descriptors() == baseline


def test_loading_logs_leaves_no_segment_open(tmp_path):
    manager = LogManager([str(tmp_path)], lambda _topic: LogConfig())
    manager.startup()
    for p in range(10):
        manager.create("t", p, "id").append_as_leader(one_record(b"v"), 0, NOW)
    manager.shutdown()
    baseline = open_descriptors()
    again = LogManager([str(tmp_path)], lambda _topic: LogConfig())
    again.startup()
    assert len(again.files) == 0 and open_descriptors() == baseline
    again.shutdown()


def test_a_deleted_segment_never_reads_another_file(tmp_path):
    manager = LogManager([str(tmp_path)], lambda _topic: LogConfig(segment_bytes=200), max_open_segment_files=1)
    manager.startup()
    plog = manager.create("t", 0, "id")
    for i in range(3):
        plog.append_as_leader(one_record(b"%d" % i + b"." * 100), 0, NOW)
    old = plog.read(0, 1 << 20, plog.log_end_offset, True)  # a fetch planned on segment 0 ...
    plog.delete_records_before(2, plog.log_end_offset)  # ... whose segment retention then deletes
    other = manager.create("u", 0, "id")
    other.append_as_leader(one_record(b"someone else's bytes"), 0, NOW)
    with pytest.raises(FileNotFoundError):
        old.segment.read_bytes(old.position, old.length)
    manager.shutdown()
