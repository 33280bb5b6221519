"""A data dir written by a single node of kbroker before it had one control plane (topics in
``kbroker-metadata.json``, producer id blocks in ``kbroker-producer-ids``) starts as a node
with a metadata log: same topics and ids, records where they were, producer ids continuing."""

from __future__ import annotations

import asyncio
import json
import os
import time
import uuid

from kbroker.protocol.errors import KafkaError
from kbroker.protocol.record_builder import build_batch
from kbroker.protocol.records import iter_records
from kbroker.storage.log import PartitionLog
from kbroker.storage.log_config import LogConfig

from kbroker.node.broker import Broker
from tests.kbroker.node_in_process import single_node, until

NOW = int(time.time() * 1000)


def _old_single_node(data_dir: str, topic_id: uuid.UUID) -> None:
    for partition in range(2):
        plog = PartitionLog.create(f"{data_dir}/orders-{partition}", "orders", partition, str(topic_id), LogConfig())
        plog.append_as_leader(memoryview(bytearray(build_batch([(None, b"p%d" % partition)], base_timestamp=NOW))),
                              0, NOW)
        plog.close()
    catalogue = {"version": 1, "cluster_configs": {"min.insync.replicas": "1"}, "topics": [
        {"name": "orders", "id": str(topic_id), "partitions": 2, "replication_factor": 1,
         "configs": {"retention.ms": "3600000"}}]}
    with open(f"{data_dir}/kbroker-metadata.json", "w", encoding="utf-8") as fh:
        json.dump(catalogue, fh)
    with open(f"{data_dir}/kbroker-producer-ids", "w", encoding="ascii") as fh:
        fh.write("5000\n")


async def _start(data_dir: str) -> tuple[tuple[uuid.UUID, dict[str, str]], list[bytes], int, list[str]]:
    async with single_node(data_dir) as broker:
        await until(lambda: all(("orders", p) in broker.replica_manager.partitions for p in range(2)),
                    "the imported partitions led here")
        info = broker.controller.topics["orders"]
        values = []
        for p in range(2):
            piece = broker.replica_manager.partitions[("orders", p)].log.read(0, 1 << 20, 1, True)
            values += [r.value for r in iter_records(piece.segment.read_bytes(piece.position, piece.length))]
        allocated: list[int] = []
        await until(lambda: _allocate(broker, allocated), "a producer id")
        return (info.topic_id, info.configs), values, allocated[0], sorted(
            name for name in os.listdir(data_dir) if name.startswith("kbroker-"))


def _allocate(broker: Broker, into: list[int]) -> bool:
    """One producer id, once the broker has a block from the controller."""
    try:
        into.append(broker.producer_ids.allocate())
    except KafkaError:  # COORDINATOR_LOAD_IN_PROGRESS: the block is on its way
        return False
    return True


def test_an_old_single_node_catalogue_is_imported_once(tmp_path) -> None:
    data_dir = str(tmp_path / "data")
    topic_id = uuid.uuid4()
    _old_single_node(data_dir, topic_id)
    (imported_id, configs), values, producer_id, leftovers = asyncio.run(_start(data_dir))
    assert (imported_id, configs) == (topic_id, {"retention.ms": "3600000"})
    assert values == [b"p0", b"p1"]
    assert producer_id >= 5000  # no id handed out before is handed out again
    assert leftovers == ["kbroker-metadata.json.imported", "kbroker-producer-ids.imported"]
    (again_id, _configs), values, _pid, _files = asyncio.run(_start(data_dir))  # the metadata log has it now
    assert again_id == topic_id and values == [b"p0", b"p1"]
