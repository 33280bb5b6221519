"""TransactionCoordinator, transaction version 2, on an in-process node: an exhausted epoch.

At epoch 32766 (Kafka's isProducerEpochExhausted) EndTxn v5 writes the markers at 32767
with the old producer id, then continues with a new producer id at epoch 0; a retry of that
EndTxn (old id, 32766) is answered NONE with the new id; the state survives a reload from
``__transaction_state`` (value v1 with PreviousProducerId).
"""

from __future__ import annotations

import asyncio

from kbroker.transactions.coordinator import MAX_EPOCH
from kbroker.transactions.transaction_log import TransactionState
from tests.kbroker.node_in_process import single_node, transaction_coordinator_ready, until

DONE = (TransactionState.COMPLETE_COMMIT, TransactionState.COMPLETE_ABORT)


async def _exhaust(data_dir: str) -> tuple[int, int, int]:
    async with single_node(data_dir) as broker:
        await transaction_coordinator_ready(broker)
        await broker.controller.create_topic("tv2-overflow", 1, 1, {})
        await until(lambda: ("tv2-overflow", 0) in broker.replica_manager.partitions, "tv2-overflow led here")
        coordinator = broker.transaction_coordinator
        pid, epoch = coordinator.init_producer_id("overflow", 60000, -1, -1)
        coordinator.transactions["overflow"].producer_epoch = MAX_EPOCH - 1  # as if after 32766 bumps
        coordinator.add_partitions("overflow", pid, MAX_EPOCH - 1, [("tv2-overflow", 0)])
        new_pid, new_epoch = coordinator.end_txn("overflow", pid, MAX_EPOCH - 1, True, 2)
        assert new_pid != pid and new_epoch == 0
        await until(lambda: coordinator.transactions["overflow"].state in DONE, "the markers written")
        assert coordinator.end_txn("overflow", pid, MAX_EPOCH - 1, True, 2) == (new_pid, 0)  # a retry
        producers = broker.replica_manager.get_partition("tv2-overflow", 0).log.producer_state.producers
        assert producers[pid].producer_epoch == MAX_EPOCH  # the commit marker's epoch
        return pid, new_pid, epoch


async def _reload(data_dir: str) -> tuple[int, int, int]:
    async with single_node(data_dir) as broker:
        await transaction_coordinator_ready(broker)
        metadata = broker.transaction_coordinator.transactions["overflow"]
        assert broker.transaction_coordinator.end_txn(
            "overflow", metadata.previous_producer_id, MAX_EPOCH - 1, True, 2) == (metadata.producer_id, 0)
        return metadata.previous_producer_id, metadata.producer_id, metadata.producer_epoch


def test_exhausted_epoch_moves_to_a_new_producer_id(tmp_path) -> None:
    data_dir = str(tmp_path / "data")
    pid, new_pid, _epoch = asyncio.run(_exhaust(data_dir))
    assert asyncio.run(_reload(data_dir)) == (pid, new_pid, 0)
