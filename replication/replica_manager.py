"""ReplicaManager: the partitions this broker hosts, and produce/fetch across them.

Handlers call it with topic-partitions; it finds the Partition, turns ``KafkaError`` into
per-partition error codes at one boundary, and runs Kafka's delayed fetch: read once, and if
fewer than ``min_bytes`` are ready, wait on the partitions' futures (one timer for the whole
request) and read again. acks=all produces wait, all partitions of a request together, until
the high watermark passes their records (Kafka's delayed produce).

Cluster mode (``configure_cluster``): the broker applies the controller's partition
registrations with ``apply_partition`` (lead, follow through the ReplicaFetcherManager, or
drop the replica); follower fetches (replica id >= 0) read up to the log end offset, update
the follower's state on the leader and are answered a DivergingEpoch when their last fetched
epoch disagrees with the leader's epoch cache; a timer shrinks the ISR of led partitions.
"""

from __future__ import annotations

import asyncio
import base64
import logging
import uuid
from dataclasses import dataclass, field

from kbroker.protocol.errors import ErrorCode, InvalidRecordError, KafkaError
from kbroker.storage.clock import SYSTEM_CLOCK, Clock
from kbroker.storage.log import FetchSlice
from kbroker.storage.log_manager import LogManager
from kbroker.storage.transaction_index import AbortedTxn

from .partition import DataWaiter, Partition
from .quorum.partition_registration import PartitionRegistration
from .replica_fetcher import ReplicaFetcherManager
from .replication_settings import ClusterLinks, ReplicationSettings

log = logging.getLogger(__name__)

READ_UNCOMMITTED = 0
READ_COMMITTED = 1


@dataclass(slots=True)
class ProduceResult:
    error: ErrorCode = ErrorCode.none
    base_offset: int = -1
    log_append_time: int = -1
    log_start_offset: int = -1
    error_message: str | None = None
    record_errors: list[tuple[int, str | None]] = field(default_factory=list)
    # acks=all: answered when the high watermark passes the records (see await_acks).
    pending: asyncio.Future[ErrorCode] | None = field(default=None, repr=False)


@dataclass(slots=True)
class FetchRequestPartition:
    topic: str
    partition: int
    fetch_offset: int
    max_bytes: int
    current_leader_epoch: int = -1
    last_fetched_epoch: int = -1  # v12+, followers: for the divergence check
    log_start_offset: int = -1  # followers' own log start offset


@dataclass(slots=True)
class FetchResult:
    error: ErrorCode = ErrorCode.none
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1
    records: FetchSlice | None = None
    aborted_transactions: list[AbortedTxn] = field(default_factory=list)  # read_committed only
    diverging_epoch: tuple[int, int] | None = None  # (epoch, end offset) for a diverged follower
    preferred_read_replica: int = -1  # KIP-392: the replica a consumer should fetch from instead
    high_watermark_moved: bool = False  # to a follower: higher than the one it was last sent


@dataclass(slots=True, frozen=True)
class FetchParams:
    """Who fetches: a consumer (replica_id -1) or a follower broker and its broker epoch."""

    replica_id: int = -1
    replica_epoch: int = -1
    # KIP-392: a consumer sending Fetch v11+ has client metadata (its rack, maybe empty) and
    # may read from a follower; older consumers read from the leader only.
    client_rack: str | None = None

    @property
    def is_from_follower(self) -> bool:
        return self.replica_id >= 0


CONSUMER_FETCH = FetchParams()


class ReplicaManager:
    def __init__(self, log_manager: LogManager, broker_id: int, clock: Clock = SYSTEM_CLOCK) -> None:
        self.log_manager = log_manager
        self.clock = clock
        self.broker_id = broker_id
        self.partitions: dict[tuple[str, int], Partition] = {}
        self.links: ClusterLinks | None = None
        self.settings = ReplicationSettings()
        self.fetcher_manager: ReplicaFetcherManager | None = None
        self._isr_task: asyncio.Task[None] | None = None
        self._stopped = False

    # --- cluster mode ---------------------------------------------------------------------

    def configure_cluster(self, links: ClusterLinks, settings: ReplicationSettings,
                          run_fetch_loops: bool = True) -> None:
        """Enter cluster mode: replicas follow leaders and ISR changes go to the controller.
        ``run_fetch_loops`` False leaves sending fetches to the caller (``ReplicaFetcherManager``)."""
        self.links = links
        self.settings = settings
        self.fetcher_manager = ReplicaFetcherManager(self.broker_id, links, settings, self.clock, run_fetch_loops)
        for partition in self.partitions.values():
            self._configure_partition(partition)

    def _configure_partition(self, partition: Partition) -> None:
        if self.links is not None:
            partition.alter_partition = self.links.alter_partition
            partition.replica_eligible = self.links.replica_eligible
            partition.lag_time_max_ms = self.settings.replica_lag_time_max_ms

    async def start(self) -> None:
        """Start the ISR-shrink timer (every replica.lag.time.max.ms / 2, as Kafka)."""
        if self._isr_task is None:
            self._isr_task = asyncio.get_running_loop().create_task(self._isr_expiration_loop())

    async def stop(self) -> None:
        # Metadata replayed while the broker shuts down must not start a fetcher that nobody
        # stops (its loop kept a stopped broker's process alive).
        self._stopped = True
        if self._isr_task is not None:
            self._isr_task.cancel()
            self._isr_task = None
        if self.fetcher_manager is not None:
            await self.fetcher_manager.stop()

    async def _isr_expiration_loop(self) -> None:
        interval = self.settings.replica_lag_time_max_ms / 2 / 1000
        while True:
            await asyncio.sleep(interval)
            self.shrink_isrs(self.clock.wall_ms())

    def broker_registrations_changed(self, broker_ids: set[int]) -> None:
        """Brokers whose registration changed (fenced, unfenced, a new incarnation's epoch): in
        the partitions led here where they are followers outside the ISR, they may stop holding
        the high watermark back (fenced) or join the ISR (unfenced, caught up before)."""
        for partition in self.partitions.values():
            if partition.is_leader and any(b in partition.remote_replicas and b not in partition.isr
                                           for b in broker_ids):
                partition.replica_broker_changed(self.clock.wall_ms())

    def shrink_isrs(self, now_ms: int) -> None:
        """One round of Kafka's ISR expiration: every led partition drops lagging followers."""
        for partition in list(self.partitions.values()):
            partition.maybe_shrink_isr(now_ms)

    def apply_partition(self, topic: str, index: int, topic_id: uuid.UUID,
                        registration: PartitionRegistration) -> None:
        """Apply the controller's registration of one partition to this broker's replica.

        Leader if it names this broker; follower (fetching from the leader, or idle if there is
        none) if this broker is among the replicas; otherwise the local replica is stopped and
        deleted. Registrations older than the one applied (lower leader epoch, or the same
        leader epoch and no newer partition epoch) are ignored.
        """
        key = (topic, index)
        partition = self.partitions.get(key)
        if self.broker_id not in registration.replicas:
            if partition is not None or self.log_manager.get(topic, index) is not None:
                if self.fetcher_manager is not None:
                    self.fetcher_manager.remove_partition(topic, index)
                self.remove_partition(topic, index)
            return
        if partition is not None and partition.registration is not None:
            current = partition.registration
            if registration.leader_epoch < current.leader_epoch or (
                registration.leader_epoch == current.leader_epoch
                and registration.partition_epoch <= current.partition_epoch
            ):
                return
        if partition is None:
            partition = self.make_leader(topic, index, topic_id)
            self._configure_partition(partition)
            # Resume from the checkpointed high watermark (the log start offset without one):
            # never above what was committed; a leader's rises as soon as its ISR fetches.
            partition.high_watermark = self.log_manager.checkpointed_high_watermark(topic, index)
        if registration.leader == self.broker_id:
            if self.fetcher_manager is not None:
                self.fetcher_manager.remove_partition(topic, index)
            partition.become_leader(registration, self.clock.wall_ms())
            return
        if partition.become_follower(registration) and self.fetcher_manager is not None and not self._stopped:
            if registration.leader >= 0:
                self.fetcher_manager.add_partition(partition, registration.leader)  # moves it if needed
            else:
                self.fetcher_manager.remove_partition(topic, index)

    # --- partition lifecycle (driven by the controller) -----------------------------------

    async def create_logs(self, wanted: list[tuple[str, int, uuid.UUID, PartitionRegistration]]) -> None:
        """Write the new logs of many replicas at once off the event loop (LogManager's writer
        threads), before their registrations are applied one by one: a thousand new partitions
        then neither hold the loop nor wait for one file after another. The logs of partitions
        this broker is to lead get their leader epoch there too (``become_leader`` then finds it
        recorded). A log that could not be written is left to ``make_leader``/``make_follower``,
        which meet and report the error."""
        epochs = {(topic, index): reg.leader_epoch for topic, index, _, reg in wanted if reg.leader == self.broker_id}
        planned = self.log_manager.plan_new_logs(
            [(topic, index, _id_text(tid)) for topic, index, tid, _ in wanted], epochs)
        if planned:
            made = await asyncio.to_thread(self.log_manager.write_new_logs, planned)
            self.log_manager.adopt_new_logs(made)

    def make_leader(self, topic: str, index: int, topic_id: uuid.UUID) -> Partition:
        partition = self.partitions.get((topic, index))
        if partition is None:
            plog = self.log_manager.get(topic, index) or self.log_manager.create(topic, index, _id_text(topic_id))
            partition = Partition(topic, index, topic_id, plog, self.broker_id, self.clock)
            self.partitions[(topic, index)] = partition
        return partition

    def high_watermarks(self) -> dict[tuple[str, int], int]:
        """Every hosted partition's high watermark, for ``replication-offset-checkpoint``."""
        return {key: partition.high_watermark for key, partition in self.partitions.items()}

    def remove_partition(self, topic: str, index: int) -> None:
        partition = self.partitions.pop((topic, index), None)
        if partition is not None:
            partition.leader_id = -1  # anything still holding it sees a non-leader
            partition.fail_commit_waiters(ErrorCode.not_leader_or_follower)
            partition.wake_waiters()
        self.log_manager.delete(topic, index)

    def get_partition(self, topic: str, index: int) -> Partition:
        """The hosted partition. As Kafka's getPartitionOrException: a partition the cluster has
        but this broker holds no replica of (moved by a reassignment, or the client's metadata is
        stale) is NOT_LEADER_OR_FOLLOWER, which makes clients refresh their metadata; one the
        cluster does not have is UNKNOWN_TOPIC_OR_PARTITION."""
        partition = self.partitions.get((topic, index))
        if partition is None:
            if self.links is not None and self.links.partition_known(topic, index):
                raise KafkaError(ErrorCode.not_leader_or_follower, "This server is not a replica of this partition.")
            raise KafkaError(ErrorCode.unknown_topic_or_partition, "This server does not host this topic-partition.")
        return partition

    # --- produce --------------------------------------------------------------------------

    def append_records(self, topic: str, index: int, records: memoryview, required_acks: int) -> ProduceResult:
        try:
            partition = self.get_partition(topic, index)
            info = partition.append_as_leader(records, required_acks, self.clock.wall_ms())
        except InvalidRecordError as exc:
            return ProduceResult(exc.code, error_message=exc.message, record_errors=exc.record_errors)
        except KafkaError as exc:
            # As Kafka: only record validation errors (above) carry a message; for the rest
            # (MESSAGE_TOO_LARGE, NOT_ENOUGH_REPLICAS, unknown partition, ...) the error message
            # is null and clients show the error code's standard text.
            log.debug("append to %s-%d refused: %s", topic, index, exc.message)
            return ProduceResult(exc.code)
        except OSError as exc:
            # LogDirHealth logs the episode (once, not per request).
            log.debug("append to %s-%d failed: %s", topic, index, exc)
            return ProduceResult(ErrorCode.kafka_storage_error)
        result = ProduceResult(ErrorCode.none, info.first_offset, info.log_append_time, info.log_start_offset)
        if required_acks == -1:
            status = partition.commit_status(info.last_offset + 1)
            if status is not None:
                result.error = status  # committed already (a single replica, or a retried batch)
            else:
                result.pending = partition.wait_for_commit(info.last_offset + 1)
        return result

    async def await_acks(self, results: list[ProduceResult], timeout_ms: int) -> None:
        """acks=all: wait (one timer for the whole request) until every appended partition is
        committed; still uncommitted at ``timeout_ms`` is REQUEST_TIMED_OUT (Kafka's delayed
        produce), leadership lost meanwhile NOT_LEADER_OR_FOLLOWER."""
        pending = [r.pending for r in results if r.pending is not None]
        if pending:
            await asyncio.wait(pending, timeout=max(timeout_ms, 0) / 1000)
        for result in results:
            future, result.pending = result.pending, None
            if future is None:
                continue
            if future.done():
                result.error = future.result()
            else:
                future.cancel()
                result.error = ErrorCode.request_timed_out

    # --- fetch ----------------------------------------------------------------------------

    async def fetch(
        self,
        requests: list[FetchRequestPartition],
        max_wait_ms: int,
        min_bytes: int,
        max_bytes: int,
        isolation_level: int,
        params: FetchParams = CONSUMER_FETCH,
    ) -> list[FetchResult]:
        """Kafka's delayed fetch: answer now if ``min_bytes`` are ready, else wait and re-read.

        A follower's fetch position is recorded once, at the first read (as Kafka: not again
        when the delayed fetch completes)."""
        results, ready = self._read_all(requests, max_bytes, isolation_level, params, update_fetch_state=True)
        if ready >= min_bytes or max_wait_ms <= 0 or any(_answer_now(r) for r in results):
            return results
        # One waiter for the whole request (not a future per partition: a follower asks for
        # hundreds); it remembers which partitions woke it, and only those are read again.
        waiter = DataWaiter()
        index_of = {(r.topic, r.partition): i for i, r in enumerate(requests)}
        watched = [self.partitions[key] for key in index_of if key in self.partitions]
        if not watched:
            return results
        for partition in watched:
            partition.add_waiter(waiter)
        deadline = self.clock.monotonic() + max_wait_ms / 1000
        try:
            while True:
                remaining = deadline - self.clock.monotonic()
                if remaining <= 0:
                    break
                done, _pending = await asyncio.wait({waiter.future}, timeout=remaining)
                if not done:
                    break
                woken = waiter.rearm()
                for key in woken:
                    if key in index_of:
                        ready = self._read_again(requests, results, index_of[key], max_bytes, isolation_level, params)
                if ready >= min_bytes or any(_answer_now(results[index_of[k]]) for k in woken if k in index_of):
                    break
                for key in woken:  # a partition forgets its waiters when it wakes them
                    woken_partition = self.partitions.get(key)
                    if woken_partition is not None:
                        woken_partition.add_waiter(waiter)
        finally:
            for partition in watched:
                partition.remove_waiter(waiter)
        return results

    def _read_again(self, requests: list[FetchRequestPartition], results: list[FetchResult], i: int,
                    max_bytes: int, isolation_level: int, params: FetchParams) -> int:
        """Re-read partition ``i`` of a delayed fetch in place; returns the bytes now ready."""
        others = sum(r.records.length for j, r in enumerate(results) if j != i and r.records is not None)
        remaining = max(0, max_bytes - others)
        if params.is_from_follower:
            result = self._read_for_follower(requests[i], remaining, params, others == 0, False,
                                             self.clock.wall_ms())
        else:
            result = self._read_one(requests[i], remaining, isolation_level, params, min_one_batch=others == 0)
        results[i] = result
        return others + (result.records.length if result.records is not None else 0)

    def _read_all(
        self, requests: list[FetchRequestPartition], max_bytes: int, isolation_level: int,
        params: FetchParams, update_fetch_state: bool = False,
    ) -> tuple[list[FetchResult], int]:
        results: list[FetchResult] = []
        remaining = max_bytes
        total = 0
        now_ms = self.clock.wall_ms()
        for request in requests:
            if params.is_from_follower:
                result = self._read_for_follower(request, remaining, params, total == 0, update_fetch_state, now_ms)
            else:
                result = self._read_one(request, remaining, isolation_level, params, min_one_batch=total == 0)
            if result.records is not None:
                total += result.records.length
                remaining = max(0, remaining - result.records.length)
            results.append(result)
        return results, total

    def _read_one(
        self, request: FetchRequestPartition, remaining: int, isolation_level: int, params: FetchParams,
        min_one_batch: bool,
    ) -> FetchResult:
        try:
            partition = self.get_partition(request.topic, request.partition)
        except KafkaError as exc:
            return FetchResult(exc.code)
        result = FetchResult(
            high_watermark=partition.high_watermark,
            last_stable_offset=partition.last_stable_offset,
            log_start_offset=partition.log_start_offset,
        )
        result.error = partition.leader_epoch_error(request.current_leader_epoch)
        if result.error:
            return result
        if not partition.is_leader and params.client_rack is None:
            result.error = ErrorCode.not_leader_or_follower
            return result
        if partition.is_leader and params.client_rack and self.settings.replica_selector_class:
            preferred = self._preferred_read_replica(partition, request.fetch_offset, params.client_rack)
            if preferred != self.broker_id:
                result.preferred_read_replica = preferred
                return result
        bound = partition.last_stable_offset if isolation_level == READ_COMMITTED else partition.high_watermark
        limit = min(request.max_bytes, remaining)
        try:
            result.records = partition.read(request.fetch_offset, limit, bound, min_one_batch)
        except KafkaError as exc:
            result.error = exc.code
        except OSError as exc:
            partition.log.health.read_failed(partition.log.log_dir, f"read of {partition.log.topic}-{partition.index}",
                                             exc)
            result.error = ErrorCode.kafka_storage_error
            return result
        if result.records is not None and isolation_level == READ_COMMITTED:
            result.aborted_transactions = partition.log.collect_aborted_txns(request.fetch_offset, bound)
        return result

    def _preferred_read_replica(self, partition: Partition, fetch_offset: int, client_rack: str) -> int:
        """Kafka's RackAwareReplicaSelector: the leader if it is in the consumer's rack, else the
        most caught-up replica there that holds ``fetch_offset``, else the leader."""
        assert self.links is not None
        rack_of = self.links.rack
        if rack_of(self.broker_id) == client_rack:
            return self.broker_id
        candidates = [
            (state.log_end_offset, replica) for replica, state in partition.remote_replicas.items()
            if rack_of(replica) == client_rack and state.log_start_offset <= fetch_offset <= state.log_end_offset
        ]
        return max(candidates)[1] if candidates else self.broker_id

    def _read_for_follower(self, request: FetchRequestPartition, remaining: int, params: FetchParams,
                           min_one_batch: bool, update_fetch_state: bool, now_ms: int) -> FetchResult:
        """A follower reads up to the log end offset; a last fetched epoch the leader's epoch
        cache disagrees with is answered with the DivergingEpoch to truncate to (KIP-595)."""
        try:
            partition = self.get_partition(request.topic, request.partition)
        except KafkaError as exc:
            return FetchResult(exc.code)
        result = FetchResult(log_start_offset=partition.log_start_offset)
        error = partition.leader_epoch_error(request.current_leader_epoch)
        if error == ErrorCode.none and not partition.is_leader:
            error = ErrorCode.not_leader_or_follower
        if error != ErrorCode.none:
            result.error = error
            return result
        log_end = partition.log_end_offset
        if request.last_fetched_epoch >= 0:
            epoch, end_offset = partition.log.leader_epoch_cache.end_offset_for(request.last_fetched_epoch, log_end)
            if epoch < request.last_fetched_epoch or end_offset < request.fetch_offset:
                result.diverging_epoch = (epoch, end_offset)
                result.high_watermark = partition.high_watermark
                result.last_stable_offset = partition.last_stable_offset
                return result
        try:
            result.records = partition.read(request.fetch_offset, min(request.max_bytes, remaining), log_end,
                                            min_one_batch)
            if update_fetch_state:
                partition.update_follower_fetch_state(params.replica_id, request.fetch_offset,
                                                      request.log_start_offset, now_ms, log_end, params.replica_epoch)
        except KafkaError as exc:
            result.error = exc.code
            result.records = None
        except OSError as exc:
            partition.log.health.read_failed(partition.log.log_dir, f"read of {partition.log.topic}-{partition.index}",
                                             exc)
            result.error = ErrorCode.kafka_storage_error
            result.records = None
        result.high_watermark = partition.high_watermark
        result.last_stable_offset = partition.last_stable_offset
        # A follower learns the high watermark only from fetch answers: one parked without new
        # data would leave it up to replica.fetch.wait.max.ms behind (its consumers, KIP-392,
        # and its own start as leader would wait on it), so a moved high watermark is answered
        # at once — the idea of KIP-1166, with the leader remembering what it last sent.
        replica = partition.remote_replicas.get(params.replica_id)
        if replica is not None:
            result.high_watermark_moved = result.high_watermark > replica.high_watermark_sent
            replica.high_watermark_sent = result.high_watermark
        return result


def _answer_now(result: FetchResult) -> bool:
    """A delayed fetch does not wait for data when a partition has an error, a divergence, a
    preferred read replica or (to a follower) a high watermark it does not know yet to report."""
    return bool(result.error or result.diverging_epoch or result.preferred_read_replica >= 0
                or result.high_watermark_moved)


def _id_text(topic_id: uuid.UUID) -> str:
    """Kafka's text form of a topic id: URL-safe base64 without padding."""
    return base64.urlsafe_b64encode(topic_id.bytes).rstrip(b"=").decode()
