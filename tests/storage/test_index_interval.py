"""Offset index entries follow ``index.interval.bytes`` by Kafka's LogSegment rule: an entry
for a batch only once more than the interval has been appended since the last entry's batch
started, so a segment smaller than the interval has none (Kafka 4.3.1's ``.index`` for the same
appends; the compat scenario ``index_interval`` compares the files of both brokers)."""

from __future__ import annotations

import os
import time

from kbroker.protocol.record_builder import build_batch
from kbroker.storage.log import PartitionLog
from kbroker.storage.log_config import LogConfig

NOW = int(time.time() * 1000)


def one_batch(value_size: int) -> memoryview:
    return memoryview(bytearray(build_batch([(b"k", b"v" * value_size)], base_timestamp=NOW)))


def entries(plog: PartitionLog) -> list[tuple[int, int]]:
    index = plog.active_segment.offset_index
    return list(zip(index.offsets, index.positions, strict=True))


def test_entries_only_past_the_interval_and_none_for_the_first_batch(tmp_path) -> None:
    plog = PartitionLog.create(str(tmp_path / "t-0"), "t", 0, "id", LogConfig(index_interval_bytes=200))
    size = len(one_batch(30))
    for _ in range(12):
        plog.append_as_leader(one_batch(30), 0, NOW)
    # bytes since the last entry: size, 2*size, ... an entry at the first batch where that sum
    # (before the batch) exceeds 200, then counting restarts with that batch's own size
    expected: list[tuple[int, int]] = []
    since = 0
    for offset in range(12):
        if since > 200:
            expected.append((offset, offset * size))
            since = 0
        since += size
    assert entries(plog) == expected
    assert expected and expected[0][1] > 200


def test_a_small_segment_has_an_empty_index_that_a_clean_restart_trusts(tmp_path) -> None:
    directory = tmp_path / "t-0"
    plog = PartitionLog.create(str(directory), "t", 0, "id", LogConfig())
    plog.append_as_leader(one_batch(100), 0, NOW)
    assert entries(plog) == []  # Kafka indexes nothing below index.interval.bytes (4096)
    plog.close()
    assert os.path.getsize(directory / "00000000000000000000.index") == 0
    again = PartitionLog(str(directory), "t", 0, LogConfig())
    again.load(clean_shutdown=True)
    assert again.log_end_offset == 1
    assert entries(again) == []
    assert again.read(0, 1 << 20, 1, True) is not None


def test_truncation_restarts_the_count_as_kafka_does(tmp_path) -> None:
    plog = PartitionLog.create(str(tmp_path / "t-0"), "t", 0, "id", LogConfig(index_interval_bytes=100))
    size = len(one_batch(30))
    for _ in range(6):
        plog.append_as_leader(one_batch(30), 0, NOW)
    plog.truncate_to(3)
    kept = [e for e in entries(plog) if e[0] < 3]
    assert entries(plog) == kept
    for _ in range(3):
        plog.append_as_leader(one_batch(30), 0, NOW)
    since, expected_new = 0, []
    for offset in range(3, 6):
        if since > 100:
            expected_new.append((offset, offset * size))
            since = 0
        since += size
    assert entries(plog) == kept + expected_new
