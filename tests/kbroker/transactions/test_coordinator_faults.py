"""The coordinators of an in-process node whose internal-topic writes fail (failpoints): the
transaction coordinator and the offsets store keep nothing they could not write, the client is
told NOT_COORDINATOR (Kafka's answer to a failed coordinator write), and both go on once the
disk has room."""

from __future__ import annotations

import asyncio
import errno

import pytest
from kbroker.protocol.errors import ErrorCode, KafkaError
from kbroker.storage import file_io
from kbroker.storage.file_io import FailPoint, inject

from kbroker.coordinator_errors import coordinator_write_error
from kbroker.groups.offset_store import OffsetAndMetadata
from kbroker.transactions.transaction_log import TransactionState
from tests.kbroker.node_in_process import (
    group_coordinator_ready,
    single_node,
    transaction_coordinator_ready,
    until,
)

pytestmark = pytest.mark.usefixtures("no_failpoints_left")


async def _transaction_end_on_a_full_disk(data_dir: str) -> None:
    async with single_node(data_dir) as broker:
        await transaction_coordinator_ready(broker)
        await broker.controller.create_topic("orders", 1, 1, {})
        await until(lambda: ("orders", 0) in broker.replica_manager.partitions, "orders led here")
        coordinator = broker.transaction_coordinator
        pid, epoch = coordinator.init_producer_id("tx", 60000, -1, -1)
        coordinator.add_partitions("tx", pid, epoch, [("orders", 0)])
        inject(FailPoint("write", errno.ENOSPC, path_contains="__transaction_state", times=0))
        with pytest.raises(KafkaError) as info:
            coordinator.end_txn("tx", pid, epoch, True, 0)
        assert info.value.code == ErrorCode.not_coordinator
        assert coordinator.transactions["tx"].state is TransactionState.ONGOING  # nothing kept
        file_io.clear_failpoints()
        coordinator.end_txn("tx", pid, epoch, True, 0)
        await until(lambda: coordinator.transactions["tx"].state is TransactionState.COMPLETE_COMMIT,
                    "the commit completed")


def test_transaction_state_that_cannot_be_written_is_not_kept(tmp_path) -> None:
    asyncio.run(_transaction_end_on_a_full_disk(str(tmp_path / "data")))


async def _offset_commit_on_a_full_disk(data_dir: str) -> None:
    async with single_node(data_dir) as broker:
        await group_coordinator_ready(broker)
        await broker.controller.create_topic("orders", 1, 1, {})
        store = broker.offset_store
        store.commit("g", {("orders", 0): OffsetAndMetadata(5, -1, "", 0)})
        inject(FailPoint("write", errno.ENOSPC, path_contains="__consumer_offsets", times=0))
        with pytest.raises(OSError) as info:
            store.commit("g", {("orders", 0): OffsetAndMetadata(9, -1, "", 0)})
        assert coordinator_write_error(info.value) == ErrorCode.not_coordinator
        assert store.fetch("g")[("orders", 0)].offset == 5  # the commit that was not written is not visible
        file_io.clear_failpoints()
        store.commit("g", {("orders", 0): OffsetAndMetadata(9, -1, "", 0)})
        assert store.fetch("g")[("orders", 0)].offset == 9


def test_offset_commit_that_cannot_be_written_is_not_visible(tmp_path) -> None:
    asyncio.run(_offset_commit_on_a_full_disk(str(tmp_path / "data")))


def test_coordinator_write_errors_map_as_kafka_maps_them() -> None:
    assert coordinator_write_error(OSError(errno.EIO, "I/O error")) == ErrorCode.not_coordinator
    assert coordinator_write_error(KafkaError(ErrorCode.not_leader_or_follower)) == ErrorCode.not_coordinator
    assert coordinator_write_error(KafkaError(ErrorCode.not_enough_replicas)) == ErrorCode.coordinator_not_available
    assert coordinator_write_error(KafkaError(ErrorCode.request_timed_out)) == ErrorCode.coordinator_not_available
    assert coordinator_write_error(KafkaError(ErrorCode.message_too_large)) == ErrorCode.unknown_server_error
