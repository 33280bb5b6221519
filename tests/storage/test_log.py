"""PartitionLog on a real directory: offsets, rolling, reads, recovery, retention, truncation."""

from __future__ import annotations

import os
import time

import pytest
from kbroker.protocol.errors import ErrorCode, KafkaError
from kbroker.protocol.record_builder import build_batch
from kbroker.storage.log import PartitionLog
from kbroker.storage.log_config import LogConfig

NOW = int(time.time() * 1000)


def batch(n: int, ts: int = NOW, size: int = 50) -> memoryview:
    return memoryview(bytearray(build_batch([(b"k%d" % i, b"v" * size) for i in range(n)], base_timestamp=ts)))


def new_log(tmp_path, **config) -> PartitionLog:
    return PartitionLog.create(str(tmp_path / "t-0"), "t", 0, "id", LogConfig(**config))


def reopen(tmp_path, clean: bool, **config) -> PartitionLog:
    plog = PartitionLog(str(tmp_path / "t-0"), "t", 0, LogConfig(**config))
    plog.load(clean_shutdown=clean)
    return plog


def test_append_assigns_contiguous_offsets_and_stamps_epoch(tmp_path):
    plog = new_log(tmp_path)
    first = plog.append_as_leader(batch(3), leader_epoch=5, now_ms=NOW)
    second = plog.append_as_leader(batch(2), leader_epoch=5, now_ms=NOW)
    assert (first.first_offset, first.last_offset) == (0, 2)
    assert (second.first_offset, second.last_offset) == (3, 4)
    assert plog.log_end_offset == 5
    assert plog.leader_epoch_cache.end_offset_for(5, plog.log_end_offset) == (5, 5)


def test_read_starts_at_batch_containing_offset(tmp_path):
    plog = new_log(tmp_path)
    for _ in range(4):
        plog.append_as_leader(batch(10), 0, NOW)
    fetched = plog.read(25, 1 << 20, plog.log_end_offset, True)
    data = fetched.segment.read_bytes(fetched.position, fetched.length)
    assert int.from_bytes(data[:8], "big") == 20  # batch 20..29 contains 25


def test_first_batch_returned_whole_even_above_max_bytes(tmp_path):
    plog = new_log(tmp_path)
    plog.append_as_leader(batch(10, size=500), 0, NOW)
    whole = plog.read(0, 10, plog.log_end_offset, min_one_batch=True)
    assert whole.length == plog.active_segment.size
    assert plog.read(0, 10, plog.log_end_offset, min_one_batch=False).length == 10


def test_read_stops_at_max_offset_and_rejects_out_of_range(tmp_path):
    plog = new_log(tmp_path)
    plog.append_as_leader(batch(5), 0, NOW)
    plog.append_as_leader(batch(5), 0, NOW)
    bounded = plog.read(0, 1 << 20, 5, True)
    assert bounded.length == plog.active_segment.position_of(5)
    assert plog.read(5, 1 << 20, 5, True) is None
    with pytest.raises(KafkaError) as err:
        plog.read(11, 100, 10, True)
    assert err.value.code == ErrorCode.offset_out_of_range


def test_segments_roll_by_size_and_reads_cross_them(tmp_path):
    plog = new_log(tmp_path, segment_bytes=2000)
    for _ in range(20):
        plog.append_as_leader(batch(5), 0, NOW)
    assert len(plog.segments) > 3
    offset = 0
    while offset < plog.log_end_offset:
        fetched = plog.read(offset, 1 << 20, plog.log_end_offset, True)
        data = fetched.segment.read_bytes(fetched.position, fetched.length)
        assert int.from_bytes(data[:8], "big") == offset
        offset = fetched.segment.next_offset
    assert offset == 100


def test_clean_reopen_keeps_everything(tmp_path):
    plog = new_log(tmp_path, segment_bytes=2000)
    for _ in range(10):
        plog.append_as_leader(batch(5), 2, NOW)
    plog.close()
    again = reopen(tmp_path, clean=True, segment_bytes=2000)
    assert again.log_end_offset == 50
    assert again.leader_epoch_cache.latest_epoch == 2


def test_unclean_reopen_truncates_torn_tail_by_crc(tmp_path, caplog):
    plog = new_log(tmp_path)
    plog.append_as_leader(batch(5), 0, NOW)
    good_size = plog.active_segment.size
    torn = bytes(batch(5))[:-7]  # a batch whose last bytes never reached the file
    os.write(plog.active_segment.fd, torn)
    plog.close()
    again = reopen(tmp_path, clean=False)
    assert again.log_end_offset == 5
    assert again.active_segment.size == good_size
    assert "truncated" in caplog.text


def test_unclean_reopen_cuts_at_first_crc_mismatch(tmp_path):
    plog = new_log(tmp_path)
    plog.append_as_leader(batch(5), 0, NOW)
    position = plog.active_segment.size
    plog.append_as_leader(batch(5), 0, NOW)
    plog.close()
    path = os.path.join(str(tmp_path / "t-0"), "00000000000000000000.log")
    with open(path, "r+b") as fh:  # flip a byte inside the second batch's records
        fh.seek(position + 70)
        byte = fh.read(1)
        fh.seek(position + 70)
        fh.write(bytes([byte[0] ^ 0xFF]))
    again = reopen(tmp_path, clean=False)
    assert again.log_end_offset == 5


def test_offset_for_timestamp_finds_first_record_at_or_after(tmp_path):
    plog = new_log(tmp_path)
    plog.append_as_leader(batch(3, ts=NOW - 3000), 0, NOW)
    plog.append_as_leader(batch(3, ts=NOW - 2000), 0, NOW)
    plog.append_as_leader(batch(3, ts=NOW - 1000), 0, NOW)
    assert plog.offset_for_timestamp(NOW - 2500) == (3, NOW - 2000)
    assert plog.offset_for_timestamp(NOW - 2000) == (3, NOW - 2000)
    assert plog.offset_for_timestamp(NOW) is None
    assert plog.max_timestamp_offset() == (6, NOW - 1000)


def test_offset_for_timestamp_skips_records_below_log_start(tmp_path):
    # As Kafka: the answer is the first record at or after the log start offset, with that
    # record's own timestamp (found by the compat suite: kbroker answered record 0's timestamp).
    plog = new_log(tmp_path)
    for i in range(4):
        plog.append_as_leader(batch(1, ts=NOW - 4000 + i * 1000), 0, NOW)
    plog.delete_records_before(2, high_watermark=plog.log_end_offset)
    assert plog.offset_for_timestamp(NOW - 4000) == (2, NOW - 2000)
    assert plog.offset_for_timestamp(NOW - 1000) == (3, NOW - 1000)
    assert plog.offset_for_timestamp(NOW) is None


def test_log_append_time_overrides_batch_timestamp(tmp_path):
    plog = new_log(tmp_path, log_append_time=True)
    info = plog.append_as_leader(batch(2, ts=1), 0, NOW)
    assert info.log_append_time == NOW
    assert plog.max_timestamp_offset()[1] == NOW


def test_batch_above_max_message_bytes_is_rejected(tmp_path):
    plog = new_log(tmp_path, max_message_bytes=200)
    with pytest.raises(KafkaError) as err:
        plog.append_as_leader(batch(5, size=100), 0, NOW)
    assert err.value.code == ErrorCode.message_too_large
    assert plog.log_end_offset == 0


def test_compacted_topic_rejects_null_keys(tmp_path):
    plog = new_log(tmp_path, compact=True)
    keyless = memoryview(bytearray(build_batch([(None, b"v")], base_timestamp=NOW)))
    with pytest.raises(KafkaError) as err:
        plog.append_as_leader(keyless, 0, NOW)
    assert err.value.code == ErrorCode.invalid_record


def test_delete_records_moves_log_start_and_drops_whole_segments(tmp_path):
    plog = new_log(tmp_path, segment_bytes=2000)
    for _ in range(20):
        plog.append_as_leader(batch(5), 0, NOW)
    segments_before = len(plog.segments)
    assert plog.delete_records_before(42, high_watermark=plog.log_end_offset) == 42
    assert plog.log_start_offset == 42
    assert len(plog.segments) < segments_before
    assert plog.segments[0].base_offset <= 42
    with pytest.raises(KafkaError):
        plog.read(41, 100, plog.log_end_offset, True)
    with pytest.raises(KafkaError) as err:
        plog.delete_records_before(101, high_watermark=100)
    assert err.value.code == ErrorCode.offset_out_of_range


def test_retention_by_time_and_size(tmp_path):
    plog = new_log(tmp_path, segment_bytes=2000, retention_ms=60_000)
    for _ in range(10):
        plog.append_as_leader(batch(5, ts=NOW - 120_000), 0, NOW)
    for _ in range(10):
        plog.append_as_leader(batch(5, ts=NOW), 0, NOW)
    assert plog.enforce_retention(NOW, high_watermark=plog.log_end_offset) > 0
    assert plog.log_start_offset > 0
    assert plog.offset_for_timestamp(0)[1] >= NOW - 120_000
    sized = new_log(tmp_path / "s", segment_bytes=2000, retention_bytes=4000)
    for _ in range(20):
        sized.append_as_leader(batch(5), 0, NOW)
    sized.enforce_retention(NOW, high_watermark=sized.log_end_offset)
    assert sized.size_in_bytes - sized.active_segment.size <= 4000


def test_truncate_to_removes_suffix_and_epochs(tmp_path):
    plog = new_log(tmp_path, segment_bytes=2000)
    for epoch in range(4):
        for _ in range(5):
            plog.append_as_leader(batch(5), epoch, NOW)
    plog.truncate_to(52)
    assert plog.log_end_offset == 50  # the batch holding 52 (50..54) goes entirely
    assert plog.leader_epoch_cache.latest_epoch == 1
    info = plog.append_as_leader(batch(1), 7, NOW)
    assert info.first_offset == 50


def test_segments_roll_by_record_timestamps_like_kafka(tmp_path):
    """segment.ms compares the incoming records' max timestamp with the segment's first batch
    timestamp (Kafka's LogSegment.timeWaitedForRoll): replaying records an hour apart rolls a
    segment per record even though they arrive within milliseconds; a reopened log reads the
    first timestamp from its file."""
    plog = new_log(tmp_path, segment_ms=60_000)
    hour = 3_600_000
    for i in range(3):
        plog.append_as_leader(batch(1, ts=NOW - (3 - i) * hour), 0, NOW)
    assert [s.base_offset for s in plog.segments] == [0, 1, 2]
    plog.append_as_leader(batch(1, ts=NOW - hour + 30_000), 0, NOW)  # within 60 s of offset 2's
    assert [s.base_offset for s in plog.segments] == [0, 1, 2]
    plog.close()
    plog = reopen(tmp_path, clean=True, segment_ms=60_000)
    plog.append_as_leader(batch(1, ts=NOW), 0, NOW)
    assert [s.base_offset for s in plog.segments] == [0, 1, 2, 4]
