"""KIP-890 verification batched per transaction: one question per produce request.

A node in process; Produce requests over its socket carry one transactional batch for each of
three partitions of two topics. The leader asks the coordinator once for all three (Kafka's
ReplicaManager.appendRecordsWithTransactionVerification: one AddPartitionsToTxn transaction
entry naming every partition that needs verification), counted at the node's
AddPartitionsToTxnManager. Produce v12 has all three added to the transaction in that one
question; Produce v10 verifies them and refuses, with INVALID_TXN_STATE, only the partition that
was never added. Batches of two producer ids in one request are INVALID_PRODUCER_ID_MAPPING
for every partition and ask nothing.
"""

from __future__ import annotations

import asyncio
import datetime

from kbroker.protocol.record_builder import build_batch
from kbroker.protocol.records import TRANSACTIONAL_FLAG
from kio.schema.produce.v10 import request as produce_v10
from kio.schema.produce.v12 import request as produce_v12
from kio.static.primitive import i16, i32

from kbroker.node.broker import Broker
from tests.kbroker.handlers.wire import call
from tests.kbroker.node_in_process import single_node, transaction_coordinator_ready, until

_PRODUCE = {10: produce_v10, 12: produce_v12}
PARTITIONS = [("orders", 0), ("orders", 1), ("refunds", 0)]
INVALID_TXN_STATE, INVALID_PRODUCER_ID_MAPPING = 48, 49


def txn_batch(pid: int, epoch: int, value: bytes, sequence: int = 0) -> bytes:
    return build_batch([(None, value)], attributes=TRANSACTIONAL_FLAG, producer_id=pid, producer_epoch=epoch,
                       base_sequence=sequence, base_timestamp=1_700_000_000_000)


def produce(bootstrap: str, version: int, txn: str, batches: dict[tuple[str, int], bytes]
            ) -> dict[tuple[str, int], int]:
    """One Produce request (acks=all) with a batch per partition; each partition's error code."""
    m = _PRODUCE[version]
    topics: dict[str, list[object]] = {}
    for (topic, index), records in batches.items():
        topics.setdefault(topic, []).append(m.PartitionProduceData(index=i32(index), records=records))
    request = m.ProduceRequest(transactional_id=txn, acks=i16(-1), timeout=datetime.timedelta(seconds=10),
                               topic_data=tuple(m.TopicProduceData(name=topic, partition_data=tuple(parts))
                                                for topic, parts in topics.items()))
    response = call(bootstrap, request, version)
    return {(t.name, p.index): p.error_code for t in response.responses for p in t.partition_responses}


async def _node_with_topics(broker: Broker) -> str:
    await transaction_coordinator_ready(broker)
    await broker.controller.create_topic("orders", 2, 1, {})
    await broker.controller.create_topic("refunds", 1, 1, {})
    await until(lambda: all(tp in broker.replica_manager.partitions for tp in PARTITIONS), "topics led here")
    _name, host, port = broker.bound[0]
    return f"{host}:{port}"


def count_questions(broker: Broker) -> list[list[tuple[str, int]]]:
    """Record the partitions of each question the node's leaders ask the coordinator."""
    manager = broker.add_partitions_to_txn_manager
    asked: list[list[tuple[str, int]]] = []
    verify_or_add = manager.verify_or_add

    async def counted(transactional_id: str, producer_id: int, producer_epoch: int,
                      partitions: list[tuple[str, int]], add: bool) -> dict:
        asked.append(sorted(partitions))
        return await verify_or_add(transactional_id, producer_id, producer_epoch, partitions, add)

    manager.verify_or_add = counted  # type: ignore[method-assign]
    return asked


async def _one_question_adds_every_partition(data_dir: str) -> None:
    async with single_node(data_dir) as broker:
        bootstrap = await _node_with_topics(broker)
        coordinator = broker.transaction_coordinator
        pid, epoch = coordinator.init_producer_id("batched-v12", 60000, -1, -1)
        asked = count_questions(broker)
        errors = await asyncio.to_thread(produce, bootstrap, 12, "batched-v12",
                                         {tp: txn_batch(pid, epoch, b"v") for tp in PARTITIONS})
        assert errors == dict.fromkeys(PARTITIONS, 0)
        assert asked == [sorted(PARTITIONS)]
        assert coordinator.describe("batched-v12").partitions == set(PARTITIONS)
        # The transaction is open on all three now: the next request asks nothing.
        errors = await asyncio.to_thread(produce, bootstrap, 12, "batched-v12",
                                         {tp: txn_batch(pid, epoch, b"w", 1) for tp in PARTITIONS})
        assert errors == dict.fromkeys(PARTITIONS, 0)
        assert len(asked) == 1


def test_produce_v12_adds_all_its_partitions_in_one_question(tmp_path) -> None:
    asyncio.run(_one_question_adds_every_partition(str(tmp_path / "data")))


async def _one_question_verifies_every_partition(data_dir: str) -> None:
    async with single_node(data_dir) as broker:
        bootstrap = await _node_with_topics(broker)
        coordinator = broker.transaction_coordinator
        pid, epoch = coordinator.init_producer_id("batched-v10", 60000, -1, -1)
        coordinator.add_partitions("batched-v10", pid, epoch, PARTITIONS[:2])
        asked = count_questions(broker)
        errors = await asyncio.to_thread(produce, bootstrap, 10, "batched-v10",
                                         {tp: txn_batch(pid, epoch, b"v") for tp in PARTITIONS})
        assert errors == {PARTITIONS[0]: 0, PARTITIONS[1]: 0, PARTITIONS[2]: INVALID_TXN_STATE}
        assert asked == [sorted(PARTITIONS)]

        other = coordinator.allocator.allocate()
        batches = {PARTITIONS[0]: txn_batch(pid, epoch, b"a"), PARTITIONS[2]: txn_batch(other, 0, b"b")}
        errors = await asyncio.to_thread(produce, bootstrap, 10, "batched-v10", batches)
        assert errors == dict.fromkeys(batches, INVALID_PRODUCER_ID_MAPPING)
        assert len(asked) == 1


def test_produce_v10_verifies_all_its_partitions_in_one_question(tmp_path) -> None:
    asyncio.run(_one_question_verifies_every_partition(str(tmp_path / "data")))
