"""TransactionCoordinator: transactional.id.expiration.ms, in process.

Ids in Empty, CompleteCommit or CompleteAbort whose last state change is at least the
expiration old are forgotten and get a tombstone in ``__transaction_state`` (so a reload does
not bring them back); an ongoing transaction's id and ids changed more recently stay. A later
InitProducerId for a forgotten id starts with a new producer id at epoch 0.
"""

from __future__ import annotations

import asyncio

from kbroker.broker import Broker
from kbroker.config import KafkaConfig
from kbroker.meta_properties import init_log_dirs
from kbroker.transactions.transaction_log import TRANSACTION_STATE_TOPIC, TransactionState, partition_for, read_log

EXPIRATION_MS = 604_800_000


def _broker(data_dir: str) -> Broker:
    broker = Broker(KafkaConfig.load(overrides=[f"log.dirs={data_dir}"]))
    broker.cluster_id = init_log_dirs(broker.log_dirs, broker.node_id, invent_cluster_id=True)
    broker.controller.load()
    broker.log_manager.startup()
    broker.controller.activate_partitions()
    broker.offset_store.load()
    broker.transaction_coordinator.load()
    return broker


def test_default_expiration_is_kafkas() -> None:
    assert KafkaConfig.load().get_int("transactional.id.expiration.ms") == EXPIRATION_MS


def test_idle_completed_ids_expire_with_a_tombstone(tmp_path) -> None:
    data_dir = str(tmp_path / "data")
    broker = _broker(data_dir)
    try:
        broker.controller.create_internal_topic("exp", 1, {})
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
        states = {tid: m.state for tid, m in coordinator.transactions.items()}
        assert states == {"empty": TransactionState.EMPTY, "committed": TransactionState.COMPLETE_COMMIT,
                          "aborted": TransactionState.COMPLETE_ABORT, "ongoing": TransactionState.ONGOING,
                          "recent": TransactionState.EMPTY}
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
    finally:
        broker.log_manager.shutdown()

    reloaded = _broker(data_dir)
    try:
        assert sorted(reloaded.transaction_coordinator.transactions) == ["committed", "ongoing", "recent"]
        assert reloaded.transaction_coordinator.transactions["committed"].producer_id == new_pid
    finally:
        reloaded.log_manager.shutdown()


async def _run_broker_until_expired(data_dir: str) -> tuple[bool, bool]:
    broker = Broker(KafkaConfig.load(overrides=[
        f"log.dirs={data_dir}", "listeners=PLAINTEXT://127.0.0.1:0",
        "transaction.abort.timed.out.transaction.cleanup.interval.ms=50",
        "transaction.remove.expired.transaction.cleanup.interval.ms=100", "transactional.id.expiration.ms=300",
    ]))  # fmt: skip
    await broker.start()
    try:
        coordinator = broker.transaction_coordinator
        coordinator.init_producer_id("idle", 60000, -1, -1)
        kept_at_first = "idle" in coordinator.transactions
        for _ in range(60):
            await asyncio.sleep(0.05)
            if "idle" not in coordinator.transactions:
                break
        return kept_at_first, "idle" not in coordinator.transactions
    finally:
        await broker.stop()


def test_the_broker_expires_idle_ids_on_its_cleanup_interval(tmp_path) -> None:
    assert asyncio.run(_run_broker_until_expired(str(tmp_path / "data"))) == (True, True)
