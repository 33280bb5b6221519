"""A real single node (controller voter + broker) in the test's own event loop.

For tests that call a coordinator's methods directly: the node starts exactly as ``kbroker
serve`` starts it (the broker reaches its controller in process), and ``coordinating`` creates
an internal topic the way FindCoordinator does and waits until this broker leads and
coordinates every partition of it.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable

from kbroker.config.kafka_config import KafkaConfig
from kbroker.groups.offset_store import CONSUMER_OFFSETS_TOPIC, OFFSETS_TOPIC_CONFIGS
from kbroker.node.broker import Broker
from kbroker.node.controller_node import ControllerNode
from kbroker.node.meta_properties import init_log_dirs
from kbroker.transactions.transaction_log import TRANSACTION_STATE_TOPIC, TRANSACTION_STATE_TOPIC_CONFIGS

DEADLINE_S = 20.0


@contextlib.asynccontextmanager
async def single_node(data_dir: str, *overrides: str) -> AsyncIterator[Broker]:
    """Start a node on ``data_dir``; stop it cleanly on the way out."""
    config = KafkaConfig.load(overrides=[f"log.dirs={data_dir}", "listeners=PLAINTEXT://127.0.0.1:0", *overrides])
    controller = ControllerNode(config, init_log_dirs(config.log_dirs, config.node_id, invent_cluster_id=True))
    await controller.start()
    broker = Broker(config, local_controller=controller)
    try:
        await broker.start()
        yield broker
    finally:
        await broker.stop()
        await controller.stop()


async def until(condition: Callable[[], bool], what: str) -> None:
    """Wait until ``condition()`` holds (it changes as the node's tasks run)."""
    deadline = asyncio.get_running_loop().time() + DEADLINE_S
    while not condition():
        assert asyncio.get_running_loop().time() < deadline, f"not within {DEADLINE_S:.0f} s: {what}"
        await asyncio.sleep(0.01)


async def coordinating(broker: Broker, topic: str, partitions: int, configs: dict[str, str]) -> None:
    """Create ``topic`` (if new) as FindCoordinator does and wait until this broker leads it all."""
    if topic not in broker.controller.topics:
        await broker.controller.create_topic(topic, partitions, 1, configs)
    await until(lambda: all((topic, p) in broker.replica_manager.partitions
                            and broker.replica_manager.partitions[(topic, p)].is_leader
                            for p in range(partitions)), f"{topic} led here")


async def transaction_coordinator_ready(broker: Broker) -> None:
    coordinator = broker.transaction_coordinator
    await coordinating(broker, TRANSACTION_STATE_TOPIC, coordinator.num_partitions, TRANSACTION_STATE_TOPIC_CONFIGS)
    await until(lambda: len(coordinator.owned) == coordinator.num_partitions, "transactional ids coordinated here")


async def group_coordinator_ready(broker: Broker) -> None:
    store = broker.offset_store
    await coordinating(broker, CONSUMER_OFFSETS_TOPIC, store.num_partitions, OFFSETS_TOPIC_CONFIGS)
    ownership = broker.group_coordinator.ownership
    assert ownership is not None
    await until(lambda: len(ownership.owned) == store.num_partitions, "groups coordinated here")
