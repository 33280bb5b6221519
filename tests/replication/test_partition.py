"""Partition: high watermark on a single node, and long-poll waiters."""

from __future__ import annotations

import asyncio
import time
import uuid

import pytest
from kbroker.protocol.errors import ErrorCode, KafkaError
from kbroker.protocol.record_builder import build_batch
from kbroker.replication.partition import DataWaiter, Partition
from kbroker.replication.quorum.partition_registration import PartitionRegistration
from kbroker.storage.log import PartitionLog
from kbroker.storage.log_config import LogConfig


def make_partition(tmp_path, **config) -> Partition:
    plog = PartitionLog.create(str(tmp_path / "t-0"), "t", 0, "id", LogConfig(**config))
    return Partition("t", 0, uuid.uuid4(), plog, broker_id=1)


def records() -> memoryview:
    return memoryview(bytearray(build_batch([(b"k", b"v")], base_timestamp=int(time.time() * 1000))))


def test_high_watermark_follows_appends_and_wakes_waiters(tmp_path):
    async def scenario() -> None:
        partition = make_partition(tmp_path)
        waiter = DataWaiter()
        partition.add_waiter(waiter)
        partition.append_as_leader(records(), required_acks=1, now_ms=int(time.time() * 1000))
        assert partition.high_watermark == 1
        await asyncio.wait_for(waiter.future, 1)
        assert waiter.rearm() == {("t", 0)}  # it knows which partition woke it

    asyncio.run(scenario())


def test_finished_waits_are_forgotten(tmp_path):
    async def scenario() -> None:
        partition = make_partition(tmp_path)
        for _ in range(100):  # long polls that timed out remove themselves
            waiter = DataWaiter()
            partition.add_waiter(waiter)
            partition.remove_waiter(waiter)
        woken = DataWaiter()
        partition.add_waiter(woken)
        partition.wake_waiters()  # and a wake forgets the ones it woke
        assert partition._waiters == set() and woken.future.done()

    asyncio.run(scenario())


def test_acks_all_needs_min_insync_replicas(tmp_path):
    """Two replicas, only the leader in sync, min.insync.replicas=2: NOT_ENOUGH_REPLICAS and
    nothing appended."""
    partition = make_partition(tmp_path, min_insync_replicas=2)
    now_ms = int(time.time() * 1000)
    partition.become_leader(PartitionRegistration(replicas=(1, 2), isr=(1,), leader=1, leader_epoch=0,
                                                  partition_epoch=0), now_ms)
    with pytest.raises(KafkaError) as err:
        partition.append_as_leader(records(), required_acks=-1, now_ms=now_ms)
    assert err.value.code == ErrorCode.not_enough_replicas
    assert partition.log_end_offset == 0


def test_acks_all_on_one_replica_needs_only_the_leader(tmp_path):
    """Kafka 4 compares the ISR with the effective min ISR (min.insync.replicas capped at the
    replication factor): a topic of one replica accepts acks=all where min.insync.replicas=2."""
    partition = make_partition(tmp_path, min_insync_replicas=2)
    info = partition.append_as_leader(records(), required_acks=-1, now_ms=int(time.time() * 1000))
    assert info.last_offset == 0
