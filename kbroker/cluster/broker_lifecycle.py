"""BrokerLifecycleManager: a broker's life with its controller.

It follows the metadata log — on a broker-only node by Fetch of ``__cluster_metadata`` as an
observer (long-polling; below the controller's log start it is told to FetchSnapshot the
latest snapshot and loads it into a new image first, KIP-630); on a combined node (a single
node included) by reading what its own controller voter has committed, as Kafka's brokers
share their node's Raft client — replays it into a MetadataImage and hands every change to
the ForwardingController (catalogue and replicas). It registers the broker
(BrokerRegistration: the broker epoch), heartbeats every ``broker.heartbeat.interval.ms``
(staying fenced until it has replayed the log up to its own registration), re-registers when
told its epoch is stale, and on shutdown asks for a controlled shutdown so leadership moves
away before the process exits. It also carries AlterPartition and AllocateProducerIds to the
controller: in process when the active controller is the local voter (LocalControllerClient),
else over a socket bound to this broker's own address. Which voter that is, and the connections
to it, is ControllerLocator's part (controller_locator.py).
"""

from __future__ import annotations

import asyncio
import datetime
import logging
import time
import uuid
from dataclasses import dataclass
from typing import Any, Protocol

from kio.schema.allocate_producer_ids.v0 import request as allocate_v0
from kio.schema.alter_partition.v3 import request as alter_partition_v3
from kio.schema.broker_heartbeat.v1 import request as heartbeat_v1
from kio.schema.broker_registration.v4 import request as registration_v4
from kio.schema.fetch.v12 import request as fetch_v12
from kio.schema.fetch_snapshot.v0 import request as fetch_snapshot_v0

from kbroker.cluster.controller_locator import ControllerLocator, LocalVoter
from kbroker.metrics.partition_changes import IsrChanges
from kbroker.node.meta_properties import adopt_cluster_id
from kbroker.protocol.codec import build
from kbroker.protocol.errors import ErrorCode, KafkaError
from kbroker.protocol.records import batch_size_at, read_header
from kbroker.replication.forwarding_controller import ForwardingController
from kbroker.replication.inter_broker_client import LinkSecurity
from kbroker.replication.loop_turns import LoopTurns
from kbroker.replication.quorum import raft_snapshot
from kbroker.replication.quorum.metadata_image import METADATA_TOPIC, MetadataImage, decode_batch
from kbroker.replication.quorum.metadata_snapshot import image_from_snapshot
from kbroker.replication.quorum.partition_registration import PartitionRegistration
from kbroker.storage.log_manager import LogManager

log = logging.getLogger(__name__)

METADATA_FETCH_WAIT_MS = 500
METADATA_FETCH_MAX_BYTES = 8 * 1024 * 1024
RETRY_BACKOFF_S = 0.1
CONTROLLED_SHUTDOWN_TIMEOUT_S = 10.0


@dataclass(frozen=True, slots=True)
class LifecycleSettings:
    """The keys the lifecycle acts on, read once by the composition root
    (``kbroker.config.settings.lifecycle_settings``)."""

    quorum_voters: tuple[tuple[int, str, int], ...]  # controller.quorum.voters: (node id, host, port)
    heartbeat_interval_ms: int = 2000  # broker.heartbeat.interval.ms
    # broker.session.timeout.ms: a heartbeat unanswered for half of it is given up, so the broker
    # still reaches a new active controller within the fresh session that controller grants.
    session_timeout_ms: int = 9000
    # controller.quorum.fetch.timeout.ms: a metadata fetch unanswered this long means the quorum
    # leader is gone (KRaft's observer then asks the other voters who leads).
    fetch_timeout_ms: int = 2000
    # The listener name the broker registers its inter-broker endpoint under.
    inter_broker_listener_name: str = "PLAINTEXT"
    rack: str | None = None  # broker.rack
    # How the broker reaches the controllers (the controller listener's TLS / SASL), None: PLAINTEXT.
    controller_security: LinkSecurity | None = None


class LifecycleBroker(Protocol):
    """What the lifecycle uses of its broker (the composition root, which this module does not import)."""

    node_id: int
    log_dirs: list[str]
    cluster_id: str  # adopted from the metadata log when the log dirs name none yet
    log_manager: LogManager
    controller: ForwardingController  # the catalogue the replayed metadata is handed to


class BrokerLifecycleManager(ControllerLocator):
    def __init__(self, broker: LifecycleBroker, settings: LifecycleSettings, bind_host: str, host: str, port: int,
                 local_controller: LocalVoter | None = None,
                 endpoints: tuple[tuple[str, str, int, int], ...] = ()) -> None:
        self.broker = broker
        self.settings = settings
        self.host, self.port = host, port  # this broker's (advertised) inter-broker endpoint
        # Every (advertised) broker listener: name, host, port, security protocol id; registered
        # so each client is told the endpoints of the listener it came on.
        self.endpoints = endpoints or ((settings.inter_broker_listener_name, host, port, 0),)
        # Set by stop(): the loops also end on it, because Python 3.11's asyncio.wait_for can lose a
        # cancellation that arrives together with the awaited answer; a loop that went on then kept
        # the process alive after "shut down cleanly" until it was killed.
        self._stopped = False
        self._start_locating(broker.node_id, settings.quorum_voters, bind_host or None, local_controller,
                             settings.controller_security)
        self.image = MetadataImage()
        # IsrShrinksPerSec / IsrExpandsPerSec: the ISR changes this leader proposed and the controller accepted
        self.isr_changes = IsrChanges()
        self.next_metadata_offset = 0  # the first metadata log offset not yet replayed
        self.incarnation_id = uuid.uuid4()
        self.broker_epoch = -1
        # KIP-966: the epoch this broker had when it last shut down cleanly (-1: it crashed).
        self.previous_broker_epoch = broker.log_manager.clean_shutdown_broker_epoch
        self.fenced = True
        self.unfenced = asyncio.Event()
        self._replayed = asyncio.Event()  # set whenever records have been applied to the image
        self._cluster_id_known = asyncio.Event()
        self._shutting_down = False
        self._tasks: list[asyncio.Task[None]] = []
        self._published = False  # the image has reached the catalogue and replicas (see _publish)
        # The next publish hands over the whole image, not its changes: the first one, and one
        # after a snapshot replaced the image.
        self._whole_image = True
        self._publishing = asyncio.Lock()

    async def start(self) -> None:
        """Register, then return once the controller has unfenced this broker and the broker's
        own image says so (its Metadata answers then list it)."""
        loop = asyncio.get_running_loop()
        metadata_loop = self._local_metadata_loop if self.local_controller is not None else self._metadata_loop
        self._tasks.append(loop.create_task(metadata_loop()))
        self._tasks[-1].add_done_callback(_report_failure)
        await self._cluster_id_known.wait()
        if self.broker.cluster_id != self.image.cluster_id:  # stop rather than wait forever
            raise RuntimeError(
                f"INCONSISTENT_CLUSTER_ID: this broker's log dirs ({', '.join(self.broker.log_dirs)}) belong to "
                f"cluster {self.broker.cluster_id}, the controller quorum's metadata log to {self.image.cluster_id}")
        await self._register()
        await self._publish(False)  # the replay may have passed the registration already
        self._tasks.append(loop.create_task(self._heartbeat_loop()))
        self._tasks[-1].add_done_callback(_report_failure)
        await self.unfenced.wait()
        while not self.image.is_live(self.broker.node_id) and not self._stopped:
            self._replayed.clear()
            await self._replayed.wait()

    async def controlled_shutdown(self) -> None:
        """Ask the controller to move leadership away and fence us; bounded in time."""
        self._shutting_down = True
        if self.broker_epoch < 0:
            return  # never registered: nothing leads here
        deadline = time.monotonic() + CONTROLLED_SHUTDOWN_TIMEOUT_S
        while time.monotonic() < deadline and self.broker_epoch >= 0:
            try:
                response = await self._heartbeat(want_shut_down=True)
                if response.error_code == ErrorCode.none and response.should_shut_down:
                    log.info("controlled shutdown complete")
                    return
            except (ConnectionError, TimeoutError) as exc:
                log.warning("controlled shutdown: %s", exc)
            await asyncio.sleep(RETRY_BACKOFF_S)
        log.warning("controlled shutdown did not complete within %.0f s", CONTROLLED_SHUTDOWN_TIMEOUT_S)

    def stop(self) -> None:
        self._stopped = True
        for task in self._tasks:
            task.cancel()
        self.control.close()
        self.heartbeats.close()
        self.metadata.close()

    # --- registration and heartbeats ------------------------------------------------------

    async def _register(self) -> None:
        m = registration_v4
        while True:
            listeners = tuple(m.Listener(name=name, host=host, port=port, security_protocol=protocol)
                              for name, host, port, protocol in self.endpoints)
            request = build(
                m.BrokerRegistrationRequest, broker_id=self.broker.node_id, cluster_id=self.broker.cluster_id,
                incarnation_id=self.incarnation_id, listeners=listeners, features=(),
                rack=self.settings.rack, is_migrating_zk_broker=False, log_dirs=(),
                previous_broker_epoch=self.broker_epoch if self.broker_epoch >= 0 else self.previous_broker_epoch,
            )
            client = self.heartbeats
            try:
                response = await client.request(62, 4, request, timeout_s=10.0)
            except (ConnectionError, TimeoutError) as exc:
                log.info("registration: controller %d not reachable (%s)", self.controller_id, exc)
                self._find_controller(failed=client)
                await asyncio.sleep(RETRY_BACKOFF_S * 5)
                continue
            if response.error_code == ErrorCode.not_controller:
                self._find_controller(failed=client)
                await asyncio.sleep(RETRY_BACKOFF_S)
                continue
            if response.error_code == ErrorCode.none:
                self.broker_epoch = response.broker_epoch
                log.info("registered with the controller, broker epoch %d", self.broker_epoch)
                return
            if response.error_code == ErrorCode.inconsistent_cluster_id:
                raise RuntimeError(
                    f"INCONSISTENT_CLUSTER_ID: the controller refused this broker's registration: its log dirs "
                    f"({', '.join(self.broker.log_dirs)}) belong to cluster {self.broker.cluster_id}, the controller "
                    f"quorum is {self.image.cluster_id or 'another cluster'}")
            log.info("registration refused: %s; retrying", ErrorCode(response.error_code).name)
            await asyncio.sleep(RETRY_BACKOFF_S * 5)

    async def _heartbeat(self, want_shut_down: bool = False) -> Any:
        request = heartbeat_v1.BrokerHeartbeatRequest(
            broker_id=self.broker.node_id, broker_epoch=self.broker_epoch,
            current_metadata_offset=self.image.offset, want_fence=False, want_shut_down=want_shut_down,
        )
        return await self.heartbeats.request(63, 1, request, timeout_s=self.settings.session_timeout_ms / 2 / 1000)

    async def _heartbeat_loop(self) -> None:
        interval = self.settings.heartbeat_interval_ms / 1000
        while not self._shutting_down and not self._stopped:
            if self.fenced and self.image.offset < self.broker_epoch:
                # The controller unfences a broker that has replayed its own registration: ask
                # as soon as that is so, not a heartbeat interval later.
                await self._replayed_past(self.broker_epoch, interval)
            self._follow_quorum_leader()
            client = self.heartbeats  # the one _heartbeat uses: no await in between
            try:
                response = await self._heartbeat()
            except (ConnectionError, TimeoutError) as exc:
                log.warning("heartbeat to controller %d failed: %s", self.controller_id, exc)
                self._find_controller(failed=client)
                await asyncio.sleep(min(interval, RETRY_BACKOFF_S))
                continue
            log.debug("heartbeat to controller %d at metadata offset %d (next %d, local hw %s): %s, fenced %s",
                      self.controller_id, self.image.offset, self.next_metadata_offset,
                      self.local_controller.high_watermark if self.local_controller else None,
                      ErrorCode(response.error_code).name, response.is_fenced)
            if response.error_code == ErrorCode.not_controller:
                self._find_controller(failed=client)
                await asyncio.sleep(RETRY_BACKOFF_S)
                continue
            if response.error_code == ErrorCode.stale_broker_epoch:
                log.warning("broker epoch %d is stale; registering again", self.broker_epoch)
                self._set_fenced(True)
                await self._register()
                continue
            if response.error_code == ErrorCode.none:
                self._set_fenced(response.is_fenced)
            # An unfenced broker heartbeats at the interval; a fenced one retries sooner so it
            # is unfenced as soon as its metadata has caught up.
            await asyncio.sleep(interval if not self.fenced else min(interval, 0.1))

    async def _replayed_past(self, offset: int, timeout_s: float) -> None:
        """Wait (at most ``timeout_s``) until the image has applied ``offset``."""
        deadline = asyncio.get_running_loop().time() + timeout_s
        while self.image.offset < offset and not self._stopped:
            remaining = deadline - asyncio.get_running_loop().time()
            if remaining <= 0:
                return
            self._replayed.clear()
            try:
                await asyncio.wait_for(self._replayed.wait(), remaining)
            except TimeoutError:
                return

    def _set_fenced(self, fenced: bool) -> None:
        if fenced != self.fenced:
            log.info("broker %s", "fenced" if fenced else "unfenced")
        self.fenced = fenced
        if not fenced:
            self.unfenced.set()

    # --- the metadata log ------------------------------------------------------------------

    async def _metadata_loop(self) -> None:
        m = fetch_v12
        while not self._stopped:
            request = m.FetchRequest(
                cluster_id=None, replica_id=self.broker.node_id,
                max_wait=datetime.timedelta(milliseconds=METADATA_FETCH_WAIT_MS), min_bytes=1,
                max_bytes=METADATA_FETCH_MAX_BYTES, isolation_level=0, session_id=0, session_epoch=-1,
                forgotten_topics_data=(), rack_id="",
                topics=(m.FetchTopic(topic=METADATA_TOPIC, partitions=(m.FetchPartition(
                    partition=0, current_leader_epoch=-1, fetch_offset=self.next_metadata_offset,
                    last_fetched_epoch=-1, log_start_offset=-1, partition_max_bytes=METADATA_FETCH_MAX_BYTES,
                ),)),),
            )
            client, asked = self.metadata, self.metadata_voter
            timeout_s = max(self.settings.fetch_timeout_ms, 2 * METADATA_FETCH_WAIT_MS) / 1000
            try:
                response = await client.request(1, 12, request, timeout_s=timeout_s)
            except (ConnectionError, TimeoutError) as exc:
                log.debug("metadata fetch from voter %d failed: %s", asked, exc)
                if self._fetched_leader is not None and self._fetched_leader[0] == asked:
                    # KRaft's observer gives up a leader unheard of for controller.quorum.fetch.timeout.ms
                    # and asks the other voters; their word naming it is stale until they elect.
                    self._silent = (*self._fetched_leader, time.monotonic() + 2 * timeout_s)
                    self._fetched_leader = None
                if client is self.metadata and len(self.voters) > 1:
                    self._ask_voter(self._next_voter(asked))
                await asyncio.sleep(RETRY_BACKOFF_S)
                continue
            data = response.responses[0].partitions[0]
            leader, epoch = data.current_leader.leader_id, data.current_leader.leader_epoch
            if data.error_code == ErrorCode.not_leader_or_follower:
                stale = (leader == self._silent_voter() and self._silent is not None and epoch <= self._silent[1])
                if leader == asked:
                    pass  # elected, not active yet: ask it again
                elif leader >= 0 and leader in self.voters and not stale:
                    if leader != self.controller_id:
                        self._find_controller(leader, failed=client)  # everything moves to the new leader
                    else:
                        self._ask_voter(leader)  # back to the controller we had: it still leads
                elif client is self.metadata and len(self.voters) > 1:
                    self._ask_voter(self._next_voter(asked))
                await asyncio.sleep(RETRY_BACKOFF_S)
                continue
            if leader == asked:
                if asked != self.controller_id:
                    self._find_controller(asked, failed=client)  # the voter asked leads: everything moves there
                self._fetched_leader, self._silent = (leader, epoch), None
            if data.error_code != ErrorCode.none:
                log.warning("metadata fetch: %s", ErrorCode(data.error_code).name)
                await asyncio.sleep(RETRY_BACKOFF_S)
                continue
            if data.snapshot_id.end_offset >= 0:
                # Our position lies below the controller's log start: its snapshot first (KIP-630).
                await self._fetch_snapshot(data.snapshot_id.end_offset, data.snapshot_id.epoch)
                continue
            if data.records:
                await self._replay(bytes(data.records))

    async def _fetch_snapshot(self, end_offset: int, epoch: int) -> None:
        """FetchSnapshot (59) the controller's snapshot in chunks, then load it into a new image."""
        m = fetch_snapshot_v0
        data = bytearray()
        while not self._stopped:
            request = m.FetchSnapshotRequest(
                replica_id=self.broker.node_id, max_bytes=METADATA_FETCH_MAX_BYTES,
                topics=(m.TopicSnapshot(name=METADATA_TOPIC, partitions=(m.PartitionSnapshot(
                    partition=0, current_leader_epoch=-1, position=len(data),
                    snapshot_id=m.SnapshotId(end_offset=end_offset, epoch=epoch)),)),))
            client = self.metadata
            try:
                response = await client.request(59, 0, request, timeout_s=30.0)
            except (ConnectionError, TimeoutError) as exc:
                log.info("metadata snapshot fetch failed: %s", exc)
                self._find_controller(failed=client)
                await asyncio.sleep(RETRY_BACKOFF_S)
                return
            part = response.topics[0].partitions[0] if response.topics else None
            code = ErrorCode(part.error_code if part is not None else response.error_code)
            if part is None or code != ErrorCode.none:
                # SNAPSHOT_NOT_FOUND: a newer one replaced it; the next Fetch names that one.
                log.info("metadata snapshot fetch: %s", code.name)
                await asyncio.sleep(RETRY_BACKOFF_S)
                return
            data += part.unaligned_records
            if len(data) >= part.size:
                break
        else:
            return
        try:
            payloads = raft_snapshot.decode(bytes(data))
        except raft_snapshot.InvalidSnapshot as exc:
            log.warning("metadata snapshot %d-%d is not valid (%s): fetching again", end_offset, epoch, exc)
            return
        await self._load_snapshot(payloads, end_offset)

    async def _load_snapshot(self, payloads: list[bytes], end_offset: int) -> None:
        """Replace the image by a snapshot's (what it no longer lists, the catalogue drops too)."""
        self.image = image_from_snapshot(payloads, end_offset)
        self._whole_image = True
        self.next_metadata_offset = end_offset
        log.info("metadata snapshot loaded: %d records, up to offset %d", len(payloads), end_offset)
        await self._after_replay(applied=True)

    async def _local_metadata_loop(self) -> None:
        """A combined node: replay what the local voter has committed (below its high watermark;
        committed entries never change), waking whenever the high watermark moves."""
        node = self.local_controller
        assert node is not None
        while not self._stopped:
            self._follow_quorum_leader()
            committed = node.high_watermark
            raft_log = node.raft.log if node.raft is not None else None
            if raft_log is not None and self.next_metadata_offset < raft_log.start_offset:
                # The entries we have not replayed are behind the voter's snapshot (at start, or
                # after the voter took its leader's snapshot): load that first.
                snapshot = raft_log.latest_snapshot_id
                assert snapshot is not None, "a log start above 0 is a snapshot's end"
                await self._load_snapshot(raft_log.snapshot_payloads(snapshot), snapshot.end_offset)
                continue
            if committed > self.next_metadata_offset:
                await self._replay(node.metadata_batches(self.next_metadata_offset), committed)
                continue
            try:
                await asyncio.wait_for(node.controller.wait_for_records(), METADATA_FETCH_WAIT_MS / 1000)
            except TimeoutError:
                pass

    async def _replay(self, records: bytes, end: int | None = None) -> None:
        """Apply the records of whole batches from ``next_metadata_offset`` (and below ``end``).

        The position moves past every entry read, the quorum's own LeaderChange entries too
        (they are not applied: were the position the image's offset, a log ending in one would
        be read again and again)."""
        applied = False
        turns = LoopTurns()  # a topic of thousands of partitions is thousands of records
        position = 0
        while True:
            size = batch_size_at(records, position)
            if size is None or position + size > len(records):
                break  # a partial batch at the end of a fetch (max bytes): fetched again next time
            header = read_header(records, position)
            batch = records[position:position + size]
            position += size
            for offset, record in decode_batch(batch):
                if offset >= self.next_metadata_offset and (end is None or offset < end):
                    self.image.apply(offset, record)
                    applied = True
                    await turns.maybe_yield()
            last = header.last_offset if end is None else min(header.last_offset, end - 1)
            self.next_metadata_offset = max(self.next_metadata_offset, last + 1)
        await self._after_replay(applied)

    async def _after_replay(self, applied: bool) -> None:
        """Wake what waits on the image, learn the cluster id, hand the image to the catalogue."""
        if applied:
            self._replayed.set()
        if self.image.cluster_id and not self._cluster_id_known.is_set():
            if not self.broker.cluster_id:
                adopt_cluster_id(self.broker.log_dirs, self.broker.node_id, self.image.cluster_id)
                self.broker.cluster_id = self.image.cluster_id
            self._cluster_id_known.set()
        if self.broker.cluster_id != self.image.cluster_id:
            return  # another cluster's metadata is never applied here (start() stops the broker)
        await self._publish(applied)

    async def _publish(self, applied: bool) -> None:
        """Hand the image to the catalogue and the replicas — only once this broker has registered
        and replayed past its own registration, as Kafka's broker publishes nothing before its
        initial catch-up: a restarted broker would otherwise take up the leadership its previous
        incarnation held, at the same leader epoch, with the lower high watermark of its checkpoint,
        until the controller fenced that incarnation."""
        if not self._published:
            if self.broker_epoch < 0 or self.image.offset < self.broker_epoch:
                return
            self._published = applied = True
        if applied:
            async with self._publishing:  # start() and the replay loop may both get here
                changes = self.image.take_changes()
                whole, self._whole_image = self._whole_image, False
                await self.broker.controller.sync_from_image(self.image, None if whole else changes)

    # --- requests for the replication layer ------------------------------------------------

    def replica_eligible(self, broker_id: int, broker_epoch: int) -> bool:
        """KIP-903: a follower joins an ISR only as the live incarnation the controller knows (a
        fetch from a previous incarnation, with an older broker epoch, does not count)."""
        registration = self.image.brokers.get(broker_id)
        if registration is None or registration.fenced:
            return False
        return broker_epoch < 0 or broker_epoch == registration.broker_epoch

    def partition_known(self, topic: str, index: int) -> bool:
        """Whether the cluster's metadata has this partition (Kafka's metadataCache.contains)."""
        image = self.image.topics.get(topic)
        return image is not None and index in image.partitions

    def rack(self, broker_id: int) -> str | None:
        registration = self.image.brokers.get(broker_id)
        return None if registration is None else registration.rack

    def endpoint(self, broker_id: int, listener: str = "") -> tuple[str, int] | None:
        """Where a registered broker listens on ``listener`` ("": the inter-broker listener, by
        this broker's own inter.broker.listener.name, as Kafka's brokers pick it from a registration)."""
        registration = self.image.brokers.get(broker_id)
        if registration is None:
            return None
        return registration.endpoint(listener or self.settings.inter_broker_listener_name)

    async def alter_partition(self, topic: str, index: int, topic_id: uuid.UUID, leader_epoch: int,
                              partition_epoch: int, new_isr: list[int]) -> PartitionRegistration:
        m = alter_partition_v3
        known = self.image.topics_by_id.get(topic_id)
        before = known.partitions.get(index) if known is not None else None
        request = m.AlterPartitionRequest(
            broker_id=self.broker.node_id, broker_epoch=self.broker_epoch,
            topics=(m.TopicData(topic_id=topic_id, partitions=(m.PartitionData(
                partition_index=index, leader_epoch=leader_epoch, partition_epoch=partition_epoch,
                leader_recovery_state=0,
                new_isr_with_epochs=tuple(m.BrokerState(broker_id=b, broker_epoch=-1) for b in new_isr),
            ),)),),
        )
        response = await self.control.request(56, 3, request, timeout_s=10.0)
        if response.error_code != ErrorCode.none:
            raise KafkaError(ErrorCode(response.error_code))
        p = response.topics[0].partitions[0]
        if p.error_code != ErrorCode.none:
            raise KafkaError(ErrorCode(p.error_code))
        if before is not None:
            self.isr_changes.committed(before.isr, p.isr)
        current = self.image.topics_by_id[topic_id].partitions[index]
        return PartitionRegistration(current.replicas, tuple(p.isr), p.leader_id, p.leader_epoch, p.partition_epoch)

    async def allocate_producer_ids(self) -> tuple[int, int]:
        request = allocate_v0.AllocateProducerIdsRequest(broker_id=self.broker.node_id,
                                                         broker_epoch=self.broker_epoch)
        response = await self.control.request(67, 0, request, timeout_s=10.0)
        if response.error_code != ErrorCode.none:
            raise KafkaError(ErrorCode(response.error_code))
        return response.producer_id_start, response.producer_id_len

    async def send_to_controller(self, api_key: int, api_version: int, request: Any) -> Any:
        return await self.control.request(api_key, api_version, request, timeout_s=30.0)

    async def forward(self, api_key: int, api_version: int, request: Any) -> Any | None:
        """A client's request, sent unchanged to the active controller; its answer, or None when
        the controller could not be reached (the caller answers REQUEST_TIMED_OUT)."""
        try:
            return await self.send_to_controller(api_key, api_version, request)
        except (ConnectionError, TimeoutError) as exc:
            log.warning("forwarding API %d to the controller failed: %s", api_key, exc)
            return None


def _report_failure(task: asyncio.Task[None]) -> None:
    """A loop of the lifecycle that ends with an error would leave the broker silently stale."""
    if not task.cancelled() and task.exception() is not None:
        log.error("%s stopped with an error", task.get_coro().__qualname__, exc_info=task.exception())
