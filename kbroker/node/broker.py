"""Broker: the composition root of a node's broker role — builds the parts, starts listeners and
background tasks.

It wires; it does not decide. Every broker follows the controller quorum's metadata log, as
KRaft brokers do; a combined node (and kbroker's single node, a combined node that is its only
voter) hands its ``ControllerNode`` in, and the broker then reaches it in process. Start-up:
the logs load (recovering after a crash), listeners open, the broker registers and replays the
metadata log; client requests wait (Dispatcher readiness) until the controller has unfenced it,
and partitions become active as their registrations are replayed. Shutdown reverses it:
leadership moves away (controlled shutdown), accepting stops, in-flight requests finish, then
every log closes cleanly so the next start needs no recovery.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import logging
import random
from typing import TYPE_CHECKING

from kbroker.cluster.broker_lifecycle import BrokerLifecycleManager
from kbroker.config.config_resources import RESOURCE_GROUP
from kbroker.config.kafka_config import KafkaConfig
from kbroker.config.listener_settings import broker_link_security, controller_link_security, listener_securities
from kbroker.config.settings import (
    group_coordinator_settings,
    handler_settings,
    lifecycle_settings,
    replication_settings,
    socket_server_settings,
)
from kbroker.groups.consumer_coordinator import ConsumerGroupCoordinator
from kbroker.groups.coordinator import GroupCoordinator
from kbroker.groups.offset_store import CONSUMER_OFFSETS_TOPIC, OffsetStore
from kbroker.groups.partition_ownership import GroupPartitionOwnership
from kbroker.handlers import HANDLERS
from kbroker.handlers.security import SecurityFeatures
from kbroker.handlers.services import BrokerServices
from kbroker.network.dispatcher import Dispatcher
from kbroker.network.listener_security import SECURITY_PROTOCOLS
from kbroker.network.socket_server import SocketServer
from kbroker.node.meta_properties import init_log_dirs
from kbroker.node.open_file_limit import segment_file_budget
from kbroker.quotas.client_quotas import ClientQuotas, QuotaWindows
from kbroker.quotas.quota_precedence import QuotaConfigs
from kbroker.replication.fetch_session import FetchSessionCache
from kbroker.replication.forwarding_controller import ForwardingController
from kbroker.replication.quorum.metadata_image import MetadataImage
from kbroker.replication.quorum.producer_ids import ControllerProducerIdManager
from kbroker.replication.replica_manager import ReplicaManager
from kbroker.replication.replication_settings import ClusterLinks
from kbroker.security.authorizer import configured_authorizer
from kbroker.security.scram_credentials import ScramCredentials
from kbroker.storage.clock import SYSTEM_CLOCK, Clock
from kbroker.storage.log_cleaner import LogCleaner
from kbroker.storage.log_manager import LogManager
from kbroker.transactions.coordinator import TransactionCoordinator
from kbroker.transactions.marker_channel import BrokerClients, TransactionMarkerChannelManager, write_marker_replicated
from kbroker.transactions.transaction_log import TRANSACTION_STATE_TOPIC
from kbroker.transactions.verification import AddPartitionsToTxnManager

if TYPE_CHECKING:
    from kbroker.node.controller_node import ControllerNode

log = logging.getLogger(__name__)



class Broker:
    """Also the ``ClusterView`` its handlers receive: the cluster id and live brokers change as
    the metadata log is replayed."""

    def __init__(self, config: KafkaConfig, local_controller: ControllerNode | None = None,
                 clock: Clock = SYSTEM_CLOCK) -> None:
        self.config = config
        self.clock = clock
        self.node_id = config.node_id
        self.log_dirs = config.log_dirs
        self.cluster_id = ""
        self.local_controller = local_controller  # this node's own controller voter (combined node)
        self.log_manager = LogManager(self.log_dirs, lambda topic: self.controller.log_config(topic),
                                      max_open_segment_files=segment_file_budget(),
                                      recovery_threads_per_data_dir=config.get_int("num.recovery.threads.per.data.dir"),
                                      clock=clock)
        self.replica_manager = ReplicaManager(self.log_manager, self.node_id, clock)
        self.lifecycle: BrokerLifecycleManager | None = None
        self.controller = ForwardingController(
            self.node_id, self.replica_manager, config.layers,
            config.get_int("num.partitions"), config.get_int("default.replication.factor"),
            lambda key, version, request: self._lifecycle().send_to_controller(key, version, request),
        )
        self.producer_ids = ControllerProducerIdManager(lambda: self._lifecycle().allocate_producer_ids())
        self.offset_store = OffsetStore(
            self.controller, self.replica_manager, config.get_int("offsets.topic.num.partitions"), clock
        )
        group_settings = group_coordinator_settings(config)
        self.group_coordinator = GroupCoordinator(self.offset_store, group_settings, clock)
        # KIP-848 consumer groups; the classic coordinator defers to it for their group ids.
        self.consumer_coordinator = ConsumerGroupCoordinator(group_settings.consumer, self.controller,
                                                             self.group_coordinator, self.offset_store, clock)
        self.group_coordinator.consumer = self.consumer_coordinator
        self.consumer_coordinator.group_configs = functools.partial(self.controller.resource_configs, RESOURCE_GROUP)
        self.group_coordinator.ownership = ownership = GroupPartitionOwnership(
            self.offset_store, self.group_coordinator, self.consumer_coordinator)
        self.controller.leadership_listeners[CONSUMER_OFFSETS_TOPIC] = ownership.on_leadership
        # The transaction coordinator follows __transaction_state leadership, sends markers to
        # partition leaders, and leaders ask it to verify transactional writes.
        self.link_security = broker_link_security(config)  # to other brokers' inter-broker listener
        txn_clients = BrokerClients(lambda broker_id: self._lifecycle().endpoint(broker_id),
                                    lambda: self._lifecycle().source, f"kbroker-{self.node_id}-txn",
                                    self.link_security)
        self.marker_channel = TransactionMarkerChannelManager(
            self.node_id, self.controller, self.replica_manager, self.offset_store, txn_clients)
        self.transaction_coordinator = TransactionCoordinator(
            self.controller, self.replica_manager, self.offset_store, self.producer_ids, self.marker_channel,
            config.get_int("transaction.state.log.num.partitions"), config.get_int("transaction.max.timeout.ms"),
            clock,
        )
        self.controller.leadership_listeners[TRANSACTION_STATE_TOPIC] = self.transaction_coordinator.on_leadership
        self.add_partitions_to_txn_manager = AddPartitionsToTxnManager(
            self.node_id, self.controller, self.transaction_coordinator, txn_clients)
        # Client requests wait until the controller has unfenced this broker (Kafka processes
        # none before its broker has caught up with the metadata log and is unfenced).
        self.ready = asyncio.Event()
        self.client_quotas = ClientQuotas(self._client_quota_configs, QuotaWindows(
            config.get_int("quota.window.num"), config.get_int("quota.window.size.seconds"),
            config.get_int("controller.quota.window.num"), config.get_int("controller.quota.window.size.seconds"),
        ), clock)
        self.services = BrokerServices(
            catalogue=self.controller, replicas=self.replica_manager, log_manager=self.log_manager, cluster=self,
            classic_groups=self.group_coordinator, consumer_groups=self.consumer_coordinator,
            group_offsets=self.offset_store, transaction_coordinator=self.transaction_coordinator,
            producer_ids=self.producer_ids, transaction_verifier=self.add_partitions_to_txn_manager,
            write_txn_marker=functools.partial(write_marker_replicated, self.replica_manager, self.offset_store),
            settings=handler_settings(config), clock=clock, client_quotas=self.client_quotas,
            fetch_sessions=FetchSessionCache(config.get_int("max.incremental.fetch.session.cache.slots")),
            security=SecurityFeatures(authorizer=configured_authorizer(
                config.get("authorizer.class.name") or "", config.get("super.users") or "",
                config.get("allow.everyone.if.no.acl.found") or "false", self._metadata_image),
                scram=ScramCredentials(self._metadata_image)),
        )
        self.dispatcher = Dispatcher(self.services, HANDLERS, self.forward_to_controller, self.ready,
                                     quotas=self.client_quotas)
        self.socket_settings = socket_server_settings(config)
        self.socket_servers: list[SocketServer] = []
        self.bound: list[tuple[str, str, int]] = []
        self._tasks: list[asyncio.Task[None]] = []
        self.log_cleaner: LogCleaner | None = None

    @property
    def advertised(self) -> tuple[str, int]:
        """host, port clients are told to use (first advertised listener)."""
        listeners = self.config.advertised_listeners
        _name, host, port = listeners[0]
        if port == 0 and self.bound:
            port = self.bound[0][2]
        return host or "localhost", port

    def _metadata_image(self) -> MetadataImage:
        """The replayed metadata (the authorizer's ACLs); empty until the broker has joined."""
        return self.lifecycle.image if self.lifecycle is not None else MetadataImage()

    def _client_quota_configs(self) -> QuotaConfigs:
        """The client quotas in the replayed metadata (none until the broker has joined)."""
        return self.lifecycle.image.client_quotas if self.lifecycle is not None else {}

    def _lifecycle(self) -> BrokerLifecycleManager:
        assert self.lifecycle is not None, "the broker has not joined its controller yet"
        return self.lifecycle

    async def forward_to_controller(self, api_key: int, api_version: int, request: object) -> object | None:
        """A client's request for the controller, sent unchanged; None if it did not answer."""
        return await self._lifecycle().forward(api_key, api_version, request)

    def broker_listeners(self) -> list[tuple[str, str, int]]:
        """The listeners clients and brokers use (a combined node's controller listener excluded)."""
        names = self.config.controller_listener_names
        return [listener for listener in self.config.listeners if listener[0] not in names]

    def live_brokers(self, listener: str = "") -> list[tuple[int, str, int, str | None]]:
        """(node id, host, port, rack) of every unfenced broker on ``listener`` (the one a
        request came on; "": the inter-broker one), for Metadata and DescribeCluster. A broker
        without that listener is left out, as Kafka's Metadata leaves it out."""
        if self.lifecycle is None:
            return []
        out = []
        for broker in self.lifecycle.image.live_brokers():
            endpoint = broker.endpoint(listener)
            if endpoint is not None:
                out.append((broker.broker_id, endpoint[0], endpoint[1], broker.rack))
        return out

    def endpoint(self, broker_id: int, listener: str = "") -> tuple[str, int] | None:
        """Where clients of ``listener`` reach a registered broker (None before this broker has
        joined, or when it has no such listener)."""
        return None if self.lifecycle is None else self.lifecycle.endpoint(broker_id, listener)

    def finalized_features(self) -> tuple[int, dict[str, int]]:
        """The finalized feature levels as this broker has replayed them; their epoch is the
        image's offset, as Kafka's brokers report it."""
        if self.lifecycle is None:
            return -1, {}
        return self.lifecycle.image.offset, self.lifecycle.image.features

    @property
    def controller_id(self) -> int:
        """Kafka's KRaft brokers name a random live broker as "controller" (clients send admin
        requests there and it forwards them): a client whose pick stopped answering finds
        another in its next Metadata."""
        live = self.live_brokers()
        return random.choice(live)[0] if live else -1

    async def start(self) -> None:
        self.cluster_id = init_log_dirs(self.log_dirs, self.node_id, invent_cluster_id=False)
        self.log_manager.startup()
        loop = asyncio.get_running_loop()
        self._open_listeners()
        await self._join_cluster()
        self.producer_ids.prefetch()  # the first InitProducerId need not wait for a block
        self.ready.set()
        self.group_coordinator.start()
        self._tasks.append(loop.create_task(self._retention_loop()))
        if self.config.get_bool("log.cleaner.enable"):
            self.log_cleaner = LogCleaner(
                self.log_manager, self.config.get_int("log.cleaner.backoff.ms"), self._high_watermark
            )
            self._tasks.append(loop.create_task(self.log_cleaner.run()))
        self._tasks.append(loop.create_task(self._checkpoint_loop()))
        self._tasks.append(loop.create_task(self._high_watermark_checkpoint_loop()))
        self._tasks.append(loop.create_task(self._producer_expiry_loop()))
        self._tasks.append(loop.create_task(self._transaction_timeout_loop()))
        flush_interval_ms = self.config.get_int("log.flush.scheduler.interval.ms")
        if flush_interval_ms < 2**63 - 1:
            self._tasks.append(loop.create_task(self._flush_loop(flush_interval_ms / 1000)))

    def _open_listeners(self) -> None:
        """A single node's controller listeners get a SocketServer of their own: Kafka counts
        connections (max.connections, per ip) for its broker and its controller apart."""
        listeners = self.broker_listeners()
        names = self.config.controller_listener_names
        bound = {}
        security = listener_securities(self.config, [name for name, _host, _port in listeners],
                                       ScramCredentials(self._metadata_image))
        for group in ([lis for lis in listeners if lis[0] not in names], [lis for lis in listeners if lis[0] in names]):
            if group:
                server = SocketServer(self.dispatcher, self.socket_settings, group, security)
                self.socket_servers.append(server)
                bound.update((name, (name, host, port)) for name, host, port in server.start())
        self.bound = [bound[name] for name, _host, _port in listeners]

    async def _join_cluster(self) -> None:
        """Register with the controller, follow its metadata and replicate (cluster mode)."""
        wanted = self.config.inter_broker_listener_name
        name, bind_host, port = next((b for b in self.bound if b[0] == wanted), self.bound[0])
        endpoints = self._advertised_endpoints()
        host, port = next(((h, p) for n, h, p, _protocol in endpoints if n == name), (bind_host, port))
        settings = dataclasses.replace(lifecycle_settings(self.config), inter_broker_listener_name=name,
                                       controller_security=controller_link_security(self.config))
        self.lifecycle = BrokerLifecycleManager(self, settings, bind_host, host, port, self.local_controller,
                                                endpoints)
        self.replica_manager.configure_cluster(
            ClusterLinks(source_host=bind_host or None, endpoint=self.lifecycle.endpoint,
                         broker_epoch=lambda: self._lifecycle().broker_epoch,
                         alter_partition=self.lifecycle.alter_partition,
                         replica_eligible=self.lifecycle.replica_eligible, rack=self.lifecycle.rack,
                         partition_known=self.lifecycle.partition_known,
                         security=self.link_security),
            replication_settings(self.config),
        )
        await self.replica_manager.start()
        await self.lifecycle.start()

    def _advertised_endpoints(self) -> tuple[tuple[str, str, int, int], ...]:
        """Every broker listener as registered: (name, advertised host, port, security protocol
        id); a listener not in advertised.listeners is advertised as it is bound (port 0 resolved)."""
        advertised = {name: (host, port) for name, host, port in self.config.advertised_listeners}
        out = []
        for name, bind_host, bound_port in self.bound:
            host, port = advertised.get(name, (bind_host, bound_port))
            protocol = SECURITY_PROTOCOLS.index(self.config.security_protocol(name))
            out.append((name, host or bind_host, port or bound_port, protocol))
        return tuple(out)

    def _high_watermark(self, topic: str, index: int) -> int | None:
        partition = self.replica_manager.partitions.get((topic, index))
        return None if partition is None else partition.high_watermark

    async def _retention_loop(self) -> None:
        interval = self.config.get_int("log.retention.check.interval.ms") / 1000
        while True:
            await asyncio.sleep(interval)
            now_ms = self.clock.wall_ms()
            for partition in list(self.replica_manager.partitions.values()):
                try:
                    partition.log.enforce_retention(now_ms, partition.high_watermark)
                except OSError as exc:
                    log.error("retention of %s-%d failed: %s", partition.topic, partition.index, exc)

    async def _producer_expiry_loop(self) -> None:
        """Forget idle producers (producer.id.expiration.ms), checked every
        producer.id.expiration.check.interval.ms, as Kafka does."""
        interval = self.config.get_int("producer.id.expiration.check.interval.ms") / 1000
        expiration_ms = self.config.get_int("producer.id.expiration.ms")
        while True:
            await asyncio.sleep(interval)
            now_ms = self.clock.wall_ms()
            for partition in list(self.replica_manager.partitions.values()):
                partition.log.producer_state.remove_expired_producers(now_ms, expiration_ms)

    async def _transaction_timeout_loop(self) -> None:
        """Abort transactions past their timeout (transaction.abort.timed.out.transaction.cleanup.interval.ms)
        and, every transaction.remove.expired.transaction.cleanup.interval.ms, forget transactional
        ids idle for transactional.id.expiration.ms."""
        interval = self.config.get_int("transaction.abort.timed.out.transaction.cleanup.interval.ms") / 1000
        remove_interval_ms = self.config.get_int("transaction.remove.expired.transaction.cleanup.interval.ms")
        expiration_ms = self.config.get_int("transactional.id.expiration.ms")
        next_removal_ms = self.clock.wall_ms() + remove_interval_ms
        while True:
            await asyncio.sleep(interval)
            now_ms = self.clock.wall_ms()
            try:
                self.transaction_coordinator.abort_timed_out(now_ms)
            except OSError as exc:
                log.error("aborting timed-out transactions failed: %s", exc)
            if now_ms >= next_removal_ms:
                next_removal_ms = now_ms + remove_interval_ms
                try:
                    self.transaction_coordinator.remove_expired_transactional_ids(now_ms, expiration_ms)
                except OSError as exc:
                    log.error("removing expired transactional ids failed: %s", exc)

    async def _flush_loop(self, interval: float) -> None:
        """flush.ms needs a clock as well as appends (Kafka's log.flush.scheduler.interval.ms)."""
        while True:
            await asyncio.sleep(interval)
            now_ms = self.clock.wall_ms()
            for partition in list(self.replica_manager.partitions.values()):
                try:
                    partition.log.maybe_flush(now_ms)
                except OSError as exc:  # the log is offline now; LogDirHealth has logged it
                    log.debug("flush of %s-%d failed: %s", partition.topic, partition.index, exc)

    async def _checkpoint_loop(self) -> None:
        """Recovery points and log start offsets (log.flush.offset.checkpoint.interval.ms)."""
        interval = self.config.get_int("log.flush.offset.checkpoint.interval.ms") / 1000
        while True:
            await asyncio.sleep(interval)
            self.log_manager.checkpoint()

    async def _high_watermark_checkpoint_loop(self) -> None:
        """High watermarks (replica.high.watermark.checkpoint.interval.ms), so a restarted
        replica resumes from a recent one instead of its log start."""
        interval = self.config.get_int("replica.high.watermark.checkpoint.interval.ms") / 1000
        while True:
            await asyncio.sleep(interval)
            self.log_manager.checkpoint_high_watermarks(self.replica_manager.high_watermarks())

    async def stop(self) -> None:
        """Stop accepting, finish in-flight requests, close logs cleanly."""
        if self.lifecycle is not None:
            await self.lifecycle.controlled_shutdown()  # leadership moves away while we still answer
            await self.replica_manager.stop()
            self.lifecycle.stop()
        for server in self.socket_servers:
            server.close()
        if self.log_cleaner is not None:
            self.log_cleaner.stop()  # a cleaning in its worker thread gives up at its next batch
        for task in self._tasks:
            task.cancel()
        self.group_coordinator.stop()  # answers parked JoinGroup/SyncGroup so connections drain
        self.marker_channel.stop()
        self.consumer_coordinator.stop()
        connections = [conn for server in self.socket_servers for conn in server.connections]
        for conn in connections:
            conn.start_draining()
        tasks = [c.in_flight for c in connections if c.in_flight is not None]
        if tasks:
            # A long-poll fetch may be waiting; give in-flight work a bounded time.
            await asyncio.wait(tasks, timeout=5)
        for conn in connections:
            if conn.transport is not None:
                conn.transport.close()
        self.log_manager.shutdown(self.lifecycle.broker_epoch if self.lifecycle is not None else -1,
                                  self.replica_manager.high_watermarks())
        log.info("shut down cleanly")
