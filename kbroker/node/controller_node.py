"""ControllerNode: the composition root of a node with ``process.roles`` containing controller.

It opens the metadata log (``<metadata.log.dir or first log dir>/__cluster_metadata-0``) and
the ``quorum-state`` file, runs this voter's RaftNode over the network (QuorumDriver) with the
other ``controller.quorum.voters``, and makes the QuorumController active while this node
leads the quorum. It listens on the ``controller.listener.names`` listeners with the
controller's own handler table, fences brokers whose sessions expire (at each session's
deadline, told by the controller's listener when a broker closes its heartbeat connection) and
rebalances leaders.
Answers that report a decision wait until the decision is committed (``committed``). A node
whose cluster id a majority of the other voters refuse (INCONSISTENT_CLUSTER_ID), or whose
meta.properties names another cluster than the metadata log, is told to stop
(``on_inconsistent_cluster``) rather than retry for ever.
"""

from __future__ import annotations

import asyncio
import logging
import os
import random
from collections.abc import Callable, Sequence
from typing import Any

from kbroker.cluster.quorum_driver import QuorumDriver
from kbroker.config.kafka_config import KafkaConfig
from kbroker.config.listener_settings import controller_link_security, listener_securities
from kbroker.config.settings import socket_server_settings
from kbroker.controller_handlers import CONTROLLER_HANDLERS
from kbroker.controller_handlers.services import ControllerServices
from kbroker.handlers.security import SecurityFeatures
from kbroker.metrics.partition_changes import Elections
from kbroker.network.dispatcher import Dispatcher
from kbroker.network.socket_server import SocketServer
from kbroker.node.meta_properties import adopt_cluster_id, random_id
from kbroker.protocol.errors import ErrorCode, KafkaError
from kbroker.replication.quorum.legacy_catalogue import legacy_records, mark_imported
from kbroker.replication.quorum.metadata_image import BROKER_RESOURCE, METADATA_TOPIC, MetadataImage
from kbroker.replication.quorum.metadata_records import ConfigRecord, MetadataRecord
from kbroker.replication.quorum.metadata_snapshot import SnapshotPolicy, SnapshotSettings, load_image
from kbroker.replication.quorum.quorum_controller import ControllerSettings, QuorumController
from kbroker.replication.quorum.raft import RaftConfig, RaftNode, RaftRole
from kbroker.replication.quorum.raft_log import FileQuorumState, PartitionRaftLog
from kbroker.security.authorizer import configured_authorizer
from kbroker.security.scram_credentials import ScramCredentials
from kbroker.storage.clock import SYSTEM_CLOCK, Clock
from kbroker.storage.log import PartitionLog
from kbroker.storage.log_config import LogConfig

log = logging.getLogger(__name__)

COMMIT_TIMEOUT_S = 10.0
SESSION_RETRY_S = 0.1  # after fencing failed (no quorum, a full disk): look again this soon
METADATA_READ_BYTES = 8 * 1024 * 1024


class ControllerNode:
    """Also the services its controller handlers receive (``ControllerServices``)."""

    def __init__(self, config: KafkaConfig, cluster_id: str, clock: Clock = SYSTEM_CLOCK,
                 on_inconsistent_cluster: Callable[[str], None] = lambda _reason: None,
                 bootstrap_records: Sequence[MetadataRecord] = ()) -> None:
        self.config = config
        # Written with a new cluster's first records, as kafka-storage format writes them
        # (the SCRAM users of ``kbroker serve --add-scram``).
        self.bootstrap_records = list(bootstrap_records)
        self.on_inconsistent_cluster = on_inconsistent_cluster
        self.clock = clock
        self.node_id = config.node_id
        self.cluster_id = cluster_id
        self.voters = {node: (host, port) for node, host, port in config.quorum_voters}
        if self.node_id not in self.voters:
            raise RuntimeError(f"controller.quorum.voters does not name this node ({self.node_id})")
        metadata_dir = config.get("metadata.log.dir") or config.log_dirs[0]
        self.metadata_dir = os.path.join(metadata_dir, f"{METADATA_TOPIC}-0")
        os.makedirs(self.metadata_dir, exist_ok=True)
        self.metadata_log = PartitionLog(self.metadata_dir, METADATA_TOPIC, 0, LogConfig(
            # Kafka's test-only key wins, as in Kafka (metadata.log.segment.bytes is at least 8 MiB)
            segment_bytes=(config.get_int("internal.metadata.log.segment.bytes")
                           or config.get_int("metadata.log.segment.bytes")),
            segment_ms=config.get_int("metadata.log.segment.ms")), clock=clock)
        self.snapshots = SnapshotPolicy(SnapshotSettings(
            max_bytes_between_snapshots=config.get_int("metadata.log.max.record.bytes.between.snapshots"),
            max_interval_ms=config.get_int("metadata.log.max.snapshot.interval.ms")), clock.wall_ms())
        self.quorum: QuorumDriver | None = None
        self.controller = QuorumController(self.metadata_log, ControllerSettings(
            node_id=self.node_id,
            session_timeout_ms=config.get_int("broker.session.timeout.ms"),
            default_partitions=config.get_int("num.partitions"),
            default_replication_factor=config.get_int("default.replication.factor"),
            broker_default=config.get,
            disconnect_fence_ms=config.get_int("kbroker.broker.disconnect.fence.ms"),
        ), self._propose)
        # ControllerStats' leader elections, counted as the active controller commits them
        self.elections = Elections()
        self.controller.image.on_partition = self.elections.replayed
        # Kafka's controllers authorize their own clients too (CreateAcls/DeleteAcls sent to the
        # controller listener), from the ACLs in the active controller's image.
        self.security = SecurityFeatures(authorizer=configured_authorizer(
            config.get("authorizer.class.name") or "", config.get("super.users") or "",
            config.get("allow.everyone.if.no.acl.found") or "false", lambda: self.controller.image))
        self.dispatcher: Dispatcher[ControllerServices] = Dispatcher(self, CONTROLLER_HANDLERS,
                                                                     on_peer_closed=self._peer_closed)
        self._sessions_changed = asyncio.Event()  # a session deadline moved earlier: look again
        self.socket_server: SocketServer | None = None
        self.bound: list[tuple[str, str, int]] = []
        self._tasks: list[asyncio.Task[None]] = []
        self._committed_waiters: list[tuple[int, asyncio.Future[None]]] = []
        self._last_high_watermark = -1
        self._cluster_id_from_log = False

    @property
    def raft(self) -> RaftNode | None:
        return None if self.quorum is None else self.quorum.raft

    @property
    def inter_broker_listener_name(self) -> str | None:
        return self.config.get("inter.broker.listener.name")

    def handle_raft_request(self, api_key: int, request: Any) -> Any:
        assert self.quorum is not None, "a Raft request before the quorum started"
        return self.quorum.handle_request(api_key, request)

    def _propose(self, payloads: list[bytes]) -> int | None:
        assert self.quorum is not None
        return self.quorum.propose(payloads)

    def _new_raft(self, now_ms: int) -> RaftNode:
        """This voter's RaftNode as the disk has it (at start, and after a failed write)."""
        return RaftNode(
            self.node_id, self.voters, PartitionRaftLog(self.metadata_log), FileQuorumState(self.metadata_dir),
            random.Random(), RaftConfig(
                election_timeout_ms=self.config.get_int("controller.quorum.election.timeout.ms"),
                fetch_timeout_ms=self.config.get_int("controller.quorum.fetch.timeout.ms"),
                request_timeout_ms=self.config.get_int("controller.quorum.request.timeout.ms"),
                retry_backoff_ms=self.config.get_int("controller.quorum.retry.backoff.ms"),
            ), now_ms=now_ms,
        )

    async def start(self) -> None:
        # Every entry is fsynced when appended; a torn tail after a crash is cut by the CRC scan.
        self.metadata_log.load(clean_shutdown=False)
        loop = asyncio.get_running_loop()
        names = self.config.controller_listener_names
        listeners = [listener for listener in self.config.listeners if listener[0] in names]
        if listeners:
            # The controller listener may be secured too (SCRAM credentials from the controller's image).
            security = listener_securities(self.config, [name for name, _host, _port in listeners],
                                           ScramCredentials(lambda: self.controller.image))
            self.socket_server = SocketServer(self.dispatcher, socket_server_settings(self.config),
                                              listeners, security)
            self.bound = self.socket_server.start()
        elif set(self.voters) != {self.node_id}:
            raise RuntimeError("controller.listener.names names no listener in 'listeners'")
        # (The only voter needs no listener: its own broker reaches it in process.)
        source = self.bound[0][1] or None if self.bound else None
        self.quorum = QuorumDriver(self._new_raft, self.voters, source, self._on_quorum_change, self.clock,
                                   cluster_id=lambda: self.cluster_id,
                                   security=controller_link_security(self.config))
        self.quorum.start()
        self._tasks.append(loop.create_task(self._session_loop()))
        if self.config.get_bool("auto.leader.rebalance.enable"):
            self._tasks.append(loop.create_task(self._leader_rebalance_loop()))

    def _on_quorum_change(self) -> None:
        """After every Raft step: take or give up the active role; release committed waiters."""
        assert self.raft is not None and self.quorum is not None
        if len(self.quorum.refused_by) > len(self.voters) // 2:
            self.on_inconsistent_cluster(
                f"INCONSISTENT_CLUSTER_ID: voters {sorted(self.quorum.refused_by)}, a majority of "
                f"controller.quorum.voters, refuse this node's cluster id {self.cluster_id}: its log dirs "
                f"({', '.join(self.config.log_dirs)}) belong to another cluster")
        leading = self.raft.role is RaftRole.LEADER
        if leading and not self.controller.active:
            try:
                raft_log = self.raft.log
                self.controller.activate(self.raft.epoch, self.clock.wall_ms(),
                                         load_image(raft_log, raft_log.end_offset))
                if not self.controller.image.cluster_id:
                    self._bootstrap()
            except KafkaError as exc:
                log.warning("cannot become the active controller: %s", exc)
        elif not leading and self.controller.active:
            self.controller.deactivate()
        high_watermark = self.raft.high_watermark
        if self._committed_waiters:
            keep = []
            for offset, future in self._committed_waiters:
                if future.done():
                    continue
                if not leading:
                    future.set_exception(KafkaError(ErrorCode.not_controller))
                elif high_watermark > offset:
                    future.set_result(None)
                else:
                    keep.append((offset, future))
            self._committed_waiters = keep
        try:
            self.snapshots.on_committed(self.raft.log, high_watermark, self.clock.wall_ms())
        except OSError as exc:
            log.error("metadata snapshot not written: %s", exc)
        if not self._cluster_id_from_log and high_watermark > 0:
            self._adopt_cluster_id()
        if high_watermark != self._last_high_watermark:
            self._last_high_watermark = high_watermark
            self.controller.on_committed()

    def _bootstrap(self) -> None:
        """The first active controller of a new cluster writes its first records: the cluster id,
        the static min.insync.replicas as the cluster-wide default (as Kafka's storage format
        does), the catalogue of a single node written by an older kbroker, if there is one, and
        ``bootstrap_records``."""
        log_dir = self.config.log_dirs[0]
        records: list[MetadataRecord] = [
            ConfigRecord(BROKER_RESOURCE, "", "min.insync.replicas", self.config.get("min.insync.replicas")),
        ]
        records += legacy_records(log_dir, self.node_id)
        records += self.bootstrap_records
        # A voter of a quorum of several knows no cluster id of its own (one of them invents it
        # here, the others adopt it from the log); a single node's is in its meta.properties.
        self.cluster_id = self.cluster_id or random_id()
        self.controller.bootstrap(self.cluster_id, records, self.clock.wall_ms())
        mark_imported(log_dir)

    def metadata_batches(self, start: int) -> bytes:
        """Whole batches of the metadata log from the one holding ``start``, one read's worth:
        what this node's own broker replays up to the high watermark.

        The read is not cut at the high watermark: a voter's batches need not end where the
        quorum's agreement does (a follower batches the entries of each fetch), so the batch
        holding the high watermark is read whole and the replayer applies what lies below it."""
        piece = self.metadata_log.read(start, METADATA_READ_BYTES, self.metadata_log.log_end_offset, True)
        return b"" if piece is None else piece.segment.read_bytes(piece.position, piece.length)

    def _adopt_cluster_id(self) -> None:
        """The first active controller wrote the cluster id as the log's first metadata record;
        every voter answers with that one (a voter's own meta.properties may name another). It is
        read from the committed image (the record may lie behind a snapshot)."""
        image = self.snapshots.image
        if image is None or not image.cluster_id:
            return
        if self.cluster_id and image.cluster_id != self.cluster_id:
            self.on_inconsistent_cluster(
                f"INCONSISTENT_CLUSTER_ID: the metadata log is of cluster {image.cluster_id}, this "
                f"node's log dirs ({', '.join(self.config.log_dirs)}) of cluster {self.cluster_id}")
            return
        self.cluster_id = image.cluster_id
        self._cluster_id_from_log = True
        adopt_cluster_id(self.config.log_dirs, self.node_id, self.cluster_id)

    @property
    def high_watermark(self) -> int:
        return 0 if self.raft is None else self.raft.high_watermark

    @property
    def committed_image(self) -> MetadataImage | None:
        return self.snapshots.image

    async def committed(self) -> None:
        """Wait until every decision taken so far is committed by the quorum (NOT_CONTROLLER if
        this node stops leading first, REQUEST_TIMED_OUT after a while)."""
        offset = self.controller.image.offset
        if self.high_watermark > offset:
            return
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._committed_waiters.append((offset, future))
        try:
            await asyncio.wait_for(future, COMMIT_TIMEOUT_S)
        except TimeoutError:
            raise KafkaError(ErrorCode.request_timed_out) from None

    def _peer_closed(self, connection: str) -> None:
        """A connection to the controller listener was closed by its peer: if it carried a broker's
        heartbeats, that broker's session may now end sooner (kbroker.broker.disconnect.fence.ms)."""
        self.controller.connection_closed(connection, self.clock.wall_ms())
        self._sessions_changed.set()

    async def _session_loop(self) -> None:
        """Fence each broker when its session ends: wake at the earliest deadline, as Kafka's
        controller schedules its stale-broker check for the next deadline rather than polling (a
        tick of session/8 fenced up to 750 ms late at a 6 s session). Deadlines only move later
        (heartbeats, registrations, a new active controller's full sessions: each at least one
        session timeout from now) except when a heartbeat connection closes, which wakes the loop;
        so sleeping at most one session timeout never misses one."""
        session_s = self.config.get_int("broker.session.timeout.ms") / 1000
        while True:
            wait_s = session_s
            if self.controller.active:
                try:
                    self.controller.fence_expired_sessions(self.clock.wall_ms())
                    deadline = self.controller.next_session_deadline_ms()
                    if deadline is not None:
                        wait_s = min(session_s, max(deadline - self.clock.wall_ms(), 1) / 1000)
                except (OSError, KafkaError) as exc:
                    log.error("fencing expired sessions failed: %s", exc)
                    wait_s = min(session_s, SESSION_RETRY_S)
            self._sessions_changed.clear()
            try:
                await asyncio.wait_for(self._sessions_changed.wait(), wait_s)
            except TimeoutError:
                pass

    async def _leader_rebalance_loop(self) -> None:
        """Preferred replicas take their leadership back (auto.leader.rebalance.enable)."""
        interval = self.config.get_int("leader.imbalance.check.interval.seconds")
        # Kafka 4's controller moves every imbalanced leader back (its per-broker percentage key,
        # unused under KRaft, is gone in 4.3.1): a threshold of 0%.
        percentage = 0
        while True:
            await asyncio.sleep(interval)
            if not self.controller.active:
                continue
            try:
                self.controller.rebalance_leaders(percentage, self.clock.wall_ms())
            except (OSError, KafkaError) as exc:
                log.error("leader rebalance failed: %s", exc)

    async def stop(self) -> None:
        if self.quorum is not None:
            await self.quorum.stop()
        if self.socket_server is not None:
            self.socket_server.close()
            for conn in list(self.socket_server.connections):
                conn.close()
        for task in self._tasks:
            task.cancel()
        self.metadata_log.close()
