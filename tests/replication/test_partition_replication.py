"""Partition leadership on one broker: follower tracking, high watermark, ISR changes, acks=all.

The leader is a real ReplicaManager over real PartitionLogs; followers are represented by the
Fetch requests they would send (``ReplicaManager.fetch`` with their replica id), and the test's
StandInController answers AlterPartition and publishes registrations with apply_partition.
"""

from __future__ import annotations

import asyncio
import os
import time
import uuid
from dataclasses import replace

import pytest
from kbroker.protocol.errors import ErrorCode
from kbroker.protocol.record_builder import build_batch
from kbroker.replication.partition import DataWaiter
from kbroker.replication.quorum.partition_registration import PartitionRegistration
from kbroker.replication.replica_manager import FetchParams, FetchRequestPartition, ProduceResult
from kbroker.replication.replication_settings import ReplicationSettings
from kbroker.storage.log_config import LogConfig

from tests.replication.cluster_harness import ReplicaNode, StandInController

LAG_MS = 1000
SETTINGS = ReplicationSettings(replica_lag_time_max_ms=LAG_MS)


def records(n: int = 1) -> memoryview:
    now = int(time.time() * 1000)
    return memoryview(bytearray(build_batch([(b"k", b"v")] * n, base_timestamp=now)))


def leader_node(tmp_path, replicas: list[int], **config: int) -> tuple[StandInController, ReplicaNode]:
    controller = StandInController()
    node = ReplicaNode(1, "127.0.0.1", str(tmp_path / "n1"), LogConfig(**config))
    controller.nodes[1] = node
    node.replica_manager.configure_cluster(controller.links(node), SETTINGS)
    controller.create("t", replicas)
    return controller, node


async def follower_fetch(node: ReplicaNode, replica_id: int, offset: int, last_fetched_epoch: int = -1,
                         current_leader_epoch: int = -1, broker_epoch: int = 1):
    request = FetchRequestPartition("t", 0, offset, 1 << 20, current_leader_epoch, last_fetched_epoch)
    results = await node.replica_manager.fetch([request], 0, 1, 1 << 20, 0, FetchParams(replica_id, broker_epoch))
    return results[0]


async def settle() -> None:
    """Let the AlterPartition task the leader started run to its answer (no I/O involved)."""
    for _ in range(3):
        await asyncio.sleep(0)


def test_high_watermark_is_the_smallest_isr_log_end_offset(tmp_path):
    async def scenario() -> None:
        _controller, node = leader_node(tmp_path, [1, 2, 3])
        partition = node.partition("t")
        node.replica_manager.append_records("t", 0, records(3), 1)
        assert (partition.log_end_offset, partition.high_watermark) == (3, 0)
        waiter = DataWaiter()
        partition.add_waiter(waiter)
        result = await follower_fetch(node, 2, 0)
        assert result.records is not None and result.high_watermark == 0  # followers read past the HW
        await follower_fetch(node, 2, 3)
        assert partition.high_watermark == 0  # follower 3 still unknown
        await follower_fetch(node, 3, 2)
        assert partition.high_watermark == 2
        await asyncio.wait_for(waiter.future, 1)
        await follower_fetch(node, 3, 3)
        assert partition.high_watermark == 3
        # A consumer still reads only below the high watermark.
        consumer = await node.replica_manager.fetch([FetchRequestPartition("t", 0, 3, 1 << 20)], 0, 1, 1 << 20, 0)
        assert consumer[0].records is None and consumer[0].high_watermark == 3

    asyncio.run(scenario())


def test_strict_min_isr_holds_the_high_watermark(tmp_path):
    async def scenario() -> None:
        controller, node = leader_node(tmp_path, [1, 2, 3], min_insync_replicas=2)
        controller.registrations[("t", 0)] = PartitionRegistration((1, 2, 3), (1,), 1, 0, 1)
        controller.publish("t", 0)
        partition = node.partition("t")
        assert partition.isr == [1]
        refused = node.replica_manager.append_records("t", 0, records(), -1)
        assert refused.error == ErrorCode.not_enough_replicas
        accepted = node.replica_manager.append_records("t", 0, records(), 1)
        assert accepted.error == ErrorCode.none
        assert partition.high_watermark == 0  # KIP-966: under min ISR the HW does not move

    asyncio.run(scenario())


def test_acks_all_waits_for_the_isr_and_times_out_without_it(tmp_path):
    async def scenario() -> None:
        _controller, node = leader_node(tmp_path, [1, 2])
        rm = node.replica_manager
        first = rm.append_records("t", 0, records(2), -1)
        assert first.pending is not None
        waiting = asyncio.ensure_future(rm.await_acks([first], 5000))
        await asyncio.sleep(0)
        assert not waiting.done()
        await follower_fetch(node, 2, 2)
        await asyncio.wait_for(waiting, 1)
        assert (first.error, first.base_offset) == (ErrorCode.none, 0)
        second = rm.append_records("t", 0, records(), -1)
        await rm.await_acks([second], 50)
        assert second.error == ErrorCode.request_timed_out
        assert node.partition("t").high_watermark == 2

    asyncio.run(scenario())


def test_acks_all_answers_not_leader_when_leadership_moves(tmp_path):
    async def scenario() -> None:
        controller, node = leader_node(tmp_path, [1, 2])
        rm = node.replica_manager
        pending = rm.append_records("t", 0, records(), -1)
        waiting = asyncio.ensure_future(rm.await_acks([pending], 5000))
        await asyncio.sleep(0)
        controller.elect("t", 0, leader=2)
        await asyncio.wait_for(waiting, 1)
        assert pending.error == ErrorCode.not_leader_or_follower

    asyncio.run(scenario())


def test_follower_refuses_producers_and_consumers(tmp_path):
    async def scenario() -> None:
        _controller, node = leader_node(tmp_path, [2, 1])  # broker 2 leads, this broker follows
        rm = node.replica_manager
        partition = node.partition("t")
        assert not partition.is_leader and partition.leader_id == 2
        assert rm.append_records("t", 0, records(), 1).error == ErrorCode.not_leader_or_follower
        consumer = await rm.fetch([FetchRequestPartition("t", 0, 0, 1 << 20)], 0, 1, 1 << 20, 0)
        assert consumer[0].error == ErrorCode.not_leader_or_follower
        replica = await follower_fetch(node, 3, 0)
        assert replica.error == ErrorCode.not_leader_or_follower

    asyncio.run(scenario())


def test_isr_shrinks_after_lag_time_and_expands_when_caught_up(tmp_path):
    async def scenario() -> None:
        controller, node = leader_node(tmp_path, [1, 2, 3])
        partition = node.partition("t")
        node.replica_manager.append_records("t", 0, records(2), 1)
        await follower_fetch(node, 2, 2)
        now = int(time.time() * 1000)
        partition.maybe_shrink_isr(now + LAG_MS + 100)
        assert partition.pending_isr == [1, 2]  # Kafka: a follower at the leader's end is never late
        assert partition.isr == [1, 2, 3]  # applied only from the controller's answer
        await settle()
        assert partition.isr == [1, 2] and partition.partition_epoch == 1
        node.replica_manager.append_records("t", 0, records(1), 1)
        partition.maybe_shrink_isr(now + LAG_MS // 2)
        assert partition.pending_isr is None  # follower 2 is behind, but not for long yet
        partition.maybe_shrink_isr(now + LAG_MS + 100)
        assert partition.pending_isr == [1]
        await settle()
        assert partition.isr == [1] and partition.partition_epoch == 2
        # A new leader epoch (same leader): followers outside the ISR start "not caught up",
        # so with the ISR = the leader alone everything written is committed.
        controller.elect("t", 0, leader=1)
        assert partition.high_watermark == 3 and partition.leader_epoch_start_offset == 3
        # Follower 3 catches up: at the HW and past the start of this leader epoch -> proposed.
        await follower_fetch(node, 3, 2)
        assert partition.pending_isr is None
        await follower_fetch(node, 3, 3)
        assert partition.pending_isr == [1, 3]
        await settle()
        assert partition.isr == [1, 3] and partition.partition_epoch == 4
        assert controller.alter_requests == [("t", 0, [1, 2]), ("t", 0, [1]), ("t", 0, [1, 3])]

    asyncio.run(scenario())


def test_only_an_eligible_follower_joins_the_isr(tmp_path):
    async def scenario() -> None:
        controller = StandInController()
        node = ReplicaNode(1, "127.0.0.1", str(tmp_path / "n1"), LogConfig())
        controller.nodes[1] = node
        # KIP-903: the broker epoch the follower's fetch carries must be the one it registered with.
        links = replace(controller.links(node), replica_eligible=lambda broker, epoch: (broker, epoch) == (2, 7))
        node.replica_manager.configure_cluster(links, SETTINGS)
        controller.create("t", [1, 2])
        controller.registrations[("t", 0)] = PartitionRegistration((1, 2), (1,), 1, 0, 1)
        controller.publish("t", 0)
        partition = node.partition("t")
        await follower_fetch(node, 2, 0, broker_epoch=6)  # a restarted broker's stale epoch
        assert partition.pending_isr is None
        await follower_fetch(node, 2, 0, broker_epoch=7)
        assert partition.pending_isr == [1, 2]
        await settle()
        assert partition.isr == [1, 2]

    asyncio.run(scenario())


def test_a_caught_up_follower_joins_once_its_registration_arrives_without_fetching_again(tmp_path):
    """An incremental fetch session reads an idle partition only when it changes, so a follower
    whose fetch came before its new broker epoch was replayed here would otherwise never join
    (seen: a restarted broker left out of the ISRs of idle partitions for good)."""
    async def scenario() -> None:
        controller = StandInController()
        node = ReplicaNode(1, "127.0.0.1", str(tmp_path / "n1"), LogConfig())
        controller.nodes[1] = node
        registered = {2: 6}  # the image still holds broker 2's previous incarnation
        links = replace(controller.links(node), replica_eligible=lambda broker, epoch: registered.get(broker) == epoch)
        node.replica_manager.configure_cluster(links, SETTINGS)
        controller.create("t", [1, 2])
        controller.registrations[("t", 0)] = PartitionRegistration((1, 2), (1,), 1, 0, 1)
        controller.publish("t", 0)
        partition = node.partition("t")
        await follower_fetch(node, 2, 0, broker_epoch=7)  # the new incarnation, caught up
        assert partition.pending_isr is None
        registered[2] = 7  # its RegisterBrokerRecord replayed
        node.replica_manager.broker_registrations_changed({2})
        assert partition.pending_isr == [1, 2]
        await settle()
        assert partition.isr == [1, 2]

    asyncio.run(scenario())


def test_a_follower_not_heard_from_within_the_lag_time_is_not_readmitted_without_a_fetch(tmp_path):
    """Kafka admits a follower on its fetch; the re-check stands in for an incremental fetch that
    skipped an idle partition, so it must not readmit a follower that stopped fetching (cut off)."""
    async def scenario() -> None:
        controller, node = leader_node(tmp_path, [1, 2])
        controller.registrations[("t", 0)] = PartitionRegistration((1, 2), (1,), 1, 0, 1)
        controller.publish("t", 0)
        partition = node.partition("t")
        partition.pending_isr = [1]  # another ISR change in flight: the fetch cannot propose
        await follower_fetch(node, 2, 0)
        partition.pending_isr = None
        partition.remote_replicas[2].last_fetch_time_ms -= 2 * LAG_MS  # ... and it went quiet since
        node.replica_manager.broker_registrations_changed({2})
        assert partition.pending_isr is None and partition.isr == [1]

    asyncio.run(scenario())


async def follower_outside_the_isr_holding_the_high_watermark(tmp_path, eligible: dict[int, bool]):
    """A leader of [1, 2, 3] with records at offsets 0-1: follower 3 holds both, follower 2
    only the first and is caught up as of a moment ago; then the controller's registration
    takes 2 out of the ISR (it was fenced) before this broker has replayed the fencing, so 2
    still counts as about to join and the high watermark stays at 1."""
    controller = StandInController()
    node = ReplicaNode(1, "127.0.0.1", str(tmp_path / "n1"), LogConfig())
    controller.nodes[1] = node
    links = replace(controller.links(node), replica_eligible=lambda broker, _epoch: eligible.get(broker, True))
    node.replica_manager.configure_cluster(links, SETTINGS)
    controller.create("t", [1, 2, 3])
    partition = node.partition("t")
    node.replica_manager.append_records("t", 0, records(1), 1)
    await follower_fetch(node, 2, 1)
    await follower_fetch(node, 3, 1)
    node.replica_manager.append_records("t", 0, records(1), 1)
    await follower_fetch(node, 3, 2)
    controller.registrations[("t", 0)] = PartitionRegistration((1, 2, 3), (1, 3), 1, 0, 1)
    controller.publish("t", 0)
    assert partition.high_watermark == 1
    return node, partition


def test_a_fenced_follower_replayed_after_its_isr_removal_no_longer_holds_the_high_watermark(tmp_path):
    """Seen with follower fetch sessions: a paused broker was fenced, the controller's ISR change
    was applied before the fencing, the high watermark stayed one record short and a
    transaction's PrepareCommit never committed; no fetch re-reads an idle partition in a
    session to notice."""
    async def scenario() -> None:
        eligible: dict[int, bool] = {}
        node, partition = await follower_outside_the_isr_holding_the_high_watermark(tmp_path, eligible)
        eligible[2] = False  # its FenceBrokerRecord replayed
        node.replica_manager.broker_registrations_changed({2})
        assert partition.high_watermark == 2

    asyncio.run(scenario())


def test_a_follower_outside_the_isr_holds_the_high_watermark_only_within_the_lag_time(tmp_path):
    async def scenario() -> None:
        node, partition = await follower_outside_the_isr_holding_the_high_watermark(tmp_path, {})
        node.replica_manager.shrink_isrs(int(time.time() * 1000) + 2 * LAG_MS)  # the ISR round, later
        assert partition.high_watermark == 2

    asyncio.run(scenario())


def test_one_alter_partition_in_flight_and_stale_answers_are_dropped(tmp_path):
    async def scenario() -> None:
        controller, node = leader_node(tmp_path, [1, 2, 3])
        partition = node.partition("t")
        now = int(time.time() * 1000)
        partition.maybe_shrink_isr(now + LAG_MS + 100)
        partition.maybe_shrink_isr(now + LAG_MS + 200)
        assert len(controller.alter_requests) == 0  # the task has not run yet, but only one exists
        # The controller meanwhile changes the partition on its own (same leader epoch, newer
        # partition epoch): that registration wins, the in-flight proposal's answer is refused.
        controller.registrations[("t", 0)] = PartitionRegistration((1, 2, 3), (1, 2), 1, 0, 5)
        controller.publish("t", 0)
        assert partition.isr == [1, 2] and partition.pending_isr is None
        await settle()
        assert controller.alter_requests == [("t", 0, [1])]
        assert partition.isr == [1, 2] and partition.partition_epoch == 5
        # Older or equal registrations are ignored.
        node.replica_manager.apply_partition("t", 0, controller.topic_ids["t"],
                                             PartitionRegistration((1, 2, 3), (1, 2, 3), 1, 0, 5))
        assert partition.isr == [1, 2]

    asyncio.run(scenario())


def test_kip320_epochs_and_diverging_epoch_for_followers(tmp_path):
    async def scenario() -> None:
        controller, node = leader_node(tmp_path, [1, 2])
        rm = node.replica_manager
        rm.append_records("t", 0, records(3), 1)  # epoch 0: offsets 0-2
        controller.elect("t", 0, leader=1)  # epoch 1 starts at 3
        rm.append_records("t", 0, records(2), 1)  # epoch 1: offsets 3-4
        partition = node.partition("t")
        assert partition.log.leader_epoch_cache.epochs == [0, 1]
        assert (await follower_fetch(node, 2, 0, current_leader_epoch=0)).error == ErrorCode.fenced_leader_epoch
        assert (await follower_fetch(node, 2, 0, current_leader_epoch=2)).error == ErrorCode.unknown_leader_epoch
        # A follower that wrote offsets 3-5 in epoch 0 (never committed): epoch 0 ended at 3 here.
        diverged = await follower_fetch(node, 2, 6, last_fetched_epoch=0, current_leader_epoch=1)
        assert diverged.diverging_epoch == (0, 3) and diverged.records is None
        in_step = await follower_fetch(node, 2, 3, last_fetched_epoch=0, current_leader_epoch=1)
        assert in_step.diverging_epoch is None and in_step.records is not None

    asyncio.run(scenario())


def test_new_leader_keeps_its_high_watermark_and_starts_its_epoch_at_the_log_end(tmp_path):
    async def scenario() -> None:
        controller, node = leader_node(tmp_path, [1, 2])
        rm = node.replica_manager
        rm.append_records("t", 0, records(4), 1)
        await follower_fetch(node, 2, 2)
        partition = node.partition("t")
        assert partition.high_watermark == 2
        controller.elect("t", 0, leader=1)  # re-elected at a new epoch
        assert partition.high_watermark == 2 and partition.leader_epoch == 1
        assert partition.log.leader_epoch_cache.start_offsets[-1] == 4
        # Follower 2 is unknown until it fetches again: the HW does not move on its old position.
        await follower_fetch(node, 2, 4)
        assert partition.high_watermark == 4

    asyncio.run(scenario())


def test_replica_not_in_the_assignment_is_deleted(tmp_path):
    async def scenario() -> None:
        controller, node = leader_node(tmp_path, [1, 2])
        node.replica_manager.append_records("t", 0, records(), 1)
        directory = node.partition("t").log.directory
        controller.registrations[("t", 0)] = PartitionRegistration((2, 3), (2, 3), 2, 1, 1)
        controller.publish("t", 0)
        assert ("t", 0) not in node.replica_manager.partitions
        assert not os.path.exists(directory)

    asyncio.run(scenario())


@pytest.mark.parametrize("acks", [1, -1])
def test_single_node_partitions_commit_at_once(tmp_path, acks):
    async def scenario() -> None:
        node = ReplicaNode(1, "127.0.0.1", str(tmp_path / "n1"), LogConfig())
        rm = node.replica_manager
        rm.make_leader("s", 0, uuid.uuid4())
        result: ProduceResult = rm.append_records("s", 0, records(2), acks)
        assert result.pending is None and result.error == ErrorCode.none
        assert rm.get_partition("s", 0).high_watermark == 2

    asyncio.run(scenario())


def test_a_restarted_leader_resumes_from_its_checkpointed_high_watermark(tmp_path):
    """replication-offset-checkpoint: a leader that restarts exposes what was committed before
    (offset 3 of 5 here), neither its whole log (offsets 3-4 were never replicated) nor nothing."""
    async def scenario() -> None:
        controller, node = leader_node(tmp_path, [1, 2])
        rm = node.replica_manager
        rm.append_records("t", 0, records(5), 1)
        await follower_fetch(node, 2, 3)
        assert node.partition("t").high_watermark == 3
        node.log_manager.shutdown(high_watermarks=rm.high_watermarks())
        assert (tmp_path / "n1" / "replication-offset-checkpoint").read_text() == "0\n1\nt 0 3\n"

        restarted = ReplicaNode(1, "127.0.0.1", str(tmp_path / "n1"), LogConfig())
        controller.nodes[1] = restarted
        restarted.replica_manager.configure_cluster(controller.links(restarted), SETTINGS)
        controller.elect("t", 0, leader=1)
        partition = restarted.partition("t")
        assert (partition.log_end_offset, partition.high_watermark) == (5, 3)
        await follower_fetch(restarted, 2, 5)
        assert partition.high_watermark == 5

    asyncio.run(scenario())
