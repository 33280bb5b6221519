"""ControllerNode: the composition root of a node with ``process.roles`` containing controller.

It opens the metadata log (``<metadata.log.dir or first log dir>/__cluster_metadata-0``),
replays it into the QuorumController, listens on the ``controller.listener.names`` listeners
with the controller's own handler table, and fences brokers whose sessions expire. The node
shares ``meta.properties`` (node id, cluster id) with a broker in the same process.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time

from kbroker.config import KafkaConfig
from kbroker.connection import KafkaConnection
from kbroker.controller_handlers import CONTROLLER_HANDLERS
from kbroker.dispatcher import Dispatcher
from kbroker.replication.metadata_image import METADATA_TOPIC
from kbroker.replication.quorum_controller import ControllerSettings, QuorumController
from kbroker.storage.log import PartitionLog
from kbroker.storage.log_config import LogConfig

log = logging.getLogger(__name__)


class ControllerNode:
    def __init__(self, config: KafkaConfig, cluster_id: str) -> None:
        self.config = config
        self.node_id = config.node_id
        self.cluster_id = cluster_id
        voters = config.quorum_voters
        if [v[0] for v in voters] != [self.node_id] and len(voters) > 1:
            raise RuntimeError(
                "controller.quorum.voters: kbroker runs one controller voter for now; "
                f"got {len(voters)} voters"
            )
        metadata_dir = config.get("metadata.log.dir") or config.log_dirs[0]
        self.metadata_dir = os.path.join(metadata_dir, f"{METADATA_TOPIC}-0")
        os.makedirs(self.metadata_dir, exist_ok=True)
        self.metadata_log = PartitionLog(self.metadata_dir, METADATA_TOPIC, 0, LogConfig())
        self.controller = QuorumController(self.metadata_log, ControllerSettings(
            node_id=self.node_id,
            cluster_id=cluster_id,
            session_timeout_ms=config.get_int("broker.session.timeout.ms"),
            default_partitions=config.get_int("num.partitions"),
            default_replication_factor=config.get_int("default.replication.factor"),
            broker_default=config.get,
        ))
        self.dispatcher = Dispatcher(self, CONTROLLER_HANDLERS)
        self.servers: list[asyncio.Server] = []
        self.bound: list[tuple[str, str, int]] = []
        self._tasks: list[asyncio.Task[None]] = []

    async def start(self) -> None:
        # Every record is fsynced (below), so the whole log is trusted, but a torn tail after
        # a crash is still cut by the CRC scan.
        self.metadata_log.load(clean_shutdown=False)
        self.controller.load(int(time.time() * 1000))
        names = {n.strip().upper() for n in (self.config.get("controller.listener.names") or "").split(",")}
        loop = asyncio.get_running_loop()
        max_request = self.config.get_int("socket.request.max.bytes")
        for name, host, port in self.config.listeners:
            if name not in names:
                continue
            server = await loop.create_server(
                lambda: KafkaConnection(self.dispatcher, max_request), host or None, port, reuse_address=True,
            )
            self.servers.append(server)
            self.bound.append((name, host, server.sockets[0].getsockname()[1]))
        if not self.servers:
            raise RuntimeError("controller.listener.names names no listener in 'listeners'")
        self._tasks.append(loop.create_task(self._session_loop()))
        if self.config.get_bool("auto.leader.rebalance.enable"):
            self._tasks.append(loop.create_task(self._leader_rebalance_loop()))

    async def _session_loop(self) -> None:
        """Fence brokers whose heartbeats stopped (checked a few times per session)."""
        interval = max(self.config.get_int("broker.session.timeout.ms") / 8, 50) / 1000
        while True:
            await asyncio.sleep(interval)
            try:
                self.controller.fence_expired_sessions(int(time.time() * 1000))
            except OSError as exc:
                log.error("metadata log write failed: %s", exc)

    async def _leader_rebalance_loop(self) -> None:
        """Preferred replicas take their leadership back (auto.leader.rebalance.enable)."""
        interval = self.config.get_int("leader.imbalance.check.interval.seconds")
        percentage = self.config.get_int("leader.imbalance.per.broker.percentage")
        while True:
            await asyncio.sleep(interval)
            try:
                self.controller.rebalance_leaders(percentage, int(time.time() * 1000))
            except OSError as exc:
                log.error("metadata log write failed: %s", exc)

    async def stop(self) -> None:
        for server in self.servers:
            server.close()
        for task in self._tasks:
            task.cancel()
        for conn in list(self.dispatcher.connections):
            if conn.transport is not None:
                conn.transport.close()
        self.metadata_log.close()
