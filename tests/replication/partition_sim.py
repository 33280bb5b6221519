"""Deterministic simulation of partition replication (the data plane) under one seed.

Three brokers, each a real ``ReplicaManager`` over real ``PartitionLog``s in a temp dir, and one
real ``QuorumController`` (its metadata log on disk; the controller quorum itself is simulated in
raft_sim.py) replicate one partition (replication factor 3) on a virtual clock. Everything that
crosses the network is a message this module delivers after a random delay, or loses, or holds
back behind a network partition: followers' Fetch requests and their answers (the fetchers are
driven through ``ReplicaFetcher.next_request`` / ``handle_response``, the sans-IO half of the
fetch loop), AlterPartition, broker registration and heartbeats, and the metadata each broker
replays. Producers write acks=all (and some acks=1) batches to whichever broker believes it leads.

Durability model: kbroker acknowledges after ``os.write``, so a *process* crash loses nothing
written; a crashed broker loses its memory (partition state, fetch positions, pending acks) and
restarts from its log dir (recovery, checkpointed high watermark, no clean-shutdown marker:
previous broker epoch -1, so its ELR claims go). Some stops are controlled shutdowns instead
(the controller moves leadership away, the logs close cleanly with the broker epoch, the ELR
claims stay). Power loss of unflushed data is not simulated, and unclean leader election is never
enabled here (the scripted KIP cases in test_kip101_kip279.py enable it where they say so).
A restarted broker replays metadata before its new registration has fenced the old one, as
kbroker's broker does, so it may take up its old leadership at the old epoch with its checkpointed
high watermark: the high watermark is checked per broker *process* and leader epoch.

Checked after every step (``Violation`` names the seed and the trace that led there):

* committed prefix: every replica's log below its high watermark is one same sequence of batches
  (the first replica to commit a batch fixes it), and every acks=all acknowledgement is in it;
* no truncation removes a committed batch from a replica's log;
* leader completeness: the leader the controller currently names holds every committed batch;
* the high watermark never goes backwards on a leader within its leader epoch;
* log matching: never two different batches at one (leader epoch, base offset), in any log;

and once the faults stop, within a bounded virtual time: one leader, ISR = all replicas, every
log identical with its high watermark at its end, every acknowledged batch there.

``python -m tests.replication.partition_sim --seeds 1000 --start 0`` runs many seeds; a failing
seed prints the tail of its trace (``--start SEED --seeds 1`` replays it).
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import heapq
import logging
import os
import random
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from kbroker.protocol.errors import ErrorCode, KafkaError
from kbroker.protocol.record_builder import build_batch
from kbroker.protocol.records import HEADER_SIZE, read_header
from kbroker.replication.partition import Partition
from kbroker.replication.quorum.partition_registration import NO_LEADER, PartitionRegistration
from kbroker.replication.quorum.quorum_controller import ControllerSettings, QuorumController
from kbroker.replication.quorum.raft_log import PartitionRaftLog
from kbroker.replication.replica_fetcher import ReplicaFetcher, SentFetch
from kbroker.replication.replica_manager import FetchParams, FetchRequestPartition, ProduceResult, ReplicaManager
from kbroker.replication.replication_settings import ClusterLinks, ReplicationSettings
from kbroker.storage.log import PartitionLog
from kbroker.storage.log_config import LogConfig
from kbroker.storage.log_manager import LogManager
from kio.schema.fetch.v15 import request as fetch_request
from kio.schema.fetch.v15 import response as fetch_response

from tests.support.clock import ManualClock

T = TypeVar("T")
TOPIC = "sim"
BROKERS = (1, 2, 3)
CONTROLLER = 0
TICK_MS = 10
FAULT_PHASE_MS = 3_000
CONVERGE_LIMIT_MS = 6_000
SESSION_MS = 500
DISCONNECT_FENCE_MS = 150
HEARTBEAT_MS = 60
RPC_TIMEOUT_MS = 200  # a request not answered by then failed (its connection is gone)
CHECKPOINT_MS = 200  # replica.high.watermark.checkpoint.interval.ms, scaled down
PRODUCE_TIMEOUT_MS = 1_000
SIM_SETTINGS = ReplicationSettings(
    replica_lag_time_max_ms=300,
    replica_fetch_wait_max_ms=0,  # no long poll: a fetch is answered at once, the next one follows
    replica_fetch_backoff_ms=40,
    replica_socket_timeout_ms=RPC_TIMEOUT_MS,
)
BASE_WALL_MS = 1_700_000_000_000
# Logs live in memory where there is a tmpfs: the checkpoints' fsyncs then cost nothing (on a disk
# they are most of the run time); the product code is the same either way.
SCRATCH = "/dev/shm" if os.path.isdir("/dev/shm") else None


class Violation(AssertionError):
    """A broken safety or liveness property; ``report()`` names the seed and the trace that led there."""

    def __init__(self, seed: int, message: str, trace: list[str]) -> None:
        super().__init__(f"seed {seed}: {message}")
        self.seed = seed
        self.message = message
        self.trace = trace

    def report(self) -> str:
        return "\n".join([f"VIOLATION seed {self.seed}: {self.message}", "last steps:", *self.trace])


@dataclass(frozen=True, slots=True)
class Batch:
    """A batch as the checker identifies it: where it sits, who wrote it, which produce it carries."""

    base_offset: int
    last_offset: int
    leader_epoch: int
    produce_id: int  # the producer's unique base timestamp


@dataclass
class Mirror:
    """The checker's copy of one replica's log (re-read only from where it changed)."""

    batches: list[Batch] = field(default_factory=list)
    cut_at: int | None = None  # lowest offset truncated since the last check
    verified: int = 0  # how many of ``batches`` were checked against the committed prefix

    @property
    def end(self) -> int:
        return self.batches[-1].last_offset + 1 if self.batches else 0


class Broker:
    """One incarnation of a broker process: everything here dies with a crash but the log dir."""

    def __init__(self, sim: Simulation, broker_id: int, incarnation: int) -> None:
        self.sim = sim
        self.broker_id = broker_id
        self.incarnation = incarnation
        self.connection = f"b{broker_id}.{incarnation}"
        self.log_manager = LogManager([str(sim.dir / f"b{broker_id}")],
                                      lambda _topic: sim.log_config, clock=sim.clock)
        self.log_manager.startup()
        self.previous_broker_epoch = self.log_manager.clean_shutdown_broker_epoch
        self.replica_manager = ReplicaManager(self.log_manager, broker_id, sim.clock)
        self.replica_manager.configure_cluster(
            ClusterLinks(None, lambda _b: None, lambda: self.broker_epoch, self.alter_partition,
                         self.replica_eligible),
            SIM_SETTINGS, run_fetch_loops=False)
        self.broker_epoch = -1
        self.metadata_offset = -1
        self.brokers_view: dict[int, tuple[int, bool]] = {}  # broker id -> (epoch, fenced), as replayed
        self.register_due = 0
        self.heartbeat_due = 0
        self.metadata_due = 0
        self.checkpoint_due = sim.rng.randint(0, CHECKPOINT_MS)
        # leader id -> (the fetcher, what its request carried, when it times out)
        self.in_flight: dict[int, tuple[ReplicaFetcher, SentFetch, int]] = {}
        self.fetch_idle_until: dict[int, int] = {}  # leader id -> end of a link failure's backoff
        self.alters: set[asyncio.Future[PartitionRegistration]] = set()

    def replica_eligible(self, broker_id: int, broker_epoch: int) -> bool:
        known = self.brokers_view.get(broker_id)
        return known is not None and known[0] == broker_epoch and not known[1]

    async def alter_partition(self, topic: str, index: int, topic_id: uuid.UUID, leader_epoch: int,
                              partition_epoch: int, new_isr: list[int]) -> PartitionRegistration:
        future: asyncio.Future[PartitionRegistration] = asyncio.get_running_loop().create_future()
        self.alters.add(future)
        sim = self.sim
        epoch = self.broker_epoch

        def at_controller() -> None:
            try:
                answer: PartitionRegistration | KafkaError = sim.controller.alter_partition(
                    self.broker_id, epoch, topic_id, index, leader_epoch, partition_epoch, new_isr, sim.now)
            except KafkaError as exc:
                answer = exc
            sim.trace.append((sim.now, "alter", f"b{self.broker_id}", new_isr, f"le={leader_epoch}",
                              f"pe={partition_epoch}", answer if isinstance(answer, KafkaError) else "ok"))

            def back() -> None:
                if not future.done():
                    if isinstance(answer, KafkaError):
                        future.set_exception(answer)
                    else:
                        future.set_result(answer)
            sim.send(CONTROLLER, self.broker_id, back, self)

        sim.send(self.broker_id, CONTROLLER, at_controller)
        sim.timeouts.append((sim.now + RPC_TIMEOUT_MS, future))
        try:
            return await future
        finally:
            self.alters.discard(future)

    def partition(self) -> Partition | None:
        return self.replica_manager.partitions.get((TOPIC, 0))

    def crash(self) -> None:
        for future in self.alters:
            future.cancel()
        for plog in self.log_manager.logs.values():
            for segment in plog.segments:
                segment.close_file()  # the kernel closes a dead process's files; nothing is flushed


@dataclass(frozen=True, slots=True)
class Script:
    """A scripted run (test_kip101_kip279.py): no random faults or producers, the test's own replica
    list and settings; ``checked`` False leaves the per-step invariants to the test (a scenario
    that elects an unclean leader loses committed records by design)."""

    replicas: tuple[int, ...]
    min_isr: int = 1
    unclean_leader_election: bool = False
    checked: bool = True


class Simulation:
    """One seeded run; everything random comes from ``random.Random(seed)``."""

    def __init__(self, seed: int, directory: Path, script: Script | None = None) -> None:
        self.seed = seed
        self.rng = rng = random.Random(seed)
        self.dir = directory
        self.script = script
        self.broker_ids = script.replicas if script is not None else BROKERS
        self.clock = ManualClock(wall_ms=BASE_WALL_MS, monotonic=0.0)
        self.min_isr = rng.choice((1, 2, 2, 3)) if script is None else script.min_isr
        self.log_config = LogConfig(min_insync_replicas=self.min_isr)
        self.loss = rng.choice((0.0, 0.02, 0.1, 0.2))
        self.max_delay_ms = rng.choice((5, 20, 60))
        self.crash_rate = rng.choice((0.0, 0.003, 0.01, 0.02))
        self.partition_rate = rng.choice((0.0, 0.003, 0.01))
        self.crash_at_risk = rng.choice((0.0, 0.0, 0.1, 0.3))
        self.closed_seen = rng.choice((0.0, 0.5, 1.0))  # chance the controller sees a crash's reset
        self.shutdown_share = rng.choice((0.0, 0.3))  # of the brokers stopped, those stopped cleanly
        self.produce_rate = rng.choice((0.1, 0.3, 0.6))
        self.acks_all_share = rng.choice((0.7, 1.0))
        if script is not None:
            self.loss = self.crash_rate = self.partition_rate = self.crash_at_risk = self.produce_rate = 0.0
            self.shutdown_share = 0.0
            self.max_delay_ms = 5
            self.closed_seen = 1.0
        self.now = 0
        self.steps = 0
        self.faults = script is None
        self.blocked: set[tuple[int, int]] = set()  # failpoints: (source, destination) links that drop all
        self.sequence = 0
        self.produce_ids = 0
        self.queue: list[tuple[int, int, int, int, Callable[[], None], Broker | None]] = []
        self.timeouts: list[tuple[int, asyncio.Future[PartitionRegistration]]] = []
        self.trace: collections.deque[tuple] = collections.deque(maxlen=600)
        self.side: dict[int, int] = dict.fromkeys((CONTROLLER, *self.broker_ids), 0)
        self.heal_at: int | None = None
        self.incarnations = dict.fromkeys(self.broker_ids, 0)
        self.brokers: dict[int, Broker | None] = {}
        self.restart_at: dict[int, int] = {}
        self.produces: list[tuple[int, int, Broker, ProduceResult]] = []  # (id, deadline, leader, result)
        self.just_acked: list[int] = []
        self.just_elected: list[int] = []
        # checker state
        self.mirrors: dict[tuple[int, int], Mirror] = {}
        self.committed: dict[int, Batch] = {}
        self.committed_order: list[Batch] = []
        self.commit_epoch: list[int] = []
        self.acked: dict[int, int] = {}  # produce id -> base offset it was acknowledged at
        self.by_epoch_offset: dict[tuple[int, int], Batch] = {}
        self.leader_hw: dict[tuple[int, int, int], int] = {}
        self.leaders_seen: set[tuple[int, int]] = set()
        self.leader_verified: dict[tuple[int, int], int] = {}
        self.converged_after_ms = 0
        self.truncations = 0
        self.clean_stops = 0
        metadata_dir = directory / "controller" / "__cluster_metadata-0"
        metadata_dir.mkdir(parents=True)
        metadata_log = PartitionLog(str(metadata_dir), "__cluster_metadata", 0, LogConfig())
        metadata_log.load(clean_shutdown=False)
        raft_log = PartitionRaftLog(metadata_log)
        self.controller = QuorumController(
            metadata_log,
            ControllerSettings(node_id=100, session_timeout_ms=SESSION_MS, default_partitions=1,
                               default_replication_factor=3,
                               broker_default={"min.insync.replicas": str(self.min_isr)}.get,
                               disconnect_fence_ms=DISCONNECT_FENCE_MS),
            lambda payloads: raft_log.append(1, payloads))
        self.controller.activate(1, now_ms=0)
        self.controller.bootstrap("sim-cluster", [], now_ms=0)
        self.topic_id = uuid.UUID(int=0)

    # -- plumbing --------------------------------------------------------------------------------------

    def send(self, source: int, destination: int, deliver: Callable[[], None], to: Broker | None = None) -> None:
        """Queue ``deliver`` to run at ``destination`` after a random delay (or lose it); ``to`` is the
        broker incarnation it is meant for (an answer dies with the process that asked)."""
        if (self.rng.random() < self.loss or self.side[source] != self.side[destination]
                or (source, destination) in self.blocked):
            return
        self.sequence += 1
        heapq.heappush(self.queue, (self.now + self.rng.randint(1, self.max_delay_ms), self.sequence,
                                    source, destination, deliver, to))

    def _fail(self, message: str) -> None:
        raise Violation(self.seed, message, [self._format(event) for event in self.trace])

    @staticmethod
    def _format(event: tuple) -> str:
        now, kind, *rest = event
        return f"t={now:>6} {kind:<9} " + " ".join(str(part) for part in rest)

    def _live(self) -> list[Broker]:
        return [b for b in self.brokers.values() if b is not None]

    # -- setup -----------------------------------------------------------------------------------------

    async def setup(self) -> None:
        for broker_id in self.broker_ids:
            self._start(broker_id)
            broker = self.brokers[broker_id]
            assert broker is not None
            broker.broker_epoch = self.controller.register_broker(
                broker_id, f"{broker_id}.1", "sim", broker_id, None, 0, -1, connection=broker.connection)
            self.controller.heartbeat(broker_id, broker.broker_epoch, self.controller.image.offset,
                                      False, False, 0, broker.connection)
        replicas = list(self.broker_ids)
        configs = {}
        if self.script is None:
            self.rng.shuffle(replicas)  # the seed places the replicas (the controller's placer has its own random)
        elif self.script.unclean_leader_election:
            configs["unclean.leader.election.enable"] = "true"
        topic = self.controller.create_topic(TOPIC, -1, -1, {0: replicas}, configs, False, 0)
        self.topic_id = topic.topic_id

    def _start(self, broker_id: int) -> None:
        self.incarnations[broker_id] += 1
        self.brokers[broker_id] = Broker(self, broker_id, self.incarnations[broker_id])
        for key in [k for k in self.mirrors if k[0] == broker_id]:
            del self.mirrors[key]  # a new process: the checker reads its log afresh

    # -- one step --------------------------------------------------------------------------------------

    async def step(self) -> None:
        self.now += TICK_MS
        self.clock.advance(TICK_MS)
        self.steps += 1
        while self.queue and self.queue[0][0] <= self.now:
            _, _, source, destination, deliver, to = heapq.heappop(self.queue)
            if self.side[source] != self.side[destination] or (source, destination) in self.blocked:
                continue
            if destination != CONTROLLER and self.brokers[destination] is None:
                continue
            if to is not None and self.brokers[to.broker_id] is not to:
                continue
            deliver()
        await settle()
        for deadline, future in self.timeouts:
            if deadline <= self.now and not future.done():
                future.set_exception(ConnectionError("AlterPartition timed out"))
        self.timeouts = [(d, f) for d, f in self.timeouts if not f.done()]
        self.controller.fence_expired_sessions(self.now)
        for broker in self._live():
            self._broker_tick(broker)
        self._clients()
        await settle()
        self._check()
        if self.faults:
            self._inject_faults()

    def _broker_tick(self, broker: Broker) -> None:
        now = self.now
        if broker.broker_epoch < 0 and now >= broker.register_due:
            broker.register_due = now + RPC_TIMEOUT_MS
            self.send(broker.broker_id, CONTROLLER, lambda: self._register(broker))
        if broker.broker_epoch >= 0 and now >= broker.heartbeat_due:
            broker.heartbeat_due = now + HEARTBEAT_MS
            epoch, offset = broker.broker_epoch, broker.metadata_offset
            self.send(broker.broker_id, CONTROLLER, lambda: self._heartbeat(broker, epoch, offset))
        if now >= broker.metadata_due:
            broker.metadata_due = now + RPC_TIMEOUT_MS  # the answer brings it forward
            self.send(broker.broker_id, CONTROLLER, lambda: self._metadata(broker))
        if now >= broker.checkpoint_due:
            broker.checkpoint_due = now + CHECKPOINT_MS
            broker.log_manager.checkpoint_high_watermarks(broker.replica_manager.high_watermarks())
        if now % (SIM_SETTINGS.replica_lag_time_max_ms // 2) == 0:
            broker.replica_manager.shrink_isrs(self.clock.wall_ms())
        self._fetch(broker)

    def _register(self, broker: Broker) -> None:
        try:
            epoch = self.controller.register_broker(
                broker.broker_id, broker.connection, "sim", broker.broker_id, None, self.now,
                broker.previous_broker_epoch, connection=broker.connection)
        except KafkaError as exc:
            self.trace.append((self.now, "register", f"b{broker.broker_id}", exc.code.name))
            return
        self.trace.append((self.now, "register", f"b{broker.broker_id}", f"epoch={epoch}"))

        def answered() -> None:
            broker.broker_epoch = epoch
        self.send(CONTROLLER, broker.broker_id, answered, broker)

    def _heartbeat(self, broker: Broker, broker_epoch: int, metadata_offset: int) -> None:
        try:
            self.controller.heartbeat(broker.broker_id, broker_epoch, metadata_offset, False, False,
                                      self.now, broker.connection)
        except KafkaError as exc:
            if exc.code != ErrorCode.stale_broker_epoch:
                raise

            def stale() -> None:
                # As broker_lifecycle: registered again (a registration request a dead incarnation
                # of this broker left in flight may have replaced this one's).
                if broker.broker_epoch == broker_epoch:
                    self.trace.append((self.now, "stale", f"b{broker.broker_id}", f"epoch={broker_epoch}"))
                    broker.broker_epoch = -1
            self.send(CONTROLLER, broker.broker_id, stale, broker)

    def _metadata(self, broker: Broker) -> None:
        image = self.controller.image
        offset = image.offset
        registration = image.topics[TOPIC].partitions[0]
        view = {b.broker_id: (b.broker_epoch, b.fenced) for b in image.brokers.values()}

        def replay() -> None:
            broker.metadata_due = self.now + TICK_MS
            if offset <= broker.metadata_offset:
                return  # an older answer overtaken by a newer one
            broker.metadata_offset = offset
            broker.brokers_view = view
            partition = broker.partition()
            before = (partition.leader_id, partition.leader_epoch) if partition is not None else None
            broker.replica_manager.apply_partition(TOPIC, 0, self.topic_id, registration)
            partition = broker.partition()
            if partition is not None and (partition.leader_id, partition.leader_epoch) != before:
                self.trace.append((self.now, "role", f"b{broker.broker_id}", f"leader={partition.leader_id}",
                                   f"epoch={partition.leader_epoch}", f"isr={list(partition.isr)}",
                                   f"leo={partition.log_end_offset}", f"hw={partition.high_watermark}"))
                if partition.is_leader:
                    self.just_elected.append(broker.broker_id)
        self.send(CONTROLLER, broker.broker_id, replay, broker)

    # -- the replica fetchers, driven through their sans-IO half ----------------------------------------

    def _fetch(self, follower: Broker) -> None:
        manager = follower.replica_manager.fetcher_manager
        assert manager is not None
        for leader_id, (fetcher, _sent, deadline) in list(follower.in_flight.items()):
            if manager.fetchers.get(leader_id) is not fetcher:
                del follower.in_flight[leader_id]  # stopped: its answer will be dropped
            elif deadline <= self.now:
                del follower.in_flight[leader_id]  # the link failed: the loop backs off
                follower.fetch_idle_until[leader_id] = self.now + SIM_SETTINGS.replica_fetch_backoff_ms
        for leader_id, fetcher in manager.fetchers.items():
            if leader_id in follower.in_flight or follower.fetch_idle_until.get(leader_id, 0) > self.now:
                continue
            prepared = fetcher.next_request()
            if prepared is None:
                continue
            sent, request = prepared
            follower.in_flight[leader_id] = (fetcher, sent, self.now + RPC_TIMEOUT_MS)
            self.send(follower.broker_id, leader_id,
                      lambda f=fetcher, s=sent, r=request, lid=leader_id: self._serve_fetch(follower, lid, f, s, r))

    def _serve_fetch(self, follower: Broker, leader_id: int, fetcher: ReplicaFetcher, sent: SentFetch,
                     request: fetch_request.FetchRequest) -> None:
        leader = self.brokers[leader_id]
        assert leader is not None
        wanted = [
            FetchRequestPartition(TOPIC, p.partition, p.fetch_offset, p.partition_max_bytes, p.current_leader_epoch,
                                  p.last_fetched_epoch, p.log_start_offset)
            for t in request.topics if t.topic_id == self.topic_id for p in t.partitions
        ]
        params = FetchParams(request.replica_state.replica_id, request.replica_state.replica_epoch)
        coroutine = leader.replica_manager.fetch(wanted, 0, request.min_bytes, request.max_bytes, 0, params)
        results = run_at_once(coroutine)
        partitions = []
        for asked, result in zip(wanted, results, strict=True):
            records = b""
            if result.records is not None:
                records = result.records.segment.read_bytes(result.records.position, result.records.length)
            epoch, end_offset = result.diverging_epoch or (-1, -1)
            diverging = fetch_response.EpochEndOffset(epoch=epoch, end_offset=end_offset)
            partitions.append(fetch_response.PartitionData(
                partition_index=asked.partition, error_code=result.error, high_watermark=result.high_watermark,
                last_stable_offset=result.last_stable_offset, log_start_offset=result.log_start_offset,
                diverging_epoch=diverging, aborted_transactions=None, records=records))
        response = fetch_response.FetchResponse(
            throttle_time=0, error_code=ErrorCode.none,
            responses=(fetch_response.FetchableTopicResponse(topic_id=self.topic_id, partitions=tuple(partitions)),))

        def answered() -> None:
            current = follower.in_flight.get(leader_id)
            if current is None or current[0] is not fetcher:
                return  # timed out or the fetcher was replaced meanwhile
            del follower.in_flight[leader_id]
            fetcher.handle_response(sent, response)
        self.send(leader_id, follower.broker_id, answered, follower)

    # -- producers -------------------------------------------------------------------------------------

    def _clients(self) -> None:
        for produce_id, deadline, leader, result in list(self.produces):
            future = result.pending
            assert future is not None
            if future.done():
                error = future.result()
                if error == ErrorCode.none:
                    self.acked[produce_id] = result.base_offset
                    self.just_acked.append(leader.broker_id)
                    self.trace.append((self.now, "acked", f"b{leader.broker_id}", f"p{produce_id}",
                                       f"offset={result.base_offset}"))
            elif deadline <= self.now or self.brokers[leader.broker_id] is not leader:
                future.cancel()  # REQUEST_TIMED_OUT, or the process died: never acknowledged
            else:
                continue
            self.produces.remove((produce_id, deadline, leader, result))
        if not self.faults or self.rng.random() >= self.produce_rate:
            return
        leaders = [b for b in self._live() if (p := b.partition()) is not None and p.is_leader]
        if leaders:
            acks = -1 if self.rng.random() < self.acks_all_share else 1
            self.produce(self.rng.choice(leaders).broker_id, acks, self.rng.randint(1, 3))

    def produce(self, broker_id: int, acks: int, count: int = 1) -> tuple[int, ProduceResult]:
        """A producer sends one batch of ``count`` records to ``broker_id``; returns its produce id
        (acks=all acknowledgements land in ``acked``) and the broker's immediate answer."""
        broker = self.brokers[broker_id]
        assert broker is not None
        self.produce_ids += 1
        produce_id = self.produce_ids
        batch = build_batch([(b"k", b"v%d" % i) for i in range(count)], base_timestamp=BASE_WALL_MS + produce_id)
        result = broker.replica_manager.append_records(TOPIC, 0, memoryview(bytearray(batch)), acks)
        self.trace.append((self.now, "produce", f"b{broker_id}", f"p{produce_id}", f"acks={acks}",
                           result.error.name, f"offset={result.base_offset}"))
        if acks == -1 and result.error == ErrorCode.none:
            if result.pending is None:
                self.acked[produce_id] = result.base_offset
                self.just_acked.append(broker_id)
            else:
                self.produces.append((produce_id, self.now + PRODUCE_TIMEOUT_MS, broker, result))
        return produce_id, result

    # -- faults ----------------------------------------------------------------------------------------

    def _inject_faults(self) -> None:
        rng = self.rng
        for broker_id, when in list(self.restart_at.items()):
            if when <= self.now:
                self.restart(broker_id)
        live = [b.broker_id for b in self._live()]
        if live and rng.random() < self.crash_rate:
            if rng.random() < self.shutdown_share:
                self.shut_down(rng.choice(live))
            else:
                self.crash(rng.choice(live))
        for broker_id in self.just_elected + self.just_acked:
            if self.brokers[broker_id] is not None and rng.random() < self.crash_at_risk:
                self.crash(broker_id)
        self.just_elected = []
        self.just_acked = []
        nodes = [CONTROLLER, *self.broker_ids]
        if self.heal_at is None and rng.random() < self.partition_rate:
            shuffled = list(nodes)
            rng.shuffle(shuffled)
            cut = rng.randint(1, len(shuffled) - 1)
            self.side = {node: int(position >= cut) for position, node in enumerate(shuffled)}
            self.heal_at = self.now + rng.randint(100, 1500)
            self.trace.append((self.now, "partition", sorted(shuffled[:cut]), sorted(shuffled[cut:])))
        elif self.heal_at is not None and self.heal_at <= self.now:
            self._heal()

    def shut_down(self, broker_id: int) -> None:
        """SIGTERM: a controlled shutdown (the controller moves leadership and ISR membership away,
        KIP-966 keeps the broker's ELR claims), then the logs close cleanly with the broker epoch."""
        broker = self.brokers[broker_id]
        assert broker is not None
        epoch, offset = broker.broker_epoch, broker.metadata_offset
        if epoch < 0:
            return  # not registered yet: nothing to hand over
        self.trace.append((self.now, "shutdown", f"b{broker_id}"))

        def at_controller() -> None:
            try:
                *_, should_shut_down = self.controller.heartbeat(broker_id, epoch, offset, False, True, self.now,
                                                                 broker.connection)
            except KafkaError:
                return

            def answered() -> None:
                if should_shut_down and self.brokers[broker_id] is broker:
                    self._stop_cleanly(broker)
            self.send(CONTROLLER, broker_id, answered, broker)
        self.send(broker_id, CONTROLLER, at_controller)

    def _stop_cleanly(self, broker: Broker) -> None:
        for future in broker.alters:
            future.cancel()
        broker.log_manager.shutdown(broker.broker_epoch, broker.replica_manager.high_watermarks())
        self.brokers[broker.broker_id] = None
        self.clean_stops += 1
        self.restart_at[broker.broker_id] = self.now + self.rng.randint(50, 1500)
        self.trace.append((self.now, "stopped", f"b{broker.broker_id}", f"epoch={broker.broker_epoch}"))

    def crash(self, broker_id: int) -> None:
        broker = self.brokers[broker_id]
        assert broker is not None
        broker.crash()
        self.brokers[broker_id] = None
        if self.rng.random() < self.closed_seen:
            # Its kernel resets the heartbeat connection: the controller reads that (reset-based fencing).
            connection = broker.connection
            self.send(broker_id, CONTROLLER, lambda: self.controller.connection_closed(connection, self.now))
        self.restart_at[broker_id] = self.now + self.rng.randint(50, 1500)
        self.trace.append((self.now, "crash", f"b{broker_id}"))

    def restart(self, broker_id: int) -> None:
        del self.restart_at[broker_id]
        self._start(broker_id)
        broker = self.brokers[broker_id]
        assert broker is not None
        partition_log = broker.log_manager.get(TOPIC, 0)
        end = partition_log.log_end_offset if partition_log is not None else 0
        self.trace.append((self.now, "restart", f"b{broker_id}", f"leo={end}"))

    def _heal(self) -> None:
        self.side = dict.fromkeys(self.side, 0)
        self.heal_at = None
        self.trace.append((self.now, "heal"))

    # -- safety ----------------------------------------------------------------------------------------

    def _check(self) -> None:
        registration = self.controller.image.topics[TOPIC].partitions[0]
        checked = self.script is None or self.script.checked
        for broker in self._live():
            partition = broker.partition()
            if partition is None:
                continue
            mirror = self._refresh_mirror(broker, partition.log)
            if not checked:
                continue
            hw = partition.high_watermark
            if hw > partition.log_end_offset:
                self._fail(f"b{broker.broker_id} high watermark {hw} beyond its log end {partition.log_end_offset}")
            self._check_committed_prefix(broker, mirror, hw, partition.leader_epoch if partition.is_leader else -1)
            if partition.is_leader:
                key = (broker.broker_id, broker.incarnation, partition.leader_epoch)
                if hw < self.leader_hw.get(key, 0):
                    self._fail(f"b{broker.broker_id} leading epoch {partition.leader_epoch} moved its high "
                               f"watermark back from {self.leader_hw[key]} to {hw}")
                self.leader_hw[key] = hw
                if registration.leader == broker.broker_id and registration.leader_epoch == partition.leader_epoch:
                    self._check_leader_completeness(broker, mirror, partition.leader_epoch)
        for produce_id, offset in self.acked.items() if checked else ():
            batch = self.committed.get(offset)
            if batch is None or batch.produce_id != produce_id:
                self._fail(f"acknowledged p{produce_id} at offset {offset} is not committed there "
                           f"(committed: {batch})")

    def _refresh_mirror(self, broker: Broker, plog: PartitionLog) -> Mirror:
        key = (broker.broker_id, broker.incarnation)
        mirror = self.mirrors.get(key)
        if mirror is None:
            mirror = self.mirrors[key] = Mirror()
            watch_truncation(plog, mirror)
        if mirror.cut_at is not None:
            cut = mirror.cut_at
            mirror.cut_at = None
            self.truncations += 1
            matching = 0
            for batch in mirror.batches:
                if self.committed.get(batch.base_offset) != batch:
                    break
                matching = batch.last_offset + 1
            if cut < matching:
                self._fail(f"b{broker.broker_id} truncated to {cut}, cutting committed batches below {matching}")
            while mirror.batches and mirror.batches[-1].last_offset >= cut:
                mirror.batches.pop()
            mirror.verified = min(mirror.verified, len(mirror.batches))
        position = mirror.end
        end = plog.log_end_offset
        while position < end:
            found = plog.read(max(position, plog.log_start_offset), 1 << 30, end, True)
            if found is None:
                break
            data = found.segment.read_bytes(found.position, found.length)
            pos = 0
            while pos + HEADER_SIZE <= len(data):
                header = read_header(data, pos)
                batch = Batch(header.base_offset, header.last_offset, header.partition_leader_epoch,
                              header.base_timestamp - BASE_WALL_MS)
                known = self.by_epoch_offset.setdefault((batch.leader_epoch, batch.base_offset), batch)
                if known != batch:
                    self._fail(f"log matching: b{broker.broker_id} holds {batch}, another log holds {known}")
                mirror.batches.append(batch)
                pos += header.size
                position = batch.last_offset + 1
        return mirror

    def _check_committed_prefix(self, broker: Broker, mirror: Mirror, hw: int, leading_epoch: int) -> None:
        committed_end = self.committed_order[-1].last_offset + 1 if self.committed_order else 0
        for index in range(mirror.verified, len(mirror.batches)):
            batch = mirror.batches[index]
            if batch.last_offset >= hw:
                break
            mirror.verified = index + 1
            if batch.base_offset < committed_end:
                if self.committed.get(batch.base_offset) != batch:
                    self._fail(f"b{broker.broker_id} holds {batch} below its high watermark {hw}; committed "
                               f"there is {self.committed.get(batch.base_offset)}")
                continue
            if batch.base_offset != committed_end:
                self._fail(f"b{broker.broker_id} commits {batch}, not contiguous with the committed end "
                           f"{committed_end}")
            self.committed[batch.base_offset] = batch
            self.committed_order.append(batch)
            self.commit_epoch.append(leading_epoch)
            committed_end = batch.last_offset + 1

    def _check_leader_completeness(self, broker: Broker, mirror: Mirror, epoch: int) -> None:
        key = (broker.broker_id, epoch)
        start = self.leader_verified.get(key, 0)
        if start == len(self.committed_order):
            return
        held = {b.base_offset: b for b in mirror.batches}
        for index in range(start, len(self.committed_order)):
            batch = self.committed_order[index]
            if self.commit_epoch[index] > epoch:
                continue  # committed under a later leader
            if held.get(batch.base_offset) != batch:
                self._fail(f"leader completeness: b{broker.broker_id} leads epoch {epoch} without committed "
                           f"{batch}")
        self.leader_verified[key] = len(self.committed_order)

    def log_of(self, broker_id: int) -> list[Batch]:
        """The batches in a live broker's log now (the checker's copy, re-read where it changed)."""
        broker = self.brokers[broker_id]
        assert broker is not None
        partition_log = broker.log_manager.get(TOPIC, 0)
        return [] if partition_log is None else list(self._refresh_mirror(broker, partition_log).batches)

    def registration(self) -> PartitionRegistration:
        """The controller's current registration of the partition."""
        return self.controller.image.topics[TOPIC].partitions[0]

    # -- liveness --------------------------------------------------------------------------------------

    def converged(self) -> bool:
        registration = self.controller.image.topics[TOPIC].partitions[0]
        if registration.leader == NO_LEADER or sorted(registration.isr) != sorted(registration.replicas):
            return False
        replicas = []
        for broker in self._live():
            partition = broker.partition()
            if partition is None or partition.leader_epoch != registration.leader_epoch:
                return False
            replicas.append((broker, partition))
        leader = next((p for b, p in replicas if b.broker_id == registration.leader), None)
        if leader is None or not leader.is_leader:
            return False
        end = leader.log_end_offset
        if any(p.log_end_offset != end or p.high_watermark != end for _b, p in replicas):
            return False
        logs = [self.mirrors[(b.broker_id, b.incarnation)].batches for b, _p in replicas]
        if any(log != logs[0] for log in logs):
            return False
        return True

    async def run(self) -> int:
        """Faults for FAULT_PHASE_MS, then everything heals and replication must converge; returns steps."""
        try:
            return await self._run()
        except Violation:
            raise
        except Exception as error:  # a crash inside the product is a finding too, with its trace
            self._fail(f"{type(error).__name__}: {error}")
            raise

    async def _run(self) -> int:
        await self.setup()
        while self.now < FAULT_PHASE_MS:
            await self.step()
        self.faults = False
        self.loss = 0.0
        for broker_id in list(self.restart_at):
            self.restart(broker_id)
        self._heal()
        healed_at = self.now
        while not self.converged():
            if self.now - healed_at >= CONVERGE_LIMIT_MS:
                registration = self.controller.image.topics[TOPIC].partitions[0]
                states = {b.broker_id: (p.leader_id, p.leader_epoch, p.log_end_offset, p.high_watermark)
                          for b in self._live() if (p := b.partition()) is not None}
                self._fail(f"liveness: no convergence {CONVERGE_LIMIT_MS} ms after the faults stopped: "
                           f"{registration}, replicas (leader, epoch, leo, hw): {states}")
            await self.step()
        self.converged_after_ms = self.now - healed_at
        final = self.mirrors[(registration_leader := self.controller.image.topics[TOPIC].partitions[0].leader,
                              self.incarnations[registration_leader])].batches
        held = {b.base_offset: b for b in final}
        for batch in self.committed_order:
            if held.get(batch.base_offset) != batch:
                self._fail(f"committed {batch} is not in the converged log")
        return self.steps

    def close(self) -> None:
        for broker in self._live():
            broker.crash()
        self.controller.log.close()


def watch_truncation(plog: PartitionLog, mirror: Mirror) -> None:
    """Tell ``mirror`` whenever the replica's log is cut (an observation hook on this one log object)."""
    truncate_to, truncate_fully = plog.truncate_to, plog.truncate_fully_and_start_at

    def noted(offset: int) -> None:
        if offset < plog.log_end_offset:
            mirror.cut_at = offset if mirror.cut_at is None else min(mirror.cut_at, offset)

    def cut(offset: int) -> None:
        noted(offset)
        truncate_to(offset)

    def cut_fully(offset: int) -> None:
        mirror.cut_at = plog.log_start_offset if mirror.cut_at is None else min(mirror.cut_at, plog.log_start_offset)
        truncate_fully(offset)

    plog.truncate_to = cut  # type: ignore[method-assign]
    plog.truncate_fully_and_start_at = cut_fully  # type: ignore[method-assign]


def run_at_once(coroutine: Coroutine[object, object, T]) -> T:
    """Run a coroutine that completes without waiting (a fetch with max_wait 0) to its result."""
    try:
        coroutine.send(None)
    except StopIteration as done:
        return done.value
    coroutine.close()
    raise AssertionError("the fetch waited")


async def settle() -> None:
    """Let the tasks the step started (AlterPartition calls) run up to their next wait."""
    if len(asyncio.all_tasks()) > 1:
        for _ in range(3):
            await asyncio.sleep(0)


@dataclass
class SeedsResult:
    steps: int = 0
    violations: list[Violation] = field(default_factory=list)
    slowest_convergence_ms: int = 0
    slowest_seed: int | None = None
    acked: int = 0
    crashes: int = 0
    leader_epochs: int = 0
    clean_stops: int = 0
    truncations: int = 0


def run_seed(seed: int) -> Simulation:
    """Run one seed to its end; raises Violation."""
    logging.disable(logging.CRITICAL)  # the product logs every role change; the trace says what matters
    try:
        with tempfile.TemporaryDirectory(prefix="partition-sim-", dir=SCRATCH) as directory:
            simulation = Simulation(seed, Path(directory))

            async def main() -> None:
                try:
                    await simulation.run()
                finally:
                    simulation.close()
            asyncio.run(main())
            return simulation
    finally:
        logging.disable(logging.NOTSET)


def run_seeds(start: int, count: int) -> SeedsResult:
    """Run seeds start..start+count-1: steps, violations, and the slowest convergence after healing."""
    result = SeedsResult()
    for seed in range(start, start + count):
        try:
            simulation = run_seed(seed)
        except Violation as violation:
            result.violations.append(violation)
            continue
        result.steps += simulation.steps
        result.acked += len(simulation.acked)
        result.crashes += sum(simulation.incarnations.values()) - len(simulation.broker_ids)
        result.leader_epochs += simulation.controller.image.topics[TOPIC].partitions[0].leader_epoch
        result.truncations += simulation.truncations
        result.clean_stops += simulation.clean_stops
        if simulation.converged_after_ms > result.slowest_convergence_ms:
            result.slowest_convergence_ms = simulation.converged_after_ms
            result.slowest_seed = seed
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=200)
    parser.add_argument("--start", type=int, default=0)
    args = parser.parse_args(argv)
    began = time.perf_counter()
    result = run_seeds(args.start, args.seeds)
    for violation in result.violations[:3]:
        print(violation.report())
    if result.violations:
        print("failing seeds:", " ".join(str(v.seed) for v in result.violations))
    elapsed = time.perf_counter() - began
    print(f"{args.seeds} seeds, {len(result.violations)} violations, {result.steps} steps ({elapsed:.1f} s); "
          f"{result.acked} acks=all acknowledgements checked, {result.crashes} broker restarts "
          f"({result.clean_stops} after a controlled shutdown), "
          f"{result.leader_epochs} leader elections, {result.truncations} follower truncations; slowest "
          f"convergence after healing {result.slowest_convergence_ms} ms (seed {result.slowest_seed})")
    return 1 if result.violations else 0


if __name__ == "__main__":
    sys.exit(main())
