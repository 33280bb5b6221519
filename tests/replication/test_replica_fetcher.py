"""Replication over real sockets: followers' ReplicaFetchers copy leaders served by kbroker's own
connection, dispatcher and handlers (see cluster_harness); the test stands in for the controller.

Outcomes asserted are Kafka's: follower logs byte-identical to the leader's, acks=all answered
only once the ISR holds the records (else REQUEST_TIMED_OUT / NOT_ENOUGH_REPLICAS), a divergent
follower tail truncated through DivergingEpoch (KIP-101/KIP-595), stale epochs fenced (KIP-320),
idempotent retries deduplicated by a new leader.
"""

from __future__ import annotations

import asyncio
import datetime
import time
from dataclasses import replace

from kbroker.protocol.errors import ErrorCode
from kbroker.protocol.record_builder import build_batch
from kbroker.replication.inter_broker_client import InterBrokerClient
from kbroker.replication.partition import Partition
from kbroker.replication.replication_settings import ReplicationSettings
from kio.schema.fetch.v12 import request as fetch_request_v12
from kio.schema.fetch.v15 import request as fetch_request
from kio.schema.offset_for_leader_epoch.v4 import request as offset_for_leader_epoch_request
from kio.schema.produce.v9 import request as produce_request

from tests.replication.cluster_harness import ReplicaNode, StandInController, start_cluster, stop_cluster, wait_until

SETTINGS = ReplicationSettings(replica_fetch_wait_max_ms=200, replica_fetch_backoff_ms=100,
                               replica_lag_time_max_ms=10_000, replica_socket_timeout_ms=5_000)


def batch(n: int, producer_id: int = -1, base_sequence: int = -1) -> bytes:
    now = int(time.time() * 1000)
    return build_batch([(b"k%d" % i, b"value-%d" % i) for i in range(n)], base_timestamp=now,
                       producer_id=producer_id, producer_epoch=0 if producer_id >= 0 else -1,
                       base_sequence=base_sequence)


def client_for(node: ReplicaNode) -> InterBrokerClient:
    return InterBrokerClient(node.host, node.port, "127.0.0.1", "test-client")


async def produce(node: ReplicaNode, records: bytes, acks: int = -1, timeout_ms: int = 10_000,
                  topic: str = "t") -> tuple[ErrorCode, int]:
    m = produce_request
    body = m.ProduceRequest(
        transactional_id=None, acks=acks, timeout=datetime.timedelta(milliseconds=timeout_ms),
        topic_data=(m.TopicProduceData(
            name=topic, partition_data=(m.PartitionProduceData(index=0, records=records),)),),
    )
    client = client_for(node)
    try:
        response = await client.request(0, 9, body)
    finally:
        client.close()
    answer = response.responses[0].partition_responses[0]
    return answer.error_code, answer.base_offset


def log_bytes(partition: Partition) -> bytes:
    return b"".join(s.read_bytes(0, s.size) for s in partition.log.segments)


def partitions_of(controller: StandInController, topic: str = "t") -> list[Partition]:
    return [n.replica_manager.partitions[(topic, 0)] for n in controller.nodes.values()
            if (topic, 0) in n.replica_manager.partitions]


async def in_sync(controller: StandInController, leader: int, followers: list[int]) -> None:
    """Wait until the followers hold exactly the leader's log and its high watermark."""
    lead = controller.nodes[leader].partition("t")

    def done() -> bool:
        return all(
            controller.nodes[f].partition("t").log_end_offset == lead.log_end_offset
            and controller.nodes[f].partition("t").high_watermark == lead.high_watermark == lead.log_end_offset
            for f in followers
        )
    await wait_until(done, lambda: partitions_of(controller))


def test_followers_copy_the_leader_byte_for_byte_and_acks_all_waits_for_them(tmp_path):
    async def scenario() -> None:
        controller = await start_cluster(tmp_path, [1, 2, 3], SETTINGS, segment_bytes=600)
        try:
            controller.create("t", [1, 2, 3])
            leader = controller.nodes[1]
            for i in range(6):
                error, base = await produce(leader, batch(3))
                assert (error, base) == (ErrorCode.none, 3 * i)
                # acks=all answered: every ISR follower already holds the records.
                for follower in (2, 3):
                    assert controller.nodes[follower].partition("t").log_end_offset >= 3 * i + 3
            assert leader.partition("t").high_watermark == 18
            await in_sync(controller, 1, [2, 3])
            for follower in (2, 3):
                fp = controller.nodes[follower].partition("t")
                assert log_bytes(fp) == log_bytes(leader.partition("t"))
                assert len(fp.log.segments) == len(leader.partition("t").log.segments) > 1
                assert fp.log.leader_epoch_cache.epochs == [0]
        finally:
            await stop_cluster(controller)

    asyncio.run(scenario())


def test_acks_all_times_out_when_a_follower_stops_fetching(tmp_path):
    async def scenario() -> None:
        controller = await start_cluster(tmp_path, [1, 2], SETTINGS)
        try:
            controller.create("t", [1, 2])
            leader = controller.nodes[1]
            assert await produce(leader, batch(1)) == (ErrorCode.none, 0)
            await controller.nodes[2].replica_manager.fetcher_manager.stop()
            error, _ = await produce(leader, batch(1), timeout_ms=300)
            assert error == ErrorCode.request_timed_out  # 7: appended, never committed
            assert leader.partition("t").log_end_offset == 2
            assert leader.partition("t").high_watermark == 1
            assert await produce(leader, batch(1), acks=1) == (ErrorCode.none, 2)  # acks=1 does not wait
        finally:
            await stop_cluster(controller)

    asyncio.run(scenario())


def test_isr_shrinks_then_acks_all_is_refused_below_min_isr_and_recovers(tmp_path):
    async def scenario() -> None:
        settings = ReplicationSettings(replica_fetch_wait_max_ms=100, replica_fetch_backoff_ms=100,
                                       replica_lag_time_max_ms=400, replica_socket_timeout_ms=5_000)
        controller = await start_cluster(tmp_path, [1, 2], settings, min_insync_replicas=2)
        try:
            controller.create("t", [1, 2])
            leader, follower = controller.nodes[1], controller.nodes[2]
            assert await produce(leader, batch(2)) == (ErrorCode.none, 0)
            await follower.replica_manager.fetcher_manager.stop()
            assert (await produce(leader, batch(1), acks=1))[0] == ErrorCode.none  # the follower falls behind
            # The leader's ISR timer proposes dropping it; the controller's answer applies it.
            await wait_until(lambda: leader.partition("t").isr == [1], lambda: partitions_of(controller))
            assert (await produce(leader, batch(1)))[0] == ErrorCode.not_enough_replicas  # 19
            assert leader.partition("t").high_watermark == 2  # strict min ISR: no commit alone
            # The follower comes back (the broker re-applies the partition), catches up, rejoins.
            controller.elect("t", 0, leader=1)
            await wait_until(lambda: leader.partition("t").isr == [1, 2], lambda: partitions_of(controller))
            assert (await produce(leader, batch(1)))[0] == ErrorCode.none
            await in_sync(controller, 1, [2])
            assert log_bytes(follower.partition("t")) == log_bytes(leader.partition("t"))
        finally:
            await stop_cluster(controller)

    asyncio.run(scenario())


def test_divergent_follower_tail_is_truncated_through_diverging_epoch(tmp_path):
    async def scenario() -> None:
        controller = await start_cluster(tmp_path, [1, 2], SETTINGS)
        try:
            controller.create("t", [1, 2])
            old, new = controller.nodes[1], controller.nodes[2]
            assert await produce(old, batch(2)) == (ErrorCode.none, 0)
            await new.replica_manager.fetcher_manager.stop()
            # Offsets 2-4 in epoch 0 exist only on the old leader: never committed.
            assert await produce(old, batch(3), acks=1) == (ErrorCode.none, 2)
            controller.elect("t", 0, leader=2, isr=[2])  # unclean for offsets 2-4 (KIP-101 case)
            assert new.partition("t").log.leader_epoch_cache.epochs == [0, 1]
            assert await produce(new, batch(1)) == (ErrorCode.none, 2)
            assert await produce(new, batch(1)) == (ErrorCode.none, 3)
            await in_sync(controller, 2, [1])
            assert log_bytes(old.partition("t")) == log_bytes(new.partition("t"))  # LogMatching
            assert old.partition("t").log.leader_epoch_cache.epochs == [0, 1]
            assert old.partition("t").log.leader_epoch_cache.start_offsets == [0, 2]
            await wait_until(lambda: new.partition("t").isr == [1, 2], lambda: partitions_of(controller))
        finally:
            await stop_cluster(controller)

    asyncio.run(scenario())


def test_zombie_leader_is_fenced_and_its_uncommitted_write_is_lost(tmp_path):
    async def scenario() -> None:
        controller = await start_cluster(tmp_path, [1, 2, 3], SETTINGS)
        try:
            topic_id = controller.create("t", [1, 2, 3])
            zombie, new = controller.nodes[1], controller.nodes[2]
            assert await produce(zombie, batch(2)) == (ErrorCode.none, 0)
            await in_sync(controller, 1, [2, 3])
            controller.fenced.add(1)  # node 1 misses the election: it still believes it leads epoch 0
            controller.elect("t", 0, leader=2, isr=[2, 3])
            # The zombie accepts a write, but nobody replicates from it: acks=all never completes.
            error, base = await produce(zombie, batch(1), timeout_ms=400)
            assert (error, base) == (ErrorCode.request_timed_out, 2)
            # A follower request still at epoch 0 reaching the new leader is fenced (KIP-320).
            m = fetch_request
            stale = m.FetchRequest(
                cluster_id=None, replica_state=m.ReplicaState(replica_id=3, replica_epoch=1),
                max_wait=datetime.timedelta(0), min_bytes=1, max_bytes=1 << 20, isolation_level=0, session_id=0,
                session_epoch=-1, forgotten_topics_data=(), rack_id="",
                topics=(m.FetchTopic(topic_id=topic_id, partitions=(m.FetchPartition(
                    partition=0, current_leader_epoch=0, fetch_offset=2, last_fetched_epoch=0,
                    log_start_offset=0, partition_max_bytes=1 << 20),)),),
            )
            client = client_for(new)
            try:
                response = await client.request(1, 15, stale)
            finally:
                client.close()
            assert response.responses[0].partitions[0].error_code == ErrorCode.fenced_leader_epoch  # 74
            assert await produce(new, batch(2)) == (ErrorCode.none, 2)
            # The zombie learns of the election: it follows, and its lone write is truncated away.
            controller.fenced.clear()
            controller.publish("t", 0)
            assert not zombie.partition("t").is_leader
            await in_sync(controller, 2, [1, 3])
            assert log_bytes(zombie.partition("t")) == log_bytes(new.partition("t"))
        finally:
            await stop_cluster(controller)

    asyncio.run(scenario())


def test_idempotent_retry_to_a_new_leader_is_answered_with_the_original_offset(tmp_path):
    async def scenario() -> None:
        controller = await start_cluster(tmp_path, [1, 2], SETTINGS)
        try:
            controller.create("t", [1, 2])
            first, second = controller.nodes[1], controller.nodes[2]
            assert await produce(first, batch(2, producer_id=4242, base_sequence=0)) == (ErrorCode.none, 0)
            assert await produce(first, batch(1, producer_id=4242, base_sequence=2)) == (ErrorCode.none, 2)
            await in_sync(controller, 1, [2])
            controller.elect("t", 0, leader=2)
            # The producer never saw the answer for sequence 2 and retries it on the new leader.
            assert await produce(second, batch(1, producer_id=4242, base_sequence=2)) == (ErrorCode.none, 2)
            assert second.partition("t").log_end_offset == 3
            assert await produce(second, batch(1, producer_id=4242, base_sequence=3)) == (ErrorCode.none, 3)
            error, _ = await produce(second, batch(1, producer_id=4242, base_sequence=9))
            assert error == ErrorCode.out_of_order_sequence_number
        finally:
            await stop_cluster(controller)

    asyncio.run(scenario())


def test_replica_fetch_v12_diverging_epoch_and_offset_for_leader_epoch_on_the_wire(tmp_path):
    async def scenario() -> None:
        controller = await start_cluster(tmp_path, [1, 2], SETTINGS)
        try:
            controller.create("t", [1, 2])
            leader, follower = controller.nodes[1], controller.nodes[2]
            await follower.replica_manager.fetcher_manager.stop()
            assert await produce(leader, batch(2), acks=1) == (ErrorCode.none, 0)
            controller.elect("t", 0, leader=1)  # epoch 1 from offset 2
            await follower.replica_manager.fetcher_manager.stop()
            assert await produce(leader, batch(1), acks=1) == (ErrorCode.none, 2)
            m = fetch_request_v12

            def fetch(offset: int, last_fetched_epoch: int) -> object:
                return m.FetchRequest(
                    cluster_id=None, replica_id=2, max_wait=datetime.timedelta(0), min_bytes=1,
                    max_bytes=1 << 20, isolation_level=0, session_id=0, session_epoch=-1, forgotten_topics_data=(),
                    rack_id="", topics=(m.FetchTopic(topic="t", partitions=(m.FetchPartition(
                        partition=0, current_leader_epoch=1, fetch_offset=offset, last_fetched_epoch=last_fetched_epoch,
                        log_start_offset=0, partition_max_bytes=1 << 20),)),),
                )
            client = client_for(leader)
            try:
                # replica_id in the body (v < 15): a follower reads past the high watermark...
                answer = (await client.request(1, 12, fetch(0, -1))).responses[0].partitions[0]
                assert answer.error_code == ErrorCode.none and answer.high_watermark == 0
                assert len(answer.records) > 0
                # ...and a last fetched epoch 0 at offset 5 disagrees: epoch 0 ended at 2 here.
                answer = (await client.request(1, 12, fetch(5, 0))).responses[0].partitions[0]
                assert (answer.diverging_epoch.epoch, answer.diverging_epoch.end_offset) == (0, 2)
                assert not answer.records
                # A follower at the end of the log moves the high watermark.
                answer = (await client.request(1, 12, fetch(3, 1))).responses[0].partitions[0]
                assert answer.high_watermark == 3 and leader.partition("t").high_watermark == 3
            finally:
                client.close()
            o = offset_for_leader_epoch_request
            query = o.OffsetForLeaderEpochRequest(replica_id=-1, topics=(o.OffsetForLeaderTopic(
                topic="t", partitions=(o.OffsetForLeaderPartition(partition=0, current_leader_epoch=-1,
                                                                  leader_epoch=0),)),))
            for node, expected in ((leader, (ErrorCode.none, 0, 2)), (follower, (ErrorCode.not_leader_or_follower,
                                                                                -1, -1))):
                client = client_for(node)
                try:
                    answer = (await client.request(23, 4, query)).topics[0].partitions[0]
                finally:
                    client.close()
                assert (answer.error_code, answer.leader_epoch, answer.end_offset) == expected
        finally:
            await stop_cluster(controller)

    asyncio.run(scenario())


def test_new_follower_starts_at_the_leaders_log_start_offset_inside_a_batch(tmp_path):
    async def scenario() -> None:
        controller = await start_cluster(tmp_path, [1, 2], SETTINGS)
        try:
            controller.create("t", [1])  # broker 2 holds no replica yet
            leader, follower = controller.nodes[1], controller.nodes[2]
            assert ("t", 0) not in follower.replica_manager.partitions
            assert await produce(leader, batch(5)) == (ErrorCode.none, 0)
            assert leader.partition("t").delete_records(2) == 2  # log start inside batch 0-4
            current = controller.registrations[("t", 0)]
            controller.registrations[("t", 0)] = replace(
                current, replicas=(1, 2), partition_epoch=current.partition_epoch + 1)
            controller.publish("t", 0)  # broker 2 is added as a follower with an empty log
            await in_sync(controller, 1, [2])
            fp = follower.partition("t")
            assert (fp.log_start_offset, fp.log_end_offset) == (2, 5)
            assert log_bytes(fp) == log_bytes(leader.partition("t"))
            await wait_until(lambda: leader.partition("t").isr == [1, 2], lambda: partitions_of(controller))
        finally:
            await stop_cluster(controller)

    asyncio.run(scenario())


def test_a_leader_that_stops_answering_is_fetched_from_again_once_it_answers(tmp_path):
    """A fetch that times out (replica.socket.timeout.ms) after the leader went silent — a paused
    process — does not end the follower's fetching: once the leader answers again the follower
    catches up and rejoins (it used to stop for good, staying out of the ISR)."""
    async def scenario() -> None:
        settings = replace(SETTINGS, replica_socket_timeout_ms=300)
        controller = await start_cluster(tmp_path, [1, 2], settings)
        silent_connections: list[asyncio.StreamWriter] = []

        async def accept_and_say_nothing(_reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            silent_connections.append(writer)

        silent = await asyncio.start_server(accept_and_say_nothing, "127.0.0.11", 0)
        try:
            leader = controller.nodes[1]
            real_port = leader.port
            leader.port = silent.sockets[0].getsockname()[1]  # the follower's next connection hangs
            controller.create("t", [1, 2])
            fetcher = controller.nodes[2].replica_manager.fetcher_manager.fetchers[1]
            # Its fetch times out and it connects again: two connections to the silent leader.
            deadline = time.monotonic() + 10
            while len(silent_connections) < 2 and not fetcher._task.done() and time.monotonic() < deadline:
                await asyncio.sleep(0.05)
            assert fetcher._task is not None and not fetcher._task.done()
            assert len(silent_connections) >= 2
            leader.port = real_port
            assert await produce(leader, batch(2)) == (ErrorCode.none, 0)
            await in_sync(controller, 1, [2])
        finally:
            silent.close()
            for writer in silent_connections:
                writer.close()
            await stop_cluster(controller)

    asyncio.run(scenario())


def test_a_follower_learns_a_moved_high_watermark_without_waiting_out_its_long_poll(tmp_path):
    """The leader answers a follower's parked fetch when the high watermark moves past the one it
    last sent that follower: after an acks=all write the follower's high watermark catches up
    well before replica.fetch.wait.max.ms (10 s here) would end the long poll."""
    async def scenario() -> None:
        settings = replace(SETTINGS, replica_fetch_wait_max_ms=10_000)
        controller = await start_cluster(tmp_path, [1, 2], settings)
        try:
            controller.create("t", [1, 2])
            leader = controller.nodes[1]
            follower = controller.nodes[2].partition("t")
            for i in range(3):
                assert await produce(leader, batch(2)) == (ErrorCode.none, 2 * i)
                assert leader.partition("t").high_watermark == 2 * i + 2  # acks=all: committed
                await wait_until(lambda: follower.high_watermark == leader.partition("t").high_watermark,
                                 lambda: partitions_of(controller), timeout=5.0)
        finally:
            await stop_cluster(controller)

    asyncio.run(scenario())


def test_a_stopped_replica_manager_starts_no_fetcher(tmp_path):
    """Metadata replayed while a broker shuts down (after its ReplicaManager stopped) must not
    start a fetcher nobody stops: such a loop kept a stopped broker's process alive."""
    async def scenario() -> None:
        controller = await start_cluster(tmp_path, [1, 2], SETTINGS)
        try:
            await controller.nodes[2].replica_manager.stop()
            controller.create("t", [1, 2])  # node 2 becomes a follower of node 1
            manager = controller.nodes[2].replica_manager.fetcher_manager
            assert manager is not None and manager.fetchers == {} and manager.leader_of("t", 0) is None
        finally:
            await stop_cluster(controller)

    asyncio.run(scenario())
