"""Brokers' replication data path over real sockets, with the test standing in for the controller.

Each ``ReplicaNode`` is one broker's ReplicaManager (real PartitionLogs in a tmp dir) served by
kbroker's own SocketServer and Dispatcher with the Produce, Fetch and OffsetForLeaderEpoch
handlers on its own 127.0.0.x address; followers fetch through ReplicaFetcherManager and
InterBrokerClient bound to that address. ``StandInController`` holds the partition
registrations, answers AlterPartition as Kafka's controller does (leader epoch and partition
epoch must match) and publishes every change to the nodes with ``apply_partition``, the call
the broker's metadata listener makes.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from kbroker.protocol.errors import ErrorCode, KafkaError
from kbroker.replication.fetch_session import FetchSessionCache
from kbroker.replication.partition import DataWaiter, Partition
from kbroker.replication.quorum.partition_registration import PartitionRegistration
from kbroker.replication.replica_manager import ReplicaManager
from kbroker.replication.replication_settings import ClusterLinks, ReplicationSettings
from kbroker.storage.log_config import LogConfig
from kbroker.storage.log_manager import LogManager

from kbroker.handlers import fetch, offset_for_leader_epoch, produce
from kbroker.handlers.security import SecurityFeatures
from kbroker.network.dispatcher import Dispatcher
from kbroker.network.socket_server import SocketServer, SocketServerSettings

MAX_REQUEST = 100 * 1024 * 1024


@dataclass(slots=True, frozen=True)
class TopicEntry:
    name: str
    topic_id: uuid.UUID
    partitions: int


class Catalogue:
    """The topic names and ids the handlers resolve (the broker's metadata image)."""

    def __init__(self) -> None:
        self.topics: dict[str, TopicEntry] = {}
        self.topics_by_id: dict[uuid.UUID, TopicEntry] = {}


@dataclass(slots=True, frozen=True)
class ReplicaServices:
    """What Produce, Fetch and OffsetForLeaderEpoch use of a broker here (no transactions)."""

    catalogue: Catalogue
    replicas: ReplicaManager
    security: SecurityFeatures = field(default_factory=SecurityFeatures)  # no authorizer: every request allowed
    fetch_sessions: FetchSessionCache = field(default_factory=FetchSessionCache)


class ReplicaNode:
    def __init__(self, node_id: int, host: str, data_dir: str, log_config: LogConfig) -> None:
        self.node_id = node_id
        self.host = host
        self.port = 0
        self.controller = Catalogue()
        self.log_manager = LogManager([data_dir], lambda _topic: log_config)
        self.log_manager.startup()
        self.replica_manager = ReplicaManager(self.log_manager, node_id)
        self.dispatcher = Dispatcher(ReplicaServices(self.controller, self.replica_manager), {
            produce.API_KEY: produce, fetch.API_KEY: fetch, offset_for_leader_epoch.API_KEY: offset_for_leader_epoch,
        })
        self.server: SocketServer | None = None

    async def start(self, links: ClusterLinks, settings: ReplicationSettings) -> None:
        self.replica_manager.configure_cluster(links, settings)
        await self.replica_manager.start()
        await self.listen()

    async def listen(self) -> None:
        settings = SocketServerSettings(socket_request_max_bytes=MAX_REQUEST)
        self.server = SocketServer(self.dispatcher, settings, [("PLAINTEXT", self.host, self.port)])
        [(_name, _host, self.port)] = self.server.start()

    async def stop_listening(self) -> None:
        """The broker's network goes away (its fetchers keep running)."""
        if self.server is not None:
            self.server.close()
            for conn in list(self.server.connections):
                if conn.transport is not None:
                    conn.transport.abort()
            self.server = None

    async def stop(self) -> None:
        await self.stop_listening()
        await self.replica_manager.stop()
        self.log_manager.shutdown()

    def partition(self, topic: str, index: int = 0) -> Partition:
        return self.replica_manager.partitions[(topic, index)]


class StandInController:
    def __init__(self) -> None:
        self.nodes: dict[int, ReplicaNode] = {}
        self.registrations: dict[tuple[str, int], PartitionRegistration] = {}
        self.topic_ids: dict[str, uuid.UUID] = {}
        self.alter_requests: list[tuple[str, int, list[int]]] = []
        self.fenced: set[int] = set()  # nodes whose metadata updates are held back (zombies)

    def links(self, node: ReplicaNode) -> ClusterLinks:
        def endpoint(broker_id: int) -> tuple[str, int] | None:
            peer = self.nodes.get(broker_id)
            return (peer.host, peer.port) if peer is not None and peer.port else None
        return ClusterLinks(node.host, endpoint, lambda: 1, self.alter_partition)

    def create(self, topic: str, replicas: list[int], partitions: int = 1) -> uuid.UUID:
        topic_id = uuid.uuid4()
        self.topic_ids[topic] = topic_id
        entry = TopicEntry(topic, topic_id, partitions)
        for node in self.nodes.values():
            node.controller.topics[topic] = entry
            node.controller.topics_by_id[topic_id] = entry
        for index in range(partitions):
            self.registrations[(topic, index)] = PartitionRegistration(
                tuple(replicas), tuple(replicas), replicas[0], 0, 0)
            self.publish(topic, index)
        return topic_id

    def publish(self, topic: str, index: int) -> None:
        registration = self.registrations[(topic, index)]
        for node_id, node in self.nodes.items():
            if node_id not in self.fenced:
                node.replica_manager.apply_partition(topic, index, self.topic_ids[topic], registration)

    def elect(self, topic: str, index: int, leader: int, isr: list[int] | None = None) -> PartitionRegistration:
        current = self.registrations[(topic, index)]
        registration = replace(
            current, leader=leader, isr=tuple(isr if isr is not None else current.isr),
            leader_epoch=current.leader_epoch + 1, partition_epoch=current.partition_epoch + 1)
        self.registrations[(topic, index)] = registration
        self.publish(topic, index)
        return registration

    async def alter_partition(self, topic: str, index: int, topic_id: uuid.UUID, leader_epoch: int,
                              partition_epoch: int, new_isr: list[int]) -> PartitionRegistration:
        self.alter_requests.append((topic, index, list(new_isr)))
        current = self.registrations[(topic, index)]
        if leader_epoch != current.leader_epoch:
            raise KafkaError(ErrorCode.fenced_leader_epoch)
        if partition_epoch != current.partition_epoch:
            raise KafkaError(ErrorCode.invalid_update_version)
        registration = replace(current, isr=tuple(new_isr), partition_epoch=current.partition_epoch + 1)
        self.registrations[(topic, index)] = registration
        self.publish(topic, index)
        return registration


async def start_cluster(tmp_path, node_ids: list[int], settings: ReplicationSettings,
                        **log_config: int) -> StandInController:
    controller = StandInController()
    config = LogConfig(**log_config)
    for node_id in node_ids:
        controller.nodes[node_id] = ReplicaNode(node_id, f"127.0.0.{10 + node_id}", str(tmp_path / f"n{node_id}"),
                                                config)
    for node in controller.nodes.values():
        await node.start(controller.links(node), settings)
    return controller


async def stop_cluster(controller: StandInController) -> None:
    for node in controller.nodes.values():
        await node.stop()


async def wait_until(predicate: Callable[[], bool], partitions: Callable[[], list[Partition]],
                     timeout: float = 10.0) -> None:
    """Wait, event-driven, until ``predicate`` holds: re-checked whenever one of the partitions'
    high watermark or log moves. Fails the test after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not predicate():
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise AssertionError("condition not reached in time")
        waiter = DataWaiter()
        watched = partitions()
        for partition in watched:
            partition.add_waiter(waiter)
        try:
            await asyncio.wait({waiter.future}, timeout=min(remaining, 0.5))
        finally:
            for partition in watched:
                partition.remove_waiter(waiter)
