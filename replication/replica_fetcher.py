"""ReplicaFetcherManager: followers copy their leaders' logs, one fetcher task per leader broker.

Each ``ReplicaFetcher`` sends Fetch v15 (ReplicaState with this broker's id and epoch, topic
ids, the follower's log end offset and the epoch of its last fetched batch) to one leader and
appends what comes back with ``append_as_follower``, byte for byte. The follower's high
watermark is the leader's, capped at its own log end offset; its log start offset follows the
leader's. A DivergingEpoch answer truncates the follower's log to where it last agreed with
the leader (Kafka's truncation rule, KIP-320/KIP-595) and fetching continues from there. A
partition error (NOT_LEADER_OR_FOLLOWER, FENCED_LEADER_EPOCH, UNKNOWN_LEADER_EPOCH, ...) or a
failed link backs that partition (or the whole fetcher) off replica.fetch.backoff.ms; the
broker's metadata updates move partitions between fetchers. Partitions may be added and
removed while a request is in flight: answers for a partition that left, or whose leader
epoch or fetch position changed meanwhile, are dropped.
Fetches go through a fetch session (KIP-227, ``FetchSessionHandler``): after the first, full fetch, each names only
the partitions whose position changed and forgets those no longer fetched (one backing off is
forgotten, and named again when it comes back); a session error or a failed request falls back
to a full fetch. With ``ReplicationSettings.replica_fetch_sessions`` off, every fetch is full and
sessionless, as before KIP-227.
"""

from __future__ import annotations

import asyncio
import datetime
import logging
import uuid

from kbroker.protocol.errors import ErrorCode, KafkaError
from kbroker.protocol.records import batch_size_at
from kbroker.storage.clock import SYSTEM_CLOCK, Clock
from kio.schema.fetch.v15 import request as fetch_request
from kio.schema.fetch.v15 import response as fetch_response
from kio.schema.types import BrokerId
from kio.static.primitive import i8, i32, i32Timedelta, i64

from .fetch_session_handler import FetchSessionHandler, PartitionAsk
from .inter_broker_client import InterBrokerClient
from .partition import Partition
from .replication_settings import ClusterLinks, ReplicationSettings
from .stage_trace import DEBUG, TRACE, stage

log = logging.getLogger(__name__)

FETCH_KEY = 1
FETCH_VERSION = 15
UNDEFINED = -1
# What one Fetch asked per partition: (partition, its leader epoch, its fetch offset) when sent.
SentFetch = dict[tuple[str, int], tuple[Partition, int, int]]
_SESSION_ERRORS = frozenset({
    ErrorCode.fetch_session_id_not_found, ErrorCode.invalid_fetch_session_epoch, ErrorCode.fetch_session_topic_id_error,
})
_RETRY_ERRORS = frozenset({
    ErrorCode.not_leader_or_follower, ErrorCode.fenced_leader_epoch, ErrorCode.unknown_leader_epoch,
    ErrorCode.unknown_topic_or_partition, ErrorCode.unknown_topic_id,
})


def whole_batches(records: bytes) -> memoryview:
    """The prefix of a fetched record set made of complete batches (the leader may cut the
    last one at the byte limit, KIP-74)."""
    pos = 0
    while True:
        size = batch_size_at(records, pos)
        if size is None or pos + size > len(records):
            return memoryview(records)[:pos]
        pos += size


def truncation_offset(partition: Partition, diverging_epoch: int, diverging_end_offset: int) -> int:
    """Where a follower truncates after the leader answered DivergingEpoch(epoch, end offset).

    Kafka's rule: if the follower knows that epoch, it keeps what both agree on (the smaller
    end offset); if it does not, it truncates to the end of its largest earlier epoch and the
    next fetch (with that epoch as last fetched) asks again.
    """
    log_end = partition.log_end_offset
    if diverging_end_offset < 0:
        return min(partition.high_watermark, log_end)
    cache = partition.log.leader_epoch_cache
    follower_epoch, follower_end = cache.end_offset_for(diverging_epoch, log_end)
    if follower_epoch == UNDEFINED:
        return min(diverging_end_offset, log_end)
    if follower_epoch != diverging_epoch:
        return min(follower_end, log_end)
    return min(follower_end, diverging_end_offset, log_end)


class ReplicaFetcher:
    """Fetches every partition this broker follows from one leader broker."""

    def __init__(self, broker_id: int, leader_id: int, links: ClusterLinks, settings: ReplicationSettings,
                 clock: Clock = SYSTEM_CLOCK) -> None:
        self.clock = clock
        self.broker_id = broker_id
        self.leader_id = leader_id
        self.links = links
        self.settings = settings
        self.partitions: dict[tuple[str, int], Partition] = {}
        self._delayed_until: dict[tuple[str, int], float] = {}
        self._wakeup = asyncio.Event()
        self._client: InterBrokerClient | None = None
        self._task: asyncio.Task[None] | None = None
        self._stopped = False
        self.session = FetchSessionHandler(sessionless=not settings.replica_fetch_sessions)

    def __repr__(self) -> str:
        return f"ReplicaFetcher(broker {self.broker_id} <- leader {self.leader_id})"

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run())

    def add_partition(self, partition: Partition) -> None:
        key = (partition.topic, partition.index)
        self.partitions[key] = partition
        self._delayed_until.pop(key, None)
        self._wakeup.set()

    def remove_partition(self, topic: str, index: int) -> None:
        self.partitions.pop((topic, index), None)
        self._delayed_until.pop((topic, index), None)

    async def stop(self) -> None:
        # The flag as well as the cancel: asyncio.wait_for (3.11) can swallow a cancellation
        # that races with the connection attempt failing.
        self._stopped = True
        self._wakeup.set()
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            try:
                await task
            except asyncio.CancelledError:
                pass
        if self._client is not None:
            self._client.close()
            self._client = None

    # --- the fetch loop -------------------------------------------------------------------

    async def _run(self) -> None:
        backoff_s = self.settings.replica_fetch_backoff_ms / 1000
        while not self._stopped:
            prepared = self.next_request()
            if prepared is None:
                await self._idle()
                continue
            client = self._connect()
            if client is None:
                log.info("%r: leader %d has no known endpoint; retrying", self, self.leader_id)
                await asyncio.sleep(backoff_s)
                continue
            sent, request = prepared
            if TRACE.isEnabledFor(DEBUG):
                stage("fetch_sent", node=self.broker_id, leader=self.leader_id, partitions=len(sent))
            try:
                response: fetch_response.FetchResponse = await client.request(
                    FETCH_KEY, FETCH_VERSION, request, timeout_s=self.settings.replica_socket_timeout_ms / 1000,
                )
                if TRACE.isEnabledFor(DEBUG):
                    stage("fetch_answered", node=self.broker_id, leader=self.leader_id)
            except (ConnectionError, TimeoutError) as exc:
                # A leader that stopped answering (replica.socket.timeout.ms) is a failed link like
                # a reset one: back off and fetch again, never end the loop (the partitions would
                # stay out of the ISR for good).
                log.info("%r: fetch failed: %s; backing off %d ms", self, exc, self.settings.replica_fetch_backoff_ms)
                self.session.handle_error()
                await asyncio.sleep(backoff_s)
                continue
            self.handle_response(sent, response)

    # --- the protocol logic, without I/O (the loop above sends; a simulation may deliver) ----

    def next_request(self) -> tuple[SentFetch, fetch_request.FetchRequest] | None:
        """The Fetch for every partition not backing off, with what each was sent at (leader
        epoch, fetch offset) to match the answer against; None when there is nothing to fetch."""
        ready = self._ready_partitions()
        if not ready:
            return None
        sent = {key: (p, p.leader_epoch, p.log_end_offset) for key, p in ready.items()}
        return sent, self._build_request(sent)

    def handle_response(self, sent: SentFetch, response: fetch_response.FetchResponse) -> None:
        """Apply the leader's answer to the Fetch ``next_request`` built as ``sent``."""
        if not self.session.handle_response(response.error_code, response.session_id):
            log.info("%r: fetch answered %s", self, response.error_code.name)
            if response.error_code not in _SESSION_ERRORS:  # those are retried at once, as a full fetch
                self._delay(list(sent))
            return
        self._process(sent, response)

    def _ready_partitions(self) -> dict[tuple[str, int], Partition]:
        now = self.clock.monotonic()
        return {k: p for k, p in self.partitions.items() if self._delayed_until.get(k, 0.0) <= now}

    async def _idle(self) -> None:
        """Nothing to fetch now: wait for a partition to be added or a backoff to end."""
        self._wakeup.clear()
        now = self.clock.monotonic()
        waits = [until - now for until in self._delayed_until.values() if until > now]
        timeout = min(waits) if waits else None
        try:
            await asyncio.wait_for(self._wakeup.wait(), timeout)
        except TimeoutError:
            pass

    def _connect(self) -> InterBrokerClient | None:
        endpoint = self.links.endpoint(self.leader_id)
        if endpoint is None:
            return None
        host, port = endpoint
        if self._client is None or (self._client.host, self._client.port) != (host, port):
            if self._client is not None:
                self._client.close()
            self._client = InterBrokerClient(host, port, self.links.source_host, f"broker-{self.broker_id}-fetcher",
                                             self.links.security)
        return self._client

    def _build_request(self, sent: SentFetch) -> fetch_request.FetchRequest:
        m = fetch_request
        max_bytes = self.settings.replica_fetch_max_bytes
        wanted: dict[tuple[str, int], tuple[uuid.UUID, PartitionAsk]] = {
            key: (partition.topic_id, (fetch_offset, partition.log_start_offset, leader_epoch,
                                       partition.log.leader_epoch_cache.latest_epoch, max_bytes))
            for key, (partition, leader_epoch, fetch_offset) in sent.items()}
        session = self.session.build(wanted)
        by_topic: dict[uuid.UUID, list[fetch_request.FetchPartition]] = {}
        for key in session.send:
            topic_id, (fetch_offset, log_start_offset, leader_epoch, last_fetched_epoch, _max) = wanted[key]
            by_topic.setdefault(topic_id, []).append(m.FetchPartition(
                partition=i32(key[1]),
                current_leader_epoch=i32(leader_epoch),
                fetch_offset=i64(fetch_offset),
                last_fetched_epoch=i32(last_fetched_epoch),
                log_start_offset=i64(log_start_offset),
                partition_max_bytes=i32(max_bytes),
            ))
        forgotten: dict[uuid.UUID, list[int]] = {}
        for topic_id, index in session.forget:
            forgotten.setdefault(topic_id, []).append(index)
        if log.isEnabledFor(logging.DEBUG):
            log.debug("%r: %s fetch, session %d epoch %d: %d of %d partitions named, %d forgotten", self,
                      "full" if self.session.is_full else "incremental", session.session_id, session.epoch,
                      len(session.send), len(wanted), len(session.forget))
        return m.FetchRequest(
            cluster_id=None,
            replica_state=m.ReplicaState(replica_id=BrokerId(self.broker_id),
                                         replica_epoch=i64(self.links.broker_epoch())),
            max_wait=i32Timedelta.parse(datetime.timedelta(milliseconds=self.settings.replica_fetch_wait_max_ms)),
            min_bytes=i32(self.settings.replica_fetch_min_bytes),
            max_bytes=i32(self.settings.replica_fetch_response_max_bytes),
            isolation_level=i8(0),
            session_id=i32(session.session_id),
            session_epoch=i32(session.epoch),
            topics=tuple(m.FetchTopic(topic_id=t, partitions=tuple(ps)) for t, ps in by_topic.items()),
            forgotten_topics_data=tuple(m.ForgottenTopic(topic_id=t, partitions=tuple(i32(i) for i in ps))
                                        for t, ps in forgotten.items()),
            rack_id="",
        )

    def _process(self, sent: SentFetch, response: fetch_response.FetchResponse) -> None:
        # A null topic id in the answer matches no partition sent.
        by_id: dict[tuple[uuid.UUID | None, int], tuple[str, int]] = {
            (p.topic_id, p.index): key for key, (p, _e, _o) in sent.items()}
        failed: list[tuple[str, int]] = []
        now_ms = self.clock.wall_ms()
        for topic in response.responses:
            for data in topic.partitions:
                key = by_id.get((topic.topic_id, data.partition_index))
                if key is None:
                    continue
                partition, leader_epoch, fetch_offset = sent[key]
                if (self.partitions.get(key) is not partition or partition.leader_epoch != leader_epoch
                        or partition.log_end_offset != fetch_offset):
                    continue  # moved, re-led or truncated while the request was out
                try:
                    if not self._process_partition(partition, fetch_offset, data, now_ms):
                        failed.append(key)
                except KafkaError as exc:
                    log.warning("%r: %s-%d: %s", self, partition.topic, partition.index, exc.message or exc.code.name)
                    failed.append(key)
                except OSError as exc:
                    # LogDirHealth logs the episode once; per fetch this would flood.
                    log.debug("%r: %s-%d: append failed: %s", self, partition.topic, partition.index, exc)
                    failed.append(key)
        self._delay(failed)

    def _process_partition(self, partition: Partition, fetch_offset: int, data: fetch_response.PartitionData,
                           now_ms: int) -> bool:
        """Apply one partition's answer; False if the partition should back off."""
        error = data.error_code
        if error == ErrorCode.offset_out_of_range and fetch_offset < data.log_start_offset:
            # The leader deleted what we would fetch next: start over at its log start.
            log.info("%s-%d: fetch offset %d below the leader's log start %d: truncating fully",
                     partition.topic, partition.index, fetch_offset, data.log_start_offset)
            partition.log.truncate_fully_and_start_at(data.log_start_offset)
            partition.after_truncation()
            return True
        if error != ErrorCode.none:
            if error not in _RETRY_ERRORS:
                log.warning("%s-%d: fetch from leader %d answered %s",
                            partition.topic, partition.index, self.leader_id, error.name)
            return False
        diverging = data.diverging_epoch
        if diverging.epoch >= 0 or diverging.end_offset >= 0:
            target = truncation_offset(partition, diverging.epoch, diverging.end_offset)
            log.info("%s-%d: diverged from leader %d at epoch %d end offset %d: truncating to %d",
                     partition.topic, partition.index, self.leader_id, diverging.epoch, diverging.end_offset, target)
            partition.truncate_to(target)
            return True
        records = data.records
        if records:
            batches = whole_batches(bytes(records))
            if len(batches):
                info = partition.append_as_follower(batches, now_ms)
                if TRACE.isEnabledFor(DEBUG):
                    stage("follower_append", tp=f"{partition.topic}-{partition.index}", node=self.broker_id,
                          first=info.first_offset, last=info.last_offset)
        partition.update_follower_high_watermark(data.high_watermark, data.log_start_offset)
        return True

    def _delay(self, keys: list[tuple[str, int]]) -> None:
        until = self.clock.monotonic() + self.settings.replica_fetch_backoff_ms / 1000
        for key in keys:
            if key in self.partitions:
                self._delayed_until[key] = until


class ReplicaFetcherManager:
    """Which fetcher (by leader broker) copies which partition; idle fetchers are stopped."""

    def __init__(self, broker_id: int, links: ClusterLinks, settings: ReplicationSettings,
                 clock: Clock = SYSTEM_CLOCK, run_fetch_loops: bool = True) -> None:
        self.clock = clock
        self.broker_id = broker_id
        self.links = links
        self.settings = settings
        # False: fetchers send nothing themselves; the caller drives each one through
        # next_request / handle_response (the deterministic replication simulation does).
        self.run_fetch_loops = run_fetch_loops
        self.fetchers: dict[int, ReplicaFetcher] = {}
        self._leader_of: dict[tuple[str, int], int] = {}
        self._stopping: set[asyncio.Task[None]] = set()

    def add_partition(self, partition: Partition, leader_id: int) -> None:
        """Follow ``partition`` from ``leader_id`` (moving it off any other fetcher)."""
        key = (partition.topic, partition.index)
        if self._leader_of.get(key) != leader_id:
            self.remove_partition(*key)
        fetcher = self.fetchers.get(leader_id)
        if fetcher is None:
            fetcher = ReplicaFetcher(self.broker_id, leader_id, self.links, self.settings, self.clock)
            self.fetchers[leader_id] = fetcher
            if self.run_fetch_loops:
                fetcher.start()
        fetcher.add_partition(partition)
        self._leader_of[key] = leader_id

    def remove_partition(self, topic: str, index: int) -> None:
        leader_id = self._leader_of.pop((topic, index), None)
        if leader_id is None:
            return
        fetcher = self.fetchers.get(leader_id)
        if fetcher is None:
            return
        fetcher.remove_partition(topic, index)
        if not fetcher.partitions:
            del self.fetchers[leader_id]
            task = asyncio.get_running_loop().create_task(fetcher.stop())
            self._stopping.add(task)
            task.add_done_callback(self._stopping.discard)

    def leader_of(self, topic: str, index: int) -> int | None:
        return self._leader_of.get((topic, index))

    async def stop(self) -> None:
        fetchers, self.fetchers = list(self.fetchers.values()), {}
        self._leader_of.clear()
        for fetcher in fetchers:
            await fetcher.stop()
        if self._stopping:
            await asyncio.gather(*self._stopping, return_exceptions=True)
