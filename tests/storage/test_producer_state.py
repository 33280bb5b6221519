"""ProducerStateManager and PartitionLog's idempotent appends: sequence rules, duplicates,
epochs, wrap-around, snapshots, crash rebuild, truncation, expiry, transaction markers."""

from __future__ import annotations

import os
import time

import pytest
from kbroker.protocol.errors import ErrorCode, KafkaError
from kbroker.protocol.record_builder import build_batch
from kbroker.protocol.records import TRANSACTIONAL_FLAG, read_header
from kbroker.storage.log import PartitionLog
from kbroker.storage.log_config import LogConfig
from kbroker.storage.producer_state import INT32_MAX, ProducerStateManager

NOW = int(time.time() * 1000)
PID = 4000


def pbatch(seq: int, n: int = 3, pid: int = PID, epoch: int = 0, txn: bool = False) -> memoryview:
    records = [(b"k", b"v%d" % i) for i in range(n)]
    raw = build_batch(records, base_timestamp=NOW, producer_id=pid, producer_epoch=epoch, base_sequence=seq,
                      attributes=TRANSACTIONAL_FLAG if txn else 0)
    return memoryview(bytearray(raw))


def new_log(tmp_path, **config) -> PartitionLog:
    return PartitionLog.create(str(tmp_path / "t-0"), "t", 0, "id", LogConfig(**config))


def reopen(tmp_path, clean: bool, **config) -> PartitionLog:
    plog = PartitionLog(str(tmp_path / "t-0"), "t", 0, LogConfig(**config))
    plog.load(clean_shutdown=clean)
    return plog


def error_of(plog: PartitionLog, records: memoryview) -> ErrorCode:
    with pytest.raises(KafkaError) as info:
        plog.append_as_leader(records, 0, NOW)
    return info.value.code


def test_in_sequence_batches_append_and_a_retry_gets_the_original_offsets(tmp_path):
    plog = new_log(tmp_path)
    assert plog.append_as_leader(pbatch(0), 0, NOW).first_offset == 0
    assert plog.append_as_leader(pbatch(3), 0, NOW).first_offset == 3
    retry = plog.append_as_leader(pbatch(0), 0, NOW)
    assert (retry.first_offset, retry.last_offset) == (0, 2)
    assert plog.log_end_offset == 6  # nothing written twice


def test_only_the_last_five_batches_are_recognised_as_duplicates(tmp_path):
    plog = new_log(tmp_path)
    for i in range(6):
        plog.append_as_leader(pbatch(i * 3), 0, NOW)
    assert plog.append_as_leader(pbatch(3), 0, NOW).first_offset == 3  # 2nd batch: still retained
    assert error_of(plog, pbatch(0)) == ErrorCode.out_of_order_sequence_number  # 1st: forgotten


def test_gap_is_out_of_order(tmp_path):
    plog = new_log(tmp_path)
    plog.append_as_leader(pbatch(0), 0, NOW)
    assert error_of(plog, pbatch(4)) == ErrorCode.out_of_order_sequence_number
    assert plog.log_end_offset == 3


def test_unknown_producer_may_start_at_any_sequence(tmp_path):
    # Kafka 4 (KIP-360): no UNKNOWN_PRODUCER_ID; state may have expired or been deleted.
    plog = new_log(tmp_path)
    assert plog.append_as_leader(pbatch(77), 0, NOW).first_offset == 0
    assert plog.append_as_leader(pbatch(80), 0, NOW).first_offset == 3


def test_older_epoch_is_fenced_and_new_epoch_must_start_at_zero(tmp_path):
    plog = new_log(tmp_path)
    plog.append_as_leader(pbatch(0, epoch=1), 0, NOW)
    assert error_of(plog, pbatch(3, epoch=0)) == ErrorCode.invalid_producer_epoch
    assert error_of(plog, pbatch(5, epoch=2)) == ErrorCode.out_of_order_sequence_number
    assert plog.append_as_leader(pbatch(0, epoch=2), 0, NOW).first_offset == 3
    # The old epoch's batches are no longer duplicates once the epoch moved on.
    assert error_of(plog, pbatch(0, epoch=1)) == ErrorCode.invalid_producer_epoch


def test_sequence_wraps_past_int32_max(tmp_path):
    plog = new_log(tmp_path)
    plog.append_as_leader(pbatch(INT32_MAX - 2, n=3), 0, NOW)  # last seq = INT32_MAX
    assert plog.append_as_leader(pbatch(0, n=2), 0, NOW).first_offset == 3
    wrapped = pbatch(INT32_MAX - 1, n=4)  # sequences MAX-1, MAX, 0, 1
    assert read_header(wrapped).base_sequence == INT32_MAX - 1
    assert error_of(plog, wrapped) == ErrorCode.out_of_order_sequence_number
    assert plog.append_as_leader(pbatch(2, n=1), 0, NOW).first_offset == 5


def test_a_failed_append_changes_no_state(tmp_path):
    plog = new_log(tmp_path, max_message_bytes=10_000)
    plog.append_as_leader(pbatch(0), 0, NOW)
    big = memoryview(bytearray(build_batch([(b"k", b"x" * 20_000)], producer_id=PID, producer_epoch=0,
                                           base_sequence=3, base_timestamp=NOW)))
    assert error_of(plog, big) == ErrorCode.message_too_large
    assert plog.append_as_leader(pbatch(3), 0, NOW).first_offset == 3


def test_state_survives_clean_restart_through_a_snapshot(tmp_path):
    plog = new_log(tmp_path)
    plog.append_as_leader(pbatch(0), 0, NOW)
    plog.close()
    assert os.path.exists(tmp_path / "t-0" / "00000000000000000003.snapshot")
    plog = reopen(tmp_path, clean=True)
    assert plog.append_as_leader(pbatch(0), 0, NOW).first_offset == 0  # duplicate
    assert error_of(plog, pbatch(9)) == ErrorCode.out_of_order_sequence_number


def test_state_is_rebuilt_after_a_crash_from_snapshot_plus_replay(tmp_path):
    plog = new_log(tmp_path, segment_bytes=300)
    for i in range(6):
        plog.append_as_leader(pbatch(i * 3), 0, NOW)  # rolls: snapshots at segment bases
    snapshots = sorted(n for n in os.listdir(tmp_path / "t-0") if n.endswith(".snapshot"))
    assert snapshots and len(plog.segments) > 1
    # no close(): kill -9
    plog = reopen(tmp_path, clean=False, segment_bytes=300)
    assert plog.append_as_leader(pbatch(15), 0, NOW).first_offset == 15  # last batch: duplicate
    assert plog.append_as_leader(pbatch(18), 0, NOW).first_offset == 18


def test_corrupt_snapshot_is_ignored_and_state_rebuilt_from_the_log(tmp_path):
    plog = new_log(tmp_path)
    plog.append_as_leader(pbatch(0), 0, NOW)
    plog.close()
    path = tmp_path / "t-0" / "00000000000000000003.snapshot"
    data = bytearray(path.read_bytes())
    data[-1] ^= 0xFF
    path.write_bytes(bytes(data))
    plog = reopen(tmp_path, clean=True)
    assert not path.exists()
    assert plog.append_as_leader(pbatch(0), 0, NOW).first_offset == 0


def test_truncation_rewinds_producer_state(tmp_path):
    plog = new_log(tmp_path)
    plog.append_as_leader(pbatch(0), 0, NOW)
    plog.append_as_leader(pbatch(3), 0, NOW)
    plog.close()
    plog = reopen(tmp_path, clean=True)  # snapshot at 6
    plog.truncate_to(3)
    assert not os.path.exists(tmp_path / "t-0" / "00000000000000000006.snapshot")
    assert plog.append_as_leader(pbatch(3), 0, NOW).first_offset == 3  # written again, not a duplicate
    assert plog.log_end_offset == 6


def test_delete_records_keeps_producer_state(tmp_path):
    plog = new_log(tmp_path, segment_bytes=300)
    for i in range(4):
        plog.append_as_leader(pbatch(i * 3), 0, NOW)
    plog.delete_records_before(plog.log_end_offset, plog.log_end_offset)
    assert plog.append_as_leader(pbatch(9), 0, NOW).first_offset == 9  # duplicate still detected
    assert error_of(plog, pbatch(20)) == ErrorCode.out_of_order_sequence_number


def test_expiry_forgets_idle_producers_but_not_open_transactions():
    state = ProducerStateManager("/nonexistent")
    plog_free = [(read_header(pbatch(0, pid=1)), 0), (read_header(pbatch(0, pid=2, txn=True)), 3)]
    state.complete_append(state.prepare_append(plog_free), 6)
    assert state.remove_expired_producers(NOW + 86_400_000, 86_400_000) == 1
    assert set(state.producers) == {2}
    assert state.first_unstable_offset() == 3


def test_markers_close_transactions_and_index_aborts(tmp_path):
    plog = new_log(tmp_path)
    plog.append_as_leader(pbatch(0, pid=1, txn=True), 0, NOW)  # 0..2
    plog.append_as_leader(pbatch(0, pid=2, txn=True), 0, NOW)  # 3..5
    assert plog.producer_state.first_unstable_offset() == 0
    assert error_of(plog, pbatch(3, pid=1)) == ErrorCode.invalid_txn_state  # non-txn during txn
    assert plog.append_end_txn_marker(1, 0, False, 0, 0, NOW) == 6
    assert plog.producer_state.first_unstable_offset() == 3
    assert plog.append_end_txn_marker(2, 0, True, 0, 0, NOW) == 7
    assert plog.producer_state.first_unstable_offset() is None
    aborted = plog.collect_aborted_txns(0, 8)
    assert [(a.producer_id, a.first_offset, a.last_offset, a.last_stable_offset) for a in aborted] == [(1, 0, 6, 3)]
    assert plog.append_as_leader(pbatch(3, pid=1, txn=True), 0, NOW).first_offset == 8  # next txn
    assert plog.producer_state.first_unstable_offset() == 8
    with pytest.raises(KafkaError) as info:
        plog.append_end_txn_marker(1, -1, True, 0, 0, NOW)  # an older epoch's marker
    assert info.value.code == ErrorCode.invalid_producer_epoch


def test_a_marker_from_an_older_coordinator_epoch_is_fenced(tmp_path):
    """Kafka's ProducerAppendInfo.checkCoordinatorEpoch: once a coordinator at epoch 5 has
    ended the producer's transaction here, a marker from epoch 4 (a coordinator that has since
    moved) is TRANSACTION_COORDINATOR_FENCED and nothing is written; epoch 5 and newer pass."""
    plog = new_log(tmp_path)
    plog.append_as_leader(pbatch(0, pid=1, txn=True), 0, NOW)  # 0..2
    assert plog.append_end_txn_marker(1, 0, True, 5, 0, NOW) == 3
    plog.append_as_leader(pbatch(3, pid=1, txn=True), 0, NOW)  # 4..6, the next transaction
    with pytest.raises(KafkaError) as info:
        plog.append_end_txn_marker(1, 0, False, 4, 0, NOW)
    assert info.value.code == ErrorCode.transaction_coordinator_fenced
    assert plog.log_end_offset == 7 and plog.producer_state.first_unstable_offset() == 4  # still open
    assert plog.append_end_txn_marker(1, 0, True, 6, 0, NOW) == 7
    assert plog.producer_state.producers[1].coordinator_epoch == 6
    plog.close()
    assert reopen(tmp_path, clean=True).producer_state.producers[1].coordinator_epoch == 6  # in the snapshot


def test_followers_and_recovery_learn_the_coordinator_epoch_of_markers(tmp_path):
    """A follower applying its leader's marker, and a crash recovery replaying it, keep the
    coordinator epoch the marker carries (Kafka's replication-origin update): the partition
    fences a stale coordinator after a leader change or a restart as its old leader did."""
    leader = PartitionLog.create(str(tmp_path / "leader" / "t-0"), "t", 0, "id", LogConfig())
    leader.append_as_leader(pbatch(0, pid=1, txn=True), 0, NOW)
    leader.append_end_txn_marker(1, 0, True, 7, 0, NOW)
    active = leader.segments[-1]
    follower = new_log(tmp_path)
    follower.append_as_follower(memoryview(bytearray(active.read_bytes(0, active.size))), NOW)
    assert follower.producer_state.producers[1].coordinator_epoch == 7
    with pytest.raises(KafkaError) as info:
        follower.producer_state.check_marker(1, 0, 6)
    assert info.value.code == ErrorCode.transaction_coordinator_fenced
    recovered = reopen(tmp_path, clean=False)  # no close: the marker's batch header is replayed
    assert recovered.producer_state.producers[1].coordinator_epoch == 7


def test_crash_rebuild_restores_open_transactions_and_the_transaction_index(tmp_path):
    plog = new_log(tmp_path)
    plog.close()  # snapshot at 0
    plog = reopen(tmp_path, clean=True)
    plog.append_as_leader(pbatch(0, pid=1, txn=True), 0, NOW)
    plog.append_end_txn_marker(1, 0, False, 0, 0, NOW)  # aborted: 0..3
    plog.append_as_leader(pbatch(0, pid=2, txn=True), 0, NOW)  # open from 4
    os.unlink(tmp_path / "t-0" / "00000000000000000000.txnindex")  # lost with the crash
    plog = reopen(tmp_path, clean=False)
    assert plog.producer_state.first_unstable_offset() == 4
    assert [(a.producer_id, a.first_offset, a.last_offset) for a in plog.collect_aborted_txns(0, 10)] == [(1, 0, 3)]
