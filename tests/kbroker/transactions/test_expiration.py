"""TransactionCoordinator: transactional.id.expiration.ms, on an in-process node.

Ids in Empty, CompleteCommit or CompleteAbort whose last state change is at least the
expiration old are forgotten and get a tombstone in ``__transaction_state`` (so a reload does
not bring them back); an ongoing transaction's id and ids changed more recently stay. A later
InitProducerId for a forgotten id starts with a new producer id at epoch 0.
"""

from __future__ import annotations

import asyncio

from kbroker.config.kafka_config import KafkaConfig
from kbroker.transactions.transaction_log import TRANSACTION_STATE_TOPIC, TransactionState, partition_for, read_log
from tests.kbroker.node_in_process import single_node, transaction_coordinator_ready, until

EXPIRATION_MS = 604_800_000


def test_default_expiration_is_kafkas() -> None:
    assert KafkaConfig.load().get_int("transactional.id.expiration.ms") == EXPIRATION_MS


async def _expire(data_dir: str) -> tuple[int, int]:
    async with single_node(data_dir) as broker:
        await transaction_coordinator_ready(broker)
        await broker.controller.create_topic("exp", 1, 1, {})
        await until(lambda: ("exp", 0) in broker.replica_manager.partitions, "exp led here")
        coordinator = broker.transaction_coordinator
        ids = {}
        for tid in ("empty", "committed", "aborted", "ongoing", "recent"):
            ids[tid] = coordinator.init_producer_id(tid, 60000, -1, -1)
        for tid, commit in (("committed", True), ("aborted", False)):
            pid, epoch = ids[tid]
            coordinator.add_partitions(tid, pid, epoch, [("exp", 0)])
            coordinator.end_txn(tid, pid, epoch, commit)
        pid, epoch = ids["ongoing"]
        coordinator.add_partitions("ongoing", pid, epoch, [("exp", 0)])
        expected = {"empty": TransactionState.EMPTY, "committed": TransactionState.COMPLETE_COMMIT,
                    "aborted": TransactionState.COMPLETE_ABORT, "ongoing": TransactionState.ONGOING,
                    "recent": TransactionState.EMPTY}
        await until(lambda: {tid: m.state for tid, m in coordinator.transactions.items()} == expected,
                    "both transactions' markers written")
        now = max(m.last_update_ms for m in coordinator.transactions.values())
        for tid in ("empty", "committed", "aborted", "ongoing"):
            coordinator.transactions[tid].last_update_ms = now - EXPIRATION_MS  # exactly the expiration old
        coordinator.transactions["recent"].last_update_ms = now - EXPIRATION_MS + 1

        assert sorted(coordinator.remove_expired_transactional_ids(now, EXPIRATION_MS)) == [
            "aborted", "committed", "empty"]
        assert sorted(coordinator.transactions) == ["ongoing", "recent"]
        assert coordinator.remove_expired_transactional_ids(now, EXPIRATION_MS) == []

        index = partition_for("committed", coordinator.partitions_count())
        plog = broker.replica_manager.get_partition(TRANSACTION_STATE_TOPIC, index).log
        last = [value for key, value in read_log(plog) if key is not None][-1]
        assert last is None  # the tombstone

        new_pid, new_epoch = coordinator.init_producer_id("committed", 60000, -1, -1)
        assert (new_pid, new_epoch) != ids["committed"] and new_epoch == 0
        assert coordinator.remove_expired_transactional_ids(now, EXPIRATION_MS) == []  # "committed" is fresh again
        return new_pid, new_epoch


async def _reload(data_dir: str) -> tuple[list[str], int]:
    async with single_node(data_dir) as broker:
        await transaction_coordinator_ready(broker)
        transactions = broker.transaction_coordinator.transactions
        return sorted(transactions), transactions["committed"].producer_id


def test_idle_completed_ids_expire_with_a_tombstone(tmp_path) -> None:
    data_dir = str(tmp_path / "data")
    new_pid, _epoch = asyncio.run(_expire(data_dir))
    assert asyncio.run(_reload(data_dir)) == (["committed", "ongoing", "recent"], new_pid)


async def _run_broker_until_expired(data_dir: str) -> tuple[bool, bool]:
    async with single_node(
        data_dir, "transaction.abort.timed.out.transaction.cleanup.interval.ms=50",
        "transaction.remove.expired.transaction.cleanup.interval.ms=100", "transactional.id.expiration.ms=300",
    ) as broker:  # fmt: skip
        await transaction_coordinator_ready(broker)
        coordinator = broker.transaction_coordinator
        coordinator.init_producer_id("idle", 60000, -1, -1)
        kept_at_first = "idle" in coordinator.transactions
        await until(lambda: "idle" not in coordinator.transactions, "the idle id expired")
        return kept_at_first, "idle" not in coordinator.transactions


def test_the_broker_expires_idle_ids_on_its_cleanup_interval(tmp_path) -> None:
    assert asyncio.run(_run_broker_until_expired(str(tmp_path / "data"))) == (True, True)
