"""Storage faults driven by failpoints (ENOSPC, EIO, short writes at the Nth call) on a real
directory: every write path lands whole or leaves the log exactly as it was, acknowledged
records survive a restart, and what cannot be undone takes the log offline."""

from __future__ import annotations

import errno
import logging
import os
import time

import pytest
from kbroker.protocol.record_builder import build_batch
from kbroker.protocol.records import TRANSACTIONAL_FLAG, iter_records
from kbroker.storage import file_io
from kbroker.storage.file_io import FailPoint, TornWriteError, inject
from kbroker.storage.log import LogOfflineError, PartitionLog
from kbroker.storage.log_config import LogConfig
from kbroker.storage.log_manager import CLEAN_SHUTDOWN_FILE, RECOVERY_POINT_FILE, LogManager

NOW = int(time.time() * 1000)


pytestmark = pytest.mark.usefixtures("no_failpoints_left")


def batch(n: int, first_value: int = 0, size: int = 200) -> memoryview:
    records = [(b"k%d" % i, b"%08d" % (first_value + i) + b"x" * size) for i in range(n)]
    return memoryview(bytearray(build_batch(records, base_timestamp=NOW)))


def pbatch(seq: int, n: int = 3, pid: int = 7, txn: bool = False) -> memoryview:
    raw = build_batch([(b"k", b"v%d" % i) for i in range(n)], base_timestamp=NOW, producer_id=pid,
                      producer_epoch=0, base_sequence=seq, attributes=TRANSACTIONAL_FLAG if txn else 0)
    return memoryview(bytearray(raw))


def new_log(tmp_path, **config) -> PartitionLog:
    return PartitionLog.create(str(tmp_path / "t-0"), "t", 0, "id", LogConfig(**config))


def reopen(tmp_path, clean: bool, **config) -> PartitionLog:
    plog = PartitionLog(str(tmp_path / "t-0"), "t", 0, LogConfig(**config))
    plog.load(clean_shutdown=clean)
    return plog


def values(plog: PartitionLog) -> list[tuple[int, int]]:
    """(offset, value number) of every record, read back through the log's own read path."""
    out, offset = [], plog.log_start_offset
    while offset < plog.log_end_offset:
        piece = plog.read(offset, 1 << 20, plog.log_end_offset, True)
        data = piece.segment.read_bytes(piece.position, piece.length)
        records = [r for r in iter_records(data) if r.offset >= offset]
        out += [(r.offset, int(r.value[:8])) for r in records]
        offset = records[-1].offset + 1
    return out


def log_file_sizes(tmp_path) -> dict[str, int]:
    directory = tmp_path / "t-0"
    return {name: os.path.getsize(directory / name) for name in sorted(os.listdir(directory))}


def test_full_disk_during_append_leaves_the_segment_as_it_was(tmp_path):
    plog = new_log(tmp_path)
    plog.append_as_leader(batch(5), 0, NOW)
    before = log_file_sizes(tmp_path)
    inject(FailPoint("write", errno.ENOSPC, written=100, path_contains=".log"))  # a short write, then full
    with pytest.raises(OSError) as info:
        plog.append_as_leader(batch(5, 5), 0, NOW)
    assert info.value.errno == errno.ENOSPC
    assert log_file_sizes(tmp_path) == before  # the 100 bytes that got in were cut again
    assert plog.log_end_offset == 5
    # Room again: the next append lands right after the last complete batch.
    assert plog.append_as_leader(batch(5, 5), 0, NOW).first_offset == 5
    plog.close()
    assert values(reopen(tmp_path, clean=False)) == [(i, i) for i in range(10)]


def test_a_write_whose_undo_fails_blocks_appends_until_the_cut_succeeds(tmp_path):
    plog = new_log(tmp_path)
    plog.append_as_leader(batch(3), 0, NOW)
    size = plog.active_segment.size
    inject(FailPoint("write", errno.EIO, written=50, path_contains=".log"))
    cut = inject(FailPoint("truncate", errno.EIO, times=2, path_contains=".log"))
    with pytest.raises(TornWriteError):
        plog.append_as_leader(batch(3, 3), 0, NOW)
    assert plog.active_segment.torn
    assert os.path.getsize(plog.active_segment.log_path) == size + 50  # the torn bytes are still there
    with pytest.raises(OSError):  # the second cut fails too: nothing is written after the torn bytes
        plog.append_as_leader(batch(3, 3), 0, NOW)
    assert cut.fired == 2 and os.path.getsize(plog.active_segment.log_path) == size + 50
    assert values(plog) == [(0, 0), (1, 1), (2, 2)]  # reads never see the torn bytes
    assert plog.append_as_leader(batch(3, 3), 0, NOW).first_offset == 3  # the cut works now
    assert values(plog) == [(i, i) for i in range(6)]


def test_torn_tail_left_at_shutdown_makes_the_next_start_recover(tmp_path):
    manager = LogManager([str(tmp_path)], lambda _topic: LogConfig())
    manager.startup()
    plog = manager.create("t", 0, "id")
    plog.append_as_leader(batch(3), 0, NOW)
    inject(FailPoint("write", errno.EIO, written=50, path_contains=".log"))
    inject(FailPoint("truncate", errno.EIO, times=0, path_contains=".log"))
    with pytest.raises(TornWriteError):
        plog.append_as_leader(batch(3, 3), 0, NOW)
    manager.shutdown()
    assert not os.path.exists(tmp_path / CLEAN_SHUTDOWN_FILE)
    file_io.clear_failpoints()
    again = LogManager([str(tmp_path)], lambda _topic: LogConfig())
    again.startup()
    assert values(again.get("t", 0)) == [(0, 0), (1, 1), (2, 2)]


def test_roll_that_cannot_write_the_old_indexes_keeps_the_active_segment(tmp_path):
    plog = new_log(tmp_path, segment_bytes=1500)
    plog.append_as_leader(batch(5), 0, NOW)
    inject(FailPoint("write", errno.ENOSPC, path_contains=".timeindex"))
    with pytest.raises(OSError):
        plog.append_as_leader(batch(5, 5), 0, NOW)  # would roll
    assert [s.base_offset for s in plog.segments] == [0]
    assert plog.append_as_leader(batch(5, 5), 0, NOW).first_offset == 5
    assert [s.base_offset for s in plog.segments] == [0, 5]
    plog.close()
    assert values(reopen(tmp_path, clean=True, segment_bytes=1500)) == [(i, i) for i in range(10)]


def test_roll_that_cannot_create_the_new_segment_keeps_the_active_segment(tmp_path):
    plog = new_log(tmp_path, segment_bytes=1500)
    plog.append_as_leader(batch(5), 0, NOW)
    inject(FailPoint("open", errno.ENOSPC, path_contains="00000000000000000005.log"))
    with pytest.raises(OSError):
        plog.append_as_leader(batch(5, 5), 0, NOW)
    assert plog.log_end_offset == 5 and len(plog.segments) == 1
    assert plog.append_as_leader(batch(5, 5), 0, NOW).first_offset == 5
    assert values(plog) == [(i, i) for i in range(10)]


def test_failed_fsync_takes_the_log_offline_and_reads_go_on(tmp_path):
    plog = new_log(tmp_path, flush_messages=1)
    inject(FailPoint("fsync", errno.EIO, path_contains=".log"))
    with pytest.raises(LogOfflineError):
        plog.append_as_leader(batch(2), 0, NOW)  # written, but its fsync failed: never acknowledged
    with pytest.raises(LogOfflineError) as info:
        plog.append_as_leader(batch(2, 2), 0, NOW)
    assert info.value.errno == errno.EIO
    assert plog.needs_recovery
    assert values(plog) == [(0, 0), (1, 1)]


def test_leader_epoch_checkpoint_that_cannot_be_written_fails_the_append_and_changes_nothing(tmp_path):
    plog = new_log(tmp_path)
    plog.append_as_leader(batch(2), 3, NOW)
    inject(FailPoint("write", errno.ENOSPC, path_contains="leader-epoch-checkpoint"))
    with pytest.raises(OSError):
        plog.append_as_leader(batch(2, 2), 4, NOW)  # a new epoch must be on disk before its records
    assert plog.leader_epoch_cache.epochs == [3]
    assert plog.log_end_offset == 2
    assert not [n for n in os.listdir(tmp_path / "t-0") if n.endswith(".tmp")]
    assert reopen(tmp_path, clean=False).leader_epoch_cache.epochs == [3]


def test_idempotent_retry_after_a_failed_append_is_written_not_taken_for_a_duplicate(tmp_path):
    plog = new_log(tmp_path)
    plog.append_as_leader(pbatch(0), 0, NOW)
    inject(FailPoint("write", errno.ENOSPC, path_contains=".log"))
    with pytest.raises(OSError):
        plog.append_as_leader(pbatch(3), 0, NOW)
    retried = plog.append_as_leader(pbatch(3), 0, NOW)
    assert (retried.first_offset, retried.last_offset) == (3, 5)
    assert plog.append_as_leader(pbatch(3), 0, NOW).first_offset == 3  # now it is a duplicate


def test_producer_snapshot_that_cannot_be_written_does_not_fail_the_roll(tmp_path):
    plog = new_log(tmp_path, segment_bytes=100)
    plog.append_as_leader(pbatch(0), 0, NOW)
    inject(FailPoint("write", errno.ENOSPC, path_contains=".snapshot"))
    assert plog.append_as_leader(pbatch(3), 0, NOW).first_offset == 3  # rolled without a snapshot
    assert len(plog.segments) == 2
    assert not [n for n in os.listdir(tmp_path / "t-0") if n.endswith(".tmp")]
    again = reopen(tmp_path, clean=False, segment_bytes=100)  # the state comes back by replay
    assert again.append_as_leader(pbatch(3), 0, NOW).first_offset == 3


def test_abort_marker_whose_index_entry_fails_takes_the_log_offline_and_restart_rebuilds_it(tmp_path):
    plog = new_log(tmp_path)
    plog.close()  # a snapshot at 0: the replay after the crash starts there
    plog = reopen(tmp_path, clean=True)
    plog.append_as_leader(pbatch(0, txn=True), 0, NOW)
    inject(FailPoint("write", errno.ENOSPC, path_contains=".txnindex"))
    with pytest.raises(OSError):
        plog.append_end_txn_marker(7, 0, False, 0, 0, NOW)
    assert plog.offline is not None
    with pytest.raises(LogOfflineError):
        plog.append_as_leader(batch(1), 0, NOW)
    file_io.clear_failpoints()
    again = reopen(tmp_path, clean=False)
    assert [(a.producer_id, a.first_offset, a.last_offset) for a in again.collect_aborted_txns(0, 10)] == [(7, 0, 3)]


def test_follower_append_on_a_full_disk_is_undone(tmp_path):
    leader = new_log(tmp_path / "leader")
    leader.append_as_leader(batch(4), 2, NOW)
    leader.append_as_leader(batch(4, 4), 2, NOW)

    def fetched(offset: int, end: int) -> memoryview:
        piece = leader.read(offset, 1 << 20, end, True)
        return memoryview(bytearray(piece.segment.read_bytes(piece.position, piece.length)))

    follower = new_log(tmp_path / "follower")
    follower.append_as_follower(fetched(0, 4), NOW)
    inject(FailPoint("write", errno.ENOSPC, written=30, path_contains="follower"))
    with pytest.raises(OSError):
        follower.append_as_follower(fetched(4, 8), NOW)
    assert follower.log_end_offset == 4
    follower.append_as_follower(fetched(4, 8), NOW)
    assert values(follower) == values(leader)


def test_checkpoint_that_cannot_be_written_keeps_the_old_one_and_the_dir_is_not_marked_clean(tmp_path):
    manager = LogManager([str(tmp_path)], lambda _topic: LogConfig())
    manager.startup()
    manager.create("t", 0, "id").append_as_leader(batch(2), 0, NOW)
    assert manager.checkpoint() == []
    old = (tmp_path / RECOVERY_POINT_FILE).read_bytes()
    inject(FailPoint("write", errno.ENOSPC, path_contains="checkpoint", times=0))
    assert manager.checkpoint() == [str(tmp_path)]
    assert (tmp_path / RECOVERY_POINT_FILE).read_bytes() == old
    assert not [n for n in os.listdir(tmp_path) if n.endswith(".tmp")]
    manager.shutdown()
    assert not os.path.exists(tmp_path / CLEAN_SHUTDOWN_FILE)
    file_io.clear_failpoints()
    again = LogManager([str(tmp_path)], lambda _topic: LogConfig())
    again.startup()
    assert values(again.get("t", 0)) == [(0, 0), (1, 1)]


def test_indexes_that_cannot_be_written_at_close_are_rebuilt_at_the_next_start(tmp_path):
    plog = new_log(tmp_path, index_interval_bytes=100)
    for i in range(6):
        plog.append_as_leader(batch(2, 2 * i), 0, NOW)
    newest = plog.max_timestamp_offset()
    inject(FailPoint("write", errno.ENOSPC, path_contains=".index", times=0))
    inject(FailPoint("write", errno.ENOSPC, path_contains=".timeindex", times=0))
    plog.close()
    file_io.clear_failpoints()
    assert os.path.getsize(tmp_path / "t-0" / "00000000000000000000.log") > 0
    assert not os.path.exists(tmp_path / "t-0" / "00000000000000000000.index")
    again = reopen(tmp_path, clean=True, index_interval_bytes=100)
    assert again.active_segment.offset_index.offsets  # rebuilt, not trusted empty
    assert again.max_timestamp_offset() == newest
    assert values(again) == [(i, i) for i in range(12)]


def test_creating_a_partition_on_a_full_disk_leaves_no_directory(tmp_path):
    manager = LogManager([str(tmp_path)], lambda _topic: LogConfig())
    manager.startup()
    inject(FailPoint("write", errno.ENOSPC, path_contains="partition.metadata"))
    with pytest.raises(OSError):
        manager.create("t", 0, "id")
    assert not os.path.exists(tmp_path / "t-0")
    assert manager.get("t", 0) is None


def test_an_episode_of_failures_is_logged_once_when_it_starts_and_once_when_it_ends(tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="kbroker.storage")
    plog = new_log(tmp_path)
    inject(FailPoint("write", errno.ENOSPC, path_contains=".log", times=50))
    for _ in range(50):
        with pytest.raises(OSError):
            plog.append_as_leader(batch(1), 0, NOW)
    plog.append_as_leader(batch(1), 0, NOW)
    lines = [r for r in caplog.records if r.name == "kbroker.storage.log_dir_health"]
    assert [r.levelname for r in lines] == ["ERROR", "WARNING"]
    assert "after 50 failed write(s)" in lines[1].getMessage()
    assert plog.health.failed_writes_total == 50 and plog.health.episodes_total == 1


def test_epochs_lost_with_an_unflushed_checkpoint_come_back_from_the_batches(tmp_path):
    plog = new_log(tmp_path)
    plog.append_as_leader(batch(2), 3, NOW)
    plog.flush(NOW)  # epoch 3 is durable with the records up to here
    plog.append_as_leader(batch(2, 2), 5, NOW)  # epoch 5's checkpoint is written but not fsynced
    plog.close()
    # An OS crash lost the unflushed checkpoint (it held only epoch 3 when last fsynced).
    (tmp_path / "t-0" / "leader-epoch-checkpoint").write_text("0\n1\n3 0\n")
    again = reopen(tmp_path, clean=False)
    assert (again.leader_epoch_cache.epochs, again.leader_epoch_cache.start_offsets) == ([3, 5], [0, 2])
