"""LogManager's shutdown on several threads (num.recovery.threads.per.data.dir): every log is
flushed and closed, the dir is marked clean, and nothing is lost or left open."""

from __future__ import annotations

import os
import time

from kbroker.protocol.record_builder import build_batch
from kbroker.storage.log_config import LogConfig
from kbroker.storage.log_manager import CLEAN_SHUTDOWN_FILE, LogManager

NOW = int(time.time() * 1000)
PARTITIONS = 200


def open_descriptors() -> int:
    return len(os.listdir("/proc/self/fd"))


def test_a_shutdown_on_eight_threads_closes_every_log_and_loses_nothing(tmp_path):
    baseline = open_descriptors()
    # A descriptor budget far below the partition count: the threads must not close each
    # other's segment files while they sync them.
    manager = LogManager([str(tmp_path)], lambda _topic: LogConfig(segment_bytes=300), max_open_segment_files=3,
                         recovery_threads_per_data_dir=8)
    manager.startup()
    logs = [manager.create("t", p, "id") for p in range(PARTITIONS)]
    for round_ in range(2):
        for p, plog in enumerate(logs):
            batch = build_batch([(None, b"%d-%d" % (p, round_) + b"." * 150)], base_timestamp=NOW)
            plog.append_as_leader(memoryview(bytearray(batch)), 0, NOW)
    manager.shutdown()
    assert open_descriptors() == baseline
    assert os.path.exists(tmp_path / CLEAN_SHUTDOWN_FILE)

    again = LogManager([str(tmp_path)], lambda _topic: LogConfig(segment_bytes=300))
    again.startup()
    assert sorted(again.logs) == [("t", p) for p in range(PARTITIONS)]
    for (_topic, p), plog in again.logs.items():
        assert (plog.log_start_offset, plog.log_end_offset, plog.recovery_point) == (0, 2, 2)
        piece = plog.read(1, 1 << 20, plog.log_end_offset, True)
        assert b"%d-1." % p in piece.segment.read_bytes(piece.position, piece.length)
    again.shutdown()


def test_high_watermark_checkpoint_is_kept_within_the_log_and_survives_partitions_not_yet_taken_up(tmp_path):
    """replication-offset-checkpoint (Kafka's format): a checkpointed high watermark is read back
    clamped to [log start, log end]; a log without one resumes from its log start; writing the
    file again before the replica manager has taken a partition up keeps that partition's entry."""
    manager = LogManager([str(tmp_path)], lambda _topic: LogConfig())
    manager.startup()
    for p in range(3):
        plog = manager.create("t", p, "id")
        plog.append_as_leader(memoryview(bytearray(build_batch([(None, b"v")] * 4, base_timestamp=NOW))), 0, NOW)
    manager.shutdown(high_watermarks={("t", 0): 2, ("t", 1): 9})
    assert (tmp_path / "replication-offset-checkpoint").read_text() == "0\n2\nt 0 2\nt 1 9\n"

    again = LogManager([str(tmp_path)], lambda _topic: LogConfig())
    again.startup()
    assert [again.checkpointed_high_watermark("t", p) for p in range(3)] == [2, 4, 0]
    again.checkpoint_high_watermarks({("t", 2): 1})
    assert (tmp_path / "replication-offset-checkpoint").read_text() == "0\n3\nt 0 2\nt 1 9\nt 2 1\n"
    again.shutdown()
