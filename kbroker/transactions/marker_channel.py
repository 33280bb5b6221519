"""TransactionMarkerChannelManager: a cluster coordinator's COMMIT/ABORT markers, to every leader.

Once a transaction's PrepareCommit/PrepareAbort record is replicated (the coordinator hands the
transaction over only then, or when it loads one left in Prepare*), each of its partitions
gets a marker on that partition's current leader: WriteTxnMarkers (key 27) to another broker,
the same write directly on this one (one partition per request, each partition on its own, so a
dead leader delays only its partitions). A leader answers once the marker is on its ISR (acks=all,
as Kafka's WriteTxnMarkers). Partitions whose write failed are retried at their leader of the
moment (the broker's metadata image) until written; a partition whose topic was deleted
meanwhile is dropped, and one whose producer has moved past the marker's epoch is not ended
there (INVALID_PRODUCER_EPOCH, as the single node does). Only then is the Complete record
logged; its append is retried while it fails with COORDINATOR_NOT_AVAILABLE (Kafka's
retryOnError). Sending stops when this broker stops coordinating the transactional id (the new
coordinator finds the Prepare* record and sends the markers again), and when a leader answers
TRANSACTION_COORDINATOR_FENCED: a newer coordinator has written a marker for the producer, so
this one's markers and Complete record are stale (Kafka cancels them; the transaction stays
Prepare* here until the partition's leadership, already elsewhere, is resigned).
Also the shared routine ``write_marker_replicated`` (local marker + wait for the ISR), used by
the WriteTxnMarkers handler, and ``BrokerClients`` (one InterBrokerClient per broker, bound to
this broker's host), used for AddPartitionsToTxn verification too.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from kio.schema.write_txn_markers.v1 import request as write_txn_markers_v1

from kbroker.groups.offset_store import CONSUMER_OFFSETS_TOPIC
from kbroker.metrics.topic_metrics import BROKER_TOPIC_METRICS
from kbroker.protocol.errors import ErrorCode, KafkaError
from kbroker.protocol.record_builder import build_end_txn_marker
from kbroker.replication.inter_broker_client import InterBrokerClient, LinkSecurity
from kbroker.transactions.transaction_log import TransactionMetadata, TransactionState

if TYPE_CHECKING:
    from kbroker.groups.offset_store import OffsetStore
    from kbroker.replication.forwarding_controller import ForwardingController
    from kbroker.replication.replica_manager import ReplicaManager
    from kbroker.transactions.coordinator import TransactionCoordinator

log = logging.getLogger(__name__)

# Every marker batch is this size and holds one record, which is all the topic metrics read of it.
MARKER_BATCH = build_end_txn_marker(0, 0, True, 0, 0)

WRITE_TXN_MARKERS = 27
RETRY_BACKOFF_S = 0.1  # Kafka's retry.backoff.ms for the marker channel
REQUEST_TIMEOUT_S = 30.0
LEADER_CHECK_S = 0.5  # how often a pending marker request checks whether its leader was replaced
Endpoint = Callable[[int], "tuple[str, int] | None"]


class BrokerClients:
    """One outbound connection per other broker, bound to this broker's host; a broker whose
    endpoint changed (restarted elsewhere) gets a new connection."""

    def __init__(self, endpoint: Endpoint, source_host: Callable[[], str | None], client_id: str,
                 security: LinkSecurity | None = None) -> None:
        self.endpoint = endpoint
        self.source_host = source_host
        self.client_id = client_id
        self.security = security  # the inter-broker listener's TLS / SASL
        self._clients: dict[int, InterBrokerClient] = {}

    def get(self, broker_id: int) -> InterBrokerClient | None:
        endpoint = self.endpoint(broker_id)
        if endpoint is None:
            return None
        client = self._clients.get(broker_id)
        if client is None or (client.host, client.port) != endpoint:
            if client is not None:
                client.close()
            client = InterBrokerClient(endpoint[0], endpoint[1], self.source_host(), self.client_id, self.security)
            self._clients[broker_id] = client
        return client

    def close(self) -> None:
        for client in self._clients.values():
            client.close()
        self._clients.clear()


async def write_marker_replicated(replica_manager: ReplicaManager, offset_store: OffsetStore, topic: str, index: int,
                                  producer_id: int, producer_epoch: int, commit: bool, coordinator_epoch: int,
                                  timeout_s: float = REQUEST_TIMEOUT_S) -> ErrorCode:
    """Write one marker as the partition's leader; answer once the ISR has it."""
    partition = replica_manager.partitions.get((topic, index))
    if partition is None:  # as Kafka's WriteTxnMarkers, whether or not the cluster has it elsewhere
        return ErrorCode.unknown_topic_or_partition
    try:
        offset = partition.append_end_txn_marker(producer_id, producer_epoch, commit, coordinator_epoch,
                                                 replica_manager.clock.wall_ms())
    except KafkaError as exc:
        BROKER_TOPIC_METRICS.produced(topic, MARKER_BATCH, exc.code)
        return exc.code
    except OSError as exc:
        BROKER_TOPIC_METRICS.produced(topic, MARKER_BATCH, ErrorCode.kafka_storage_error)
        log.debug("marker on %s-%d not written: %s", topic, index, exc)  # LogDirHealth logs the episode
        return ErrorCode.kafka_storage_error
    BROKER_TOPIC_METRICS.produced(topic, MARKER_BATCH, ErrorCode.none)  # Kafka counts markers as messages in
    if topic == CONSUMER_OFFSETS_TOPIC:
        offset_store.complete_transaction(producer_id, commit)
    try:
        return await asyncio.wait_for(partition.wait_for_commit(offset + 1), timeout_s)
    except TimeoutError:
        return ErrorCode.request_timed_out


class TransactionMarkerChannelManager:
    def __init__(self, node_id: int, controller: ForwardingController, replica_manager: ReplicaManager,
                 offset_store: OffsetStore, clients: BrokerClients) -> None:
        self.node_id = node_id
        self.controller = controller
        self.replica_manager = replica_manager
        self.offset_store = offset_store
        self.clients = clients
        self._tasks: set[asyncio.Task[None]] = set()  # held: the loop keeps only weak references

    def send_markers(self, coordinator: TransactionCoordinator, metadata: TransactionMetadata) -> None:
        task = asyncio.get_running_loop().create_task(self._complete(coordinator, metadata))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def stop(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        self.clients.close()

    async def _complete(self, coordinator: TransactionCoordinator, metadata: TransactionMetadata) -> None:
        transactional_id = metadata.transactional_id

        fenced: list[tuple[str, int]] = []

        def current() -> bool:
            return (not fenced and coordinator.owns(transactional_id)
                    and coordinator.transactions.get(transactional_id) is metadata)

        try:
            commit = metadata.state == TransactionState.PREPARE_COMMIT
            coordinator_epoch = coordinator.coordinator_epoch(transactional_id)
            done = await self._send_until_written(metadata, commit, coordinator_epoch, current, fenced)
            if fenced:
                log.info("markers for %r cancelled: %s-%d has a marker from a coordinator newer than epoch %d",
                         transactional_id, fenced[0][0], fenced[0][1], coordinator_epoch)
                return
            if not done or not current():
                log.info("markers for %r not completed here: no longer its coordinator", transactional_id)
                return
            await self._log_completion(coordinator, metadata, current)
        except KafkaError as exc:
            log.info("completing the transaction of %r stopped: %s", transactional_id, exc.code.name)
        except Exception:
            log.exception("completing the transaction of %r failed", transactional_id)

    async def _log_completion(self, coordinator: TransactionCoordinator, metadata: TransactionMetadata,
                              current: Callable[[], bool]) -> None:
        """The Complete record, appended again while it cannot be replicated (the ISR short)."""
        while True:
            try:
                coordinator.complete(metadata)
                await coordinator.replicated(metadata.transactional_id)
                return
            except KafkaError as exc:
                if exc.code != ErrorCode.coordinator_not_available or not current():
                    raise
                log.info("completing the transaction of %r: %s, retrying", metadata.transactional_id,
                         exc.code.name)
            await asyncio.sleep(RETRY_BACKOFF_S)

    async def _send_until_written(self, metadata: TransactionMetadata, commit: bool, coordinator_epoch: int,
                                  current: Callable[[], bool], fenced: list[tuple[str, int]]) -> bool:
        written = await asyncio.gather(*(self._until_written(tp, metadata, commit, coordinator_epoch, current,
                                                             fenced)
                                         for tp in sorted(metadata.partitions)))
        return all(written)

    async def _until_written(self, tp: tuple[str, int], metadata: TransactionMetadata, commit: bool,
                             coordinator_epoch: int, current: Callable[[], bool], fenced: list[tuple[str, int]]
                             ) -> bool:
        """One partition's marker, retried at the partition's leader of the moment; a request to
        a leader that has since been replaced is given up at once (not after its timeout)."""
        while current():
            registration = self.controller.partition_registration(*tp)
            if registration is None:
                log.info("%s-%d deleted: no marker for %r", tp[0], tp[1], metadata.transactional_id)
                return True
            leader = registration.leader
            if leader >= 0:
                write = asyncio.ensure_future(self._write(leader, tp, metadata, commit, coordinator_epoch))
                while not write.done():
                    await asyncio.wait({write}, timeout=LEADER_CHECK_S)
                    moved = self.controller.partition_registration(*tp)
                    if not write.done() and (moved is None or moved.leader != leader or not current()):
                        write.cancel()
                        break
                error = write.result() if write.done() and not write.cancelled() else ErrorCode.not_leader_or_follower
                if error == ErrorCode.none:
                    return True
                if error == ErrorCode.transaction_coordinator_fenced:
                    fenced.append(tp)  # current() is False from now on: every partition stops
                    return False
                if error == ErrorCode.invalid_producer_epoch:
                    log.warning("marker for %r on %s-%d not written: the producer moved past epoch %d",
                                metadata.transactional_id, tp[0], tp[1], metadata.producer_epoch)
                    return True
                log.debug("marker for %r on %s-%d at broker %d: %s, retrying", metadata.transactional_id, tp[0],
                          tp[1], leader, error.name)
            await asyncio.sleep(RETRY_BACKOFF_S)
        return False

    async def _write(self, leader: int, tp: tuple[str, int], metadata: TransactionMetadata, commit: bool,
                     coordinator_epoch: int) -> ErrorCode:
        topic, index = tp
        if leader == self.node_id:
            return await write_marker_replicated(self.replica_manager, self.offset_store, topic, index,
                                                 metadata.producer_id, metadata.producer_epoch, commit,
                                                 coordinator_epoch)
        client = self.clients.get(leader)
        if client is None:
            return ErrorCode.broker_not_available
        m = write_txn_markers_v1
        request = m.WriteTxnMarkersRequest(markers=(m.WritableTxnMarker(
            producer_id=metadata.producer_id, producer_epoch=metadata.producer_epoch, transaction_result=commit,
            topics=(m.WritableTxnMarkerTopic(name=topic, partition_indexes=(index,)),),
            coordinator_epoch=coordinator_epoch),))
        try:
            response = await client.request(WRITE_TXN_MARKERS, 1, request, timeout_s=REQUEST_TIMEOUT_S)
        except (ConnectionError, TimeoutError) as exc:
            log.debug("WriteTxnMarkers to broker %d failed: %s", leader, exc)
            return ErrorCode.network_exception
        for marker in response.markers:
            for t in marker.topics:
                for p in t.partitions:
                    if (t.name, p.partition_index) == tp:
                        return ErrorCode(p.error_code)
        return ErrorCode.unknown_server_error
