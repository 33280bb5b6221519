"""PartitionLog as a follower: appends of the leader's own bytes, and truncation back to agreement."""

from __future__ import annotations

import time

import pytest
from kbroker.protocol.errors import ErrorCode, KafkaError
from kbroker.protocol.record_builder import build_batch
from kbroker.protocol.records import BatchHeader, read_header
from kbroker.storage.log import PartitionLog
from kbroker.storage.log_config import LogConfig

NOW = int(time.time() * 1000)
TRANSACTIONAL = 0x10


def new_log(tmp_path, name: str, **config) -> PartitionLog:
    return PartitionLog.create(str(tmp_path / name / "t-0"), "t", 0, "id", LogConfig(**config))


def data(n: int, pid: int = -1, seq: int = -1, attributes: int = 0) -> memoryview:
    return memoryview(bytearray(build_batch(
        [(b"k%d" % i, b"v%d" % i) for i in range(n)], base_timestamp=NOW, producer_id=pid, producer_epoch=0,
        base_sequence=seq, attributes=attributes,
    )))


def leader_bytes(plog: PartitionLog, start: int, end: int) -> bytes:
    """What a follower fetch returns: whole batches in [start, end)."""
    out = b""
    offset = start
    while offset < end:
        piece = plog.read(offset, 1 << 20, end, True)
        assert piece is not None
        chunk = piece.segment.read_bytes(piece.position, piece.length)
        out += chunk
        offset = piece.segment.next_offset if end >= piece.segment.next_offset else end
    return out


def segment_files(plog: PartitionLog) -> list[bytes]:
    return [s.read_bytes(0, s.size) for s in plog.segments]


def fill_leader(leader: PartitionLog) -> None:
    leader.append_as_leader(data(3), leader_epoch=0, now_ms=NOW)
    leader.append_as_leader(data(2, pid=7, seq=0), leader_epoch=0, now_ms=NOW)
    leader.append_as_leader(data(2, pid=9, seq=0, attributes=TRANSACTIONAL), leader_epoch=1, now_ms=NOW)
    leader.append_end_txn_marker(9, 0, commit=False, coordinator_epoch=0, leader_epoch=1, now_ms=NOW)
    leader.append_as_leader(data(1), leader_epoch=2, now_ms=NOW)


def test_follower_copy_is_byte_identical_with_epochs_producers_and_aborted_txns(tmp_path):
    leader = new_log(tmp_path, "leader", segment_bytes=300)
    follower = new_log(tmp_path, "follower", segment_bytes=300)
    fill_leader(leader)
    # In two fetches, as a follower would.
    middle = 5
    follower.append_as_follower(memoryview(leader_bytes(leader, 0, middle)), NOW)
    info = follower.append_as_follower(memoryview(leader_bytes(leader, middle, leader.log_end_offset)), NOW)
    assert info.last_offset == leader.log_end_offset - 1
    assert follower.log_end_offset == leader.log_end_offset == 9
    assert b"".join(segment_files(follower)) == b"".join(segment_files(leader))
    assert list(zip(follower.leader_epoch_cache.epochs, follower.leader_epoch_cache.start_offsets, strict=True)) \
        == [(0, 0), (1, 5), (2, 8)]
    assert follower.collect_aborted_txns(0, 9) == leader.collect_aborted_txns(0, 9)
    assert [t.producer_id for t in follower.collect_aborted_txns(0, 9)] == [9]
    assert follower.producer_state.first_unstable_offset() is None
    entry = follower.producer_state.producers[7]
    assert (entry.last_seq, entry.batches[-1].first_offset) == (1, 3)
    # A retry of producer 7's batch would be recognised on the follower (if it became leader).
    dup = follower.producer_state.find_duplicate(_header(data(2, pid=7, seq=0)))
    assert dup is not None and dup.first_offset == 3


def _header(records: memoryview) -> BatchHeader:
    return read_header(records)


def test_follower_append_requires_the_log_end_offset_and_contiguity(tmp_path):
    follower = new_log(tmp_path, "follower")
    bb = build_batch
    with pytest.raises(KafkaError) as err:
        follower.append_as_follower(memoryview(bytearray(bb([(b"k", b"v")], base_offset=5, base_timestamp=NOW))), NOW)
    assert err.value.code == ErrorCode.unknown_server_error
    two = bb([(b"a", b"1")], base_offset=0, base_timestamp=NOW) + bb([(b"b", b"2")], base_offset=3, base_timestamp=NOW)
    with pytest.raises(KafkaError):
        follower.append_as_follower(memoryview(bytearray(two)), NOW)
    assert follower.log_end_offset == 0


def test_follower_append_rejects_a_corrupt_batch(tmp_path):
    follower = new_log(tmp_path, "follower")
    batch = bytearray(build_batch([(b"k", b"v")], base_offset=0, base_timestamp=NOW))
    batch[-1] ^= 0xFF
    with pytest.raises(KafkaError) as err:
        follower.append_as_follower(memoryview(batch), NOW)
    assert err.value.code == ErrorCode.corrupt_message
    assert follower.log_end_offset == 0


def test_truncate_to_rewinds_epochs_producer_state_and_transaction_index(tmp_path):
    leader = new_log(tmp_path, "leader", segment_bytes=300)
    follower = new_log(tmp_path, "follower", segment_bytes=300)
    fill_leader(leader)
    follower.append_as_follower(memoryview(leader_bytes(leader, 0, leader.log_end_offset)), NOW)
    follower.truncate_to(7)  # drops the abort marker (offset 7) and epoch 2's batch
    assert follower.log_end_offset == 7
    assert follower.leader_epoch_cache.epochs == [0, 1]
    assert follower.collect_aborted_txns(0, 9) == []
    assert follower.producer_state.first_unstable_offset() == 5  # producer 9's transaction is open again
    follower.truncate_to(3)  # producer 7's batch is gone: a retry is no longer a duplicate
    assert follower.producer_state.find_duplicate(_header(data(2, pid=7, seq=0))) is None
    assert follower.producer_state.first_unstable_offset() is None
    assert follower.leader_epoch_cache.epochs == [0]
    # And the follower can continue from the leader again, ending identical.
    follower.append_as_follower(memoryview(leader_bytes(leader, 3, leader.log_end_offset)), NOW)
    assert b"".join(segment_files(follower)) == b"".join(segment_files(leader))
    assert follower.collect_aborted_txns(0, 9) == leader.collect_aborted_txns(0, 9)


def test_truncate_fully_and_start_at(tmp_path):
    follower = new_log(tmp_path, "follower")
    follower.append_as_follower(memoryview(bytearray(build_batch([(b"k", b"v")] * 3, base_timestamp=NOW))), NOW)
    follower.truncate_fully_and_start_at(10)
    assert (follower.log_start_offset, follower.log_end_offset) == (10, 10)
    assert follower.leader_epoch_cache.epochs == []
    follower.append_as_follower(memoryview(bytearray(build_batch([(b"k", b"v")], base_offset=10,
                                                                 base_timestamp=NOW, leader_epoch=4))), NOW)
    assert follower.log_end_offset == 11
    assert follower.leader_epoch_cache.epochs == [4]


def test_truncating_at_the_log_end_drops_an_epoch_started_without_records(tmp_path):
    """A broker that led at epoch 2 without appending anything holds "epoch 2 starts at the end";
    when a leader that never had epoch 2 answers DivergingEpoch(0, end), truncating to the end
    must drop that entry, or the follower asks with epoch 2 and diverges again, forever (a busy
    loop seen in a cluster test; Kafka's truncateTo trims the epoch cache in this case too)."""
    follower = new_log(tmp_path, "follower")
    follower.append_as_follower(memoryview(bytearray(
        build_batch([(b"k", b"v")] * 3, base_timestamp=NOW, leader_epoch=0))), NOW)
    follower.leader_epoch_cache.assign(2, follower.log_end_offset)  # led at epoch 2, appended nothing
    follower.truncate_to(follower.log_end_offset)
    assert follower.log_end_offset == 3
    assert follower.leader_epoch_cache.latest_epoch == 0
