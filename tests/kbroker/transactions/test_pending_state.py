"""TransactionCoordinator's pending state changes (Kafka's TransactionMetadata.pendingState).

The coordinator runs over a real ReplicaManager leading ``__transaction_state-0`` with
replicas 1, 2, 3 and ``min.insync.replicas=2``; the followers are the Fetch requests they
would send (tests/replication/cluster_harness.py), so the test decides when a state record is
replicated. A change is the state only once its record is on the ISR; meanwhile another
request for the id gets CONCURRENT_TRANSACTIONS and DescribeTransactions shows the old state;
a record that cannot be replicated (leadership lost) leaves the old state and answers
NOT_COORDINATOR (and, once resigned, DescribeTransactions too), one not replicated within the
transaction's timeout COORDINATOR_NOT_AVAILABLE; one the ISR is too small to take is refused
with COORDINATOR_NOT_AVAILABLE.
A Prepare* state's markers go out only once it is replicated.
"""

from __future__ import annotations

import asyncio
import itertools

import pytest
from kbroker.protocol.errors import ErrorCode, KafkaError
from kbroker.replication.replica_manager import FetchParams, FetchRequestPartition
from kbroker.replication.replication_settings import ReplicationSettings
from kbroker.storage.log_config import LogConfig

from kbroker.transactions.coordinator import TransactionCoordinator
from kbroker.transactions.transaction_log import TRANSACTION_STATE_TOPIC, TransactionMetadata, TransactionState
from tests.replication.cluster_harness import ReplicaNode, StandInController

S = TransactionState
TXN = "payments"
DATA = ("orders", 0)


class ProducerIdBlock:
    """Producer ids as the controller's blocks hand them out (here: counting from 1000)."""

    def __init__(self) -> None:
        self._ids = itertools.count(1000)

    def allocate(self) -> int:
        return next(self._ids)


class MarkerRecorder:
    """The marker channel's place: records which prepared states it was handed."""

    def __init__(self) -> None:
        self.sent: list[TransactionMetadata] = []

    def send_markers(self, coordinator: TransactionCoordinator, metadata: TransactionMetadata) -> None:
        self.sent.append(metadata)


def coordinator_over_a_leader(tmp_path, replicas: tuple[int, ...] = (1, 2, 3)
                              ) -> tuple[StandInController, ReplicaNode, TransactionCoordinator, MarkerRecorder]:
    controller = StandInController()
    node = ReplicaNode(1, "127.0.0.1", str(tmp_path / "n1"), LogConfig(min_insync_replicas=2))
    controller.nodes[1] = node
    node.replica_manager.configure_cluster(controller.links(node), ReplicationSettings(replica_lag_time_max_ms=60000))
    controller.create(TRANSACTION_STATE_TOPIC, list(replicas))
    controller.create(DATA[0], [1, 2, 3])
    markers = MarkerRecorder()
    coordinator = TransactionCoordinator(node.controller, node.replica_manager, None, ProducerIdBlock(), markers,
                                         num_partitions=1, max_timeout_ms=900000)
    coordinator.on_leadership(0, True)
    return controller, node, coordinator, markers


async def followers_catch_up(node: ReplicaNode) -> None:
    """Replicas 2 and 3 fetch at the leader's log end: the high watermark reaches it."""
    partition = node.partition(TRANSACTION_STATE_TOPIC)
    for replica in (2, 3):
        request = FetchRequestPartition(TRANSACTION_STATE_TOPIC, 0, partition.log_end_offset, 1 << 20)
        await node.replica_manager.fetch([request], 0, 1, 1 << 20, 0, FetchParams(replica, 1))
    await asyncio.sleep(0)  # the commit waiters' callbacks run


def refused(call: object, *args: object) -> ErrorCode:
    with pytest.raises(KafkaError) as info:
        call(*args)  # type: ignore[operator]
    return info.value.code


def test_a_change_is_the_state_only_once_replicated(tmp_path) -> None:
    async def scenario() -> None:
        _controller, node, coordinator, markers = coordinator_over_a_leader(tmp_path)
        pid, epoch = coordinator.init_producer_id(TXN, 60000, -1, -1)
        assert TXN in coordinator.pending and coordinator.describe(TXN) is None
        assert refused(coordinator.init_producer_id, TXN, 60000, -1, -1) == ErrorCode.concurrent_transactions
        await followers_catch_up(node)
        await coordinator.replicated(TXN)
        assert coordinator.describe(TXN).state is S.EMPTY and (pid, epoch) == (1000, 0)

        coordinator.add_partitions(TXN, pid, epoch, [DATA])
        # Pending Ongoing: an AddPartitions or EndTxn waits (the client retries); a leader's
        # verification is answered from the replicated state (Kafka does not look at pendingState there).
        assert refused(coordinator.add_partitions, TXN, pid, epoch, [DATA]) == ErrorCode.concurrent_transactions
        assert refused(coordinator.end_txn, TXN, pid, epoch, True) == ErrorCode.concurrent_transactions
        assert coordinator.add_partitions(TXN, pid, epoch, [DATA], True) == {DATA: ErrorCode.transaction_abortable}
        assert coordinator.describe(TXN).state is S.EMPTY
        await followers_catch_up(node)
        await coordinator.replicated(TXN)
        assert coordinator.describe(TXN).state is S.ONGOING and coordinator.describe(TXN).partitions == {DATA}

        coordinator.end_txn(TXN, pid, epoch, True)
        assert coordinator.describe(TXN).state is S.ONGOING and markers.sent == []  # no marker before replication
        await followers_catch_up(node)
        await coordinator.replicated(TXN)
        assert coordinator.describe(TXN).state is S.PREPARE_COMMIT
        assert [m.state for m in markers.sent] == [S.PREPARE_COMMIT]

    asyncio.run(scenario())


def test_a_change_whose_leadership_is_lost_is_dropped(tmp_path) -> None:
    async def scenario() -> None:
        controller, node, coordinator, _markers = coordinator_over_a_leader(tmp_path)
        pid, epoch = coordinator.init_producer_id(TXN, 60000, -1, -1)
        await followers_catch_up(node)
        await coordinator.replicated(TXN)
        coordinator.add_partitions(TXN, pid, epoch, [DATA])
        waiting = asyncio.ensure_future(coordinator.replicated(TXN))
        await asyncio.sleep(0)
        controller.elect(TRANSACTION_STATE_TOPIC, 0, leader=2)  # another broker leads the state partition
        with pytest.raises(KafkaError) as info:
            await waiting
        assert info.value.code == ErrorCode.not_coordinator
        assert TXN not in coordinator.pending
        assert coordinator.transactions[TXN].state is S.EMPTY  # not Ongoing: the change was never the state
        coordinator.on_leadership(0, False)
        assert refused(coordinator.describe, TXN) == ErrorCode.not_coordinator  # DescribeTransactions' answer

    asyncio.run(scenario())


def test_a_change_not_replicated_within_the_transaction_timeout_is_dropped(tmp_path) -> None:
    """Kafka appends a state record with the transaction's timeout as the acks=all timeout."""
    async def scenario() -> None:
        _controller, node, coordinator, _markers = coordinator_over_a_leader(tmp_path)
        pid, epoch = coordinator.init_producer_id(TXN, 200, -1, -1)  # transaction.timeout.ms 200
        await followers_catch_up(node)
        await coordinator.replicated(TXN)
        coordinator.add_partitions(TXN, pid, epoch, [DATA])
        with pytest.raises(KafkaError) as info:
            await coordinator.replicated(TXN)  # no follower fetches: answered when the 200 ms are up
        assert info.value.code == ErrorCode.coordinator_not_available
        assert TXN not in coordinator.pending and coordinator.describe(TXN).state is S.EMPTY

    asyncio.run(scenario())


def test_an_isr_under_min_insync_replicas_refuses_the_change(tmp_path) -> None:
    async def scenario() -> None:
        controller, node, coordinator, _markers = coordinator_over_a_leader(tmp_path)
        pid, epoch = coordinator.init_producer_id(TXN, 60000, -1, -1)
        await followers_catch_up(node)
        await coordinator.replicated(TXN)
        controller.elect(TRANSACTION_STATE_TOPIC, 0, leader=1, isr=[1])
        coordinator.on_leadership(0, True)  # the new leader epoch: loaded again
        assert refused(coordinator.add_partitions, TXN, pid, epoch, [DATA]) == ErrorCode.coordinator_not_available
        assert TXN not in coordinator.pending and coordinator.describe(TXN).state is S.EMPTY

    asyncio.run(scenario())


def test_a_single_replica_makes_the_change_at_once(tmp_path) -> None:
    async def scenario() -> None:
        _controller, _node, coordinator, _markers = coordinator_over_a_leader(tmp_path, replicas=(1,))
        coordinator.init_producer_id(TXN, 60000, -1, -1)
        assert TXN not in coordinator.pending and coordinator.describe(TXN).state is S.EMPTY
        await coordinator.replicated(TXN)

    asyncio.run(scenario())
