"""Moving a replica between log dirs (JBOD, storage part): the future log catches up with the
current one while appends go on, swaps in with everything the current log held, and a crash
at any point loses nothing acknowledged (every append here is "acknowledged" once it returns)."""

from __future__ import annotations

import errno
import os
import time

from kbroker.protocol.record_builder import build_batch
from kbroker.storage import file_io
from kbroker.storage.file_io import FailPoint
from kbroker.storage.log_config import LogConfig
from kbroker.storage.log_dir_move import copy_step
from kbroker.storage.log_manager import DELETE_SUFFIX, FUTURE_SUFFIX, LogManager
from kbroker.storage.log_reads import batches_from

NOW = int(time.time() * 1000)


def batch(i: int) -> memoryview:
    return memoryview(bytearray(build_batch([(b"k%d" % i, b"v%d" % i + b"." * 200)], base_timestamp=NOW)))


def manager(tmp_path) -> LogManager:
    lm = LogManager([str(tmp_path / "a"), str(tmp_path / "b")], lambda _t: LogConfig(segment_bytes=2048))
    lm.startup()
    return lm


def contents(plog) -> list[bytes]:
    return list(batches_from(plog.segments, plog.log_start_offset))


def test_future_catches_up_under_appends_and_swaps_in_with_everything(tmp_path) -> None:
    lm = manager(tmp_path)
    current = lm.create("t", 0, "id")
    for i in range(20):
        current.append_as_leader(batch(i), 3, NOW)
    source_dir = lm.dir_of("t", 0)
    dest = next(d for d in lm.log_dirs if d != source_dir)
    future = lm.create_future("t", 0, dest, "id")
    assert os.path.basename(future.directory).endswith(FUTURE_SUFFIX)
    i = 20
    while not copy_step(current, future, NOW, max_bytes=600):
        current.append_as_leader(batch(i), 3, NOW)  # produces keep arriving during the move
        i += 1
    expected = contents(current)
    moved = lm.replace_current_with_future("t", 0)
    assert lm.get("t", 0) is moved and lm.dir_of("t", 0) == dest
    assert moved.directory == os.path.join(dest, "t-0")
    assert contents(moved) == expected and moved.log_end_offset == i
    assert moved.leader_epoch_cache.epochs == [3]
    assert not [n for n in os.listdir(source_dir) if n.startswith("t-0")]  # the old copy is gone
    moved.append_as_leader(batch(i), 4, NOW)
    lm.shutdown()
    again = manager(tmp_path)
    assert again.dir_of("t", 0) == dest and again.get("t", 0).log_end_offset == i + 1


def test_a_crash_mid_move_keeps_the_current_log_and_drops_the_future(tmp_path) -> None:
    lm = manager(tmp_path)
    current = lm.create("t", 0, "id")
    for i in range(10):
        current.append_as_leader(batch(i), 0, NOW)
    dest = next(d for d in lm.log_dirs if d != lm.dir_of("t", 0))
    future = lm.create_future("t", 0, dest, "id")
    copy_step(current, future, NOW, max_bytes=600)
    current.append_as_leader(batch(10), 0, NOW)
    expected = contents(current)
    # kill -9: nothing closed; the next start finds both directories
    again = manager(tmp_path)
    assert contents(again.get("t", 0)) == expected
    assert not [n for n in os.listdir(dest) if n.endswith(FUTURE_SUFFIX)]
    assert not again.future_logs


def test_a_crash_between_the_two_renames_completes_the_swap(tmp_path) -> None:
    lm = manager(tmp_path)
    current = lm.create("t", 0, "id")
    for i in range(10):
        current.append_as_leader(batch(i), 0, NOW)
    source_dir = lm.dir_of("t", 0)
    dest = next(d for d in lm.log_dirs if d != source_dir)
    future = lm.create_future("t", 0, dest, "id")
    while not copy_step(current, future, NOW):
        pass
    expected = contents(current)
    # the first rename of the swap happened, then the process died
    os.rename(current.directory, os.path.join(source_dir, "t-0.0123" + DELETE_SUFFIX))
    again = manager(tmp_path)
    assert again.dir_of("t", 0) == dest
    assert contents(again.get("t", 0)) == expected
    assert not [n for n in os.listdir(source_dir) if n.startswith("t-0")]


def test_a_truncated_current_log_is_followed(tmp_path) -> None:
    lm = manager(tmp_path)
    current = lm.create("t", 0, "id")
    for i in range(10):
        current.append_as_leader(batch(i), 1, NOW)
    dest = next(d for d in lm.log_dirs if d != lm.dir_of("t", 0))
    future = lm.create_future("t", 0, dest, "id")
    while not copy_step(current, future, NOW):
        pass
    current.truncate_to(6)  # a follower whose new leader had less
    for i in range(6, 9):
        current.append_as_leader(batch(100 + i), 2, NOW)
    while not copy_step(current, future, NOW):
        pass
    assert contents(future) == contents(current)
    assert future.leader_epoch_cache.epochs == current.leader_epoch_cache.epochs == [1, 2]


def test_a_failing_future_write_leaves_the_current_log_alone(tmp_path) -> None:
    lm = manager(tmp_path)
    current = lm.create("t", 0, "id")
    for i in range(5):
        current.append_as_leader(batch(i), 0, NOW)
    dest = next(d for d in lm.log_dirs if d != lm.dir_of("t", 0))
    future = lm.create_future("t", 0, dest, "id")
    file_io.inject(FailPoint("write", errno.ENOSPC, path_contains=FUTURE_SUFFIX, times=0))
    try:
        try:
            copy_step(current, future, NOW)
            raise AssertionError("the future log's write should fail")
        except OSError as exc:
            assert exc.errno == errno.ENOSPC
        lm.abandon_future("t", 0)
    finally:
        file_io.clear_failpoints()
    assert not [n for n in os.listdir(dest) if n.startswith("t-0")]
    current.append_as_leader(batch(5), 0, NOW)
    assert current.log_end_offset == 6


def test_a_failed_rename_at_the_swap_keeps_the_current_log(tmp_path) -> None:
    lm = manager(tmp_path)
    current = lm.create("t", 0, "id")
    for i in range(5):
        current.append_as_leader(batch(i), 0, NOW)
    source_dir = lm.dir_of("t", 0)
    dest = next(d for d in lm.log_dirs if d != source_dir)
    future = lm.create_future("t", 0, dest, "id")
    while not copy_step(current, future, NOW):
        pass
    file_io.inject(FailPoint("rename", errno.EIO, path_contains=os.path.join(dest, "t-0"), times=0))
    try:
        try:
            lm.replace_current_with_future("t", 0)
            raise AssertionError("the swap should fail")
        except OSError as exc:
            assert exc.errno == errno.EIO
    finally:
        file_io.clear_failpoints()
    assert lm.get("t", 0) is current and lm.dir_of("t", 0) == source_dir and not lm.future_logs
    assert os.path.isdir(os.path.join(source_dir, "t-0"))
    current.append_as_leader(batch(5), 0, NOW)
    expected = contents(current)
    lm.shutdown()
    again = manager(tmp_path)
    assert again.dir_of("t", 0) == source_dir and contents(again.get("t", 0)) == expected
