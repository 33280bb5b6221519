"""TransactionCoordinator, transaction version 2, in process: an exhausted epoch.

At epoch 32766 (Kafka's isProducerEpochExhausted) EndTxn v5 writes the markers at 32767
with the old producer id, then continues with a new producer id at epoch 0; a retry of that
EndTxn (old id, 32766) is answered NONE with the new id; the state survives a reload from
``__transaction_state`` (value v1 with PreviousProducerId).
"""

from __future__ import annotations

import asyncio

from kbroker.broker import Broker
from kbroker.config import KafkaConfig
from kbroker.meta_properties import init_log_dirs
from kbroker.transactions.coordinator import MAX_EPOCH


def _broker(data_dir: str) -> Broker:
    broker = Broker(KafkaConfig.load(overrides=[f"log.dirs={data_dir}"]))
    broker.cluster_id = init_log_dirs(broker.log_dirs, broker.node_id, invent_cluster_id=True)
    broker.controller.load()
    broker.log_manager.startup()
    broker.controller.activate_partitions()
    broker.offset_store.load()
    broker.transaction_coordinator.load()
    return broker


async def _exhaust(data_dir: str) -> tuple[int, int, int]:
    broker = _broker(data_dir)
    try:
        broker.controller.create_internal_topic("tv2-overflow", 1, {})
        coordinator = broker.transaction_coordinator
        pid, epoch = coordinator.init_producer_id("overflow", 60000, -1, -1)
        coordinator.transactions["overflow"].producer_epoch = MAX_EPOCH - 1  # as if after 32766 bumps
        coordinator.add_partitions("overflow", pid, MAX_EPOCH - 1, [("tv2-overflow", 0)])
        new_pid, new_epoch = coordinator.end_txn("overflow", pid, MAX_EPOCH - 1, True, 2)
        assert new_pid != pid and new_epoch == 0
        assert coordinator.end_txn("overflow", pid, MAX_EPOCH - 1, True, 2) == (new_pid, 0)  # a retry
        producers = broker.replica_manager.get_partition("tv2-overflow", 0).log.producer_state.producers
        assert producers[pid].producer_epoch == MAX_EPOCH  # the commit marker's epoch
        return pid, new_pid, epoch
    finally:
        broker.log_manager.shutdown()


async def _reload(data_dir: str) -> tuple[int, int, int]:
    broker = _broker(data_dir)
    try:
        metadata = broker.transaction_coordinator.transactions["overflow"]
        assert broker.transaction_coordinator.end_txn(
            "overflow", metadata.previous_producer_id, MAX_EPOCH - 1, True, 2) == (metadata.producer_id, 0)
        return metadata.previous_producer_id, metadata.producer_id, metadata.producer_epoch
    finally:
        broker.log_manager.shutdown()


def test_exhausted_epoch_moves_to_a_new_producer_id(tmp_path) -> None:
    data_dir = str(tmp_path / "data")
    pid, new_pid, _epoch = asyncio.run(_exhaust(data_dir))
    assert asyncio.run(_reload(data_dir)) == (pid, new_pid, 0)
