"""The high watermark's advance answers acks=all produces before it wakes long polls, and the
``kbroker.trace`` stage of a follower's position fires only when the position moves."""

from __future__ import annotations

import asyncio
import logging
import time
import uuid

from kbroker.protocol.errors import ErrorCode
from kbroker.protocol.record_builder import build_batch
from kbroker.replication.partition import DataWaiter, Partition
from kbroker.replication.quorum.partition_registration import PartitionRegistration
from kbroker.storage.log import PartitionLog
from kbroker.storage.log_config import LogConfig


def led_partition(tmp_path) -> tuple[Partition, int]:
    """Partition t-0 led by broker 1, broker 2 following in the ISR, min.insync.replicas=2."""
    plog = PartitionLog.create(str(tmp_path / "t-0"), "t", 0, "id", LogConfig(min_insync_replicas=2))
    partition = Partition("t", 0, uuid.uuid4(), plog, broker_id=1)
    now_ms = int(time.time() * 1000)
    partition.become_leader(PartitionRegistration(replicas=(1, 2), isr=(1, 2), leader=1, leader_epoch=0,
                                                  partition_epoch=0), now_ms)
    return partition, now_ms


def append(partition: Partition, now_ms: int) -> None:
    batch = memoryview(bytearray(build_batch([(b"k", b"v")], base_timestamp=now_ms)))
    partition.append_as_leader(batch, required_acks=-1, now_ms=now_ms)


def test_an_acks_all_produce_is_answered_before_long_polls_wake(tmp_path):
    """The follower fetch that advances the high watermark completes the delayed produce first:
    its task resumes before any long poll the advance woke (asyncio keeps the order)."""

    async def scenario() -> list[str]:
        partition, now_ms = led_partition(tmp_path)
        append(partition, now_ms)
        committed = partition.wait_for_commit(1)
        parked = DataWaiter()  # another fetch parked on the partition after the append
        partition.add_waiter(parked)
        order: list[str] = []
        committed.add_done_callback(lambda _f: order.append("produce"))
        parked.future.add_done_callback(lambda _f: order.append("long poll"))
        partition.update_follower_fetch_state(2, 1, 0, now_ms, partition.log_end_offset, -1)
        assert partition.high_watermark == 1
        assert await asyncio.wait_for(committed, 1) == ErrorCode.none
        await asyncio.wait_for(parked.future, 1)
        return order

    assert asyncio.run(scenario()) == ["produce", "long poll"]


def test_a_follower_position_is_traced_only_when_it_moves(tmp_path, caplog):
    async def scenario() -> None:
        partition, now_ms = led_partition(tmp_path)
        append(partition, now_ms)
        for _ in range(3):  # a caught-up follower's sessionless fetches: one move, then the same position
            partition.update_follower_fetch_state(2, 1, 0, now_ms, partition.log_end_offset, -1)

    with caplog.at_level(logging.DEBUG, logger="kbroker.trace"):
        asyncio.run(scenario())
    positions = [r.getMessage() for r in caplog.records if "stage=follower_position" in r.getMessage()]
    assert len(positions) == 1 and "fetch_offset=1 " in positions[0]
