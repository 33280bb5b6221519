"""TRANSACTION_COORDINATOR_FENCED between a partition leader and a stale coordinator, in process.

A partition leader keeps the newest coordinator epoch that ended each producer's transactions
on it; a WriteTxnMarkers from an older coordinator epoch (a coordinator whose
``__transaction_state`` partition has moved on) is refused with TRANSACTION_COORDINATOR_FENCED
and writes nothing. The coordinator then cancels that transaction's markers and does not log
its Complete record, as Kafka's TransactionMarkerRequestCompletionHandler does.
"""

from __future__ import annotations

import asyncio

from kbroker.protocol.errors import ErrorCode

from kbroker.transactions.marker_channel import write_marker_replicated
from kbroker.transactions.transaction_log import TransactionState
from tests.kbroker.node_in_process import single_node, transaction_coordinator_ready, until

TOPIC = "ledger"
NEWER_COORDINATOR_EPOCH = 99


async def _stale_coordinator(data_dir: str) -> None:
    async with single_node(data_dir) as broker:
        await transaction_coordinator_ready(broker)
        await broker.controller.create_topic(TOPIC, 1, 1, {})
        await until(lambda: (TOPIC, 0) in broker.replica_manager.partitions, f"{TOPIC} led here")
        coordinator = broker.transaction_coordinator
        pid, epoch = coordinator.init_producer_id("fenced", 60000, -1, -1)
        coordinator.add_partitions("fenced", pid, epoch, [(TOPIC, 0)])
        assert coordinator.coordinator_epoch("fenced") < NEWER_COORDINATOR_EPOCH
        partition = broker.replica_manager.get_partition(TOPIC, 0)

        # A newer coordinator has already aborted this producer's transaction on the partition.
        assert await write_marker_replicated(broker.replica_manager, broker.offset_store, TOPIC, 0, pid, epoch,
                                             False, NEWER_COORDINATOR_EPOCH) == ErrorCode.none
        end = partition.log_end_offset
        stale = await write_marker_replicated(broker.replica_manager, broker.offset_store, TOPIC, 0, pid, epoch,
                                              True, NEWER_COORDINATOR_EPOCH - 1)
        assert stale == ErrorCode.transaction_coordinator_fenced
        assert partition.log_end_offset == end  # nothing written

        coordinator.end_txn("fenced", pid, epoch, True)
        await until(lambda: not broker.marker_channel._tasks, "the marker channel gave up")
        assert coordinator.transactions["fenced"].state is TransactionState.PREPARE_COMMIT  # no Complete logged
        assert partition.log_end_offset == end
        assert partition.log.producer_state.producers[pid].coordinator_epoch == NEWER_COORDINATOR_EPOCH


def test_markers_of_a_stale_coordinator_are_fenced_and_cancelled(tmp_path) -> None:
    asyncio.run(_stale_coordinator(str(tmp_path / "data")))
