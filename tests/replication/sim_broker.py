"""One broker process as the replication simulation (partition_sim.py) runs it.

The product parts are real: a ``LogManager`` over the broker's own dir, a ``ReplicaManager`` in
cluster mode whose fetchers do not run their own loop (``run_fetch_loops=False``). What a broker
process does around them is played here, one step of virtual time at a time, every exchange a
message through the simulation's network: registering (again after STALE_BROKER_EPOCH, as
broker_lifecycle does), heartbeats, replaying the controller's metadata (the partition's
registration and the brokers' epochs and fencing) into ``apply_partition``, checkpointing high
watermarks, the ISR-expiration timer, AlterPartition, and driving each ``ReplicaFetcher`` through
``next_request`` / ``handle_response`` with the leader's ``ReplicaManager.fetch`` serving it
(one fetch in flight per leader; a lost one times out and backs off, as the fetch loop does).
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Coroutine
from typing import TYPE_CHECKING, TypeVar

from kbroker.protocol.errors import ErrorCode, KafkaError
from kbroker.replication.partition import Partition
from kbroker.replication.quorum.partition_registration import PartitionRegistration
from kbroker.replication.replica_fetcher import ReplicaFetcher, SentFetch
from kbroker.replication.replica_manager import FetchParams, FetchRequestPartition, ReplicaManager
from kbroker.replication.replication_settings import ClusterLinks, ReplicationSettings
from kbroker.storage.log_manager import LogManager
from kio.schema.fetch.v15 import request as fetch_request
from kio.schema.fetch.v15 import response as fetch_response

if TYPE_CHECKING:
    from tests.replication.partition_sim import Simulation

T = TypeVar("T")
TOPIC = "sim"
CONTROLLER = 0  # the controller's node id on the simulated network
TICK_MS = 10
HEARTBEAT_MS = 60
RPC_TIMEOUT_MS = 200  # a request not answered by then failed (its connection is gone)
CHECKPOINT_MS = 200  # replica.high.watermark.checkpoint.interval.ms, scaled down
SIM_SETTINGS = ReplicationSettings(
    replica_lag_time_max_ms=300,
    replica_fetch_wait_max_ms=0,  # no long poll: a fetch is answered at once, the next one follows
    replica_fetch_backoff_ms=40,
    replica_socket_timeout_ms=RPC_TIMEOUT_MS,
)


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
        self.published = False  # partition metadata applied (after the registration, see replay)
        self.brokers_view: dict[int, tuple[int, bool]] = {}  # broker id -> (epoch, fenced), as replayed
        self.register_due = 0
        self.heartbeat_due = 0
        self.metadata_due = 0
        self.checkpoint_due = sim.rng.randint(0, CHECKPOINT_MS)
        # leader id -> (the fetcher, what its request carried, when it times out)
        self.in_flight: dict[int, tuple[ReplicaFetcher, SentFetch, int]] = {}
        self.fetch_idle_until: dict[int, int] = {}  # leader id -> end of a link failure's backoff
        self.alters: set[asyncio.Future[PartitionRegistration]] = set()

    def partition(self) -> Partition | None:
        return self.replica_manager.partitions.get((TOPIC, 0))

    def crash(self) -> None:
        for future in self.alters:
            future.cancel()
        for plog in self.log_manager.logs.values():
            for segment in plog.segments:
                segment.close_file()  # the kernel closes a dead process's files; nothing is flushed

    def tick(self) -> None:
        """What the process's timers do in one step."""
        sim, now = self.sim, self.sim.now
        if self.broker_epoch < 0 and now >= self.register_due:
            self.register_due = now + RPC_TIMEOUT_MS
            sim.send(self.broker_id, CONTROLLER, self._register)
        if self.broker_epoch >= 0 and now >= self.heartbeat_due:
            self.heartbeat_due = now + HEARTBEAT_MS
            epoch, offset = self.broker_epoch, self.metadata_offset
            sim.send(self.broker_id, CONTROLLER, lambda: self._heartbeat(epoch, offset))
        if now >= self.metadata_due:
            self.metadata_due = now + RPC_TIMEOUT_MS  # the answer brings it forward
            sim.send(self.broker_id, CONTROLLER, self._metadata)
        if now >= self.checkpoint_due:
            self.checkpoint_due = now + CHECKPOINT_MS
            self.log_manager.checkpoint_high_watermarks(self.replica_manager.high_watermarks())
        if now % (SIM_SETTINGS.replica_lag_time_max_ms // 2) == 0:
            self.replica_manager.shrink_isrs(sim.clock.wall_ms())
        self._fetch()

    # -- with the controller (each method runs at the controller; its answer is a message back) ---------

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
                              f"pe={partition_epoch}", answer.code.name if isinstance(answer, KafkaError) else "ok"))

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

    def _register(self) -> None:
        sim = self.sim
        try:
            epoch = sim.controller.register_broker(
                self.broker_id, self.connection, "sim", self.broker_id, None, sim.now,
                self.previous_broker_epoch, connection=self.connection)
        except KafkaError as exc:
            sim.trace.append((sim.now, "register", f"b{self.broker_id}", exc.code.name))
            return
        sim.trace.append((sim.now, "register", f"b{self.broker_id}", f"epoch={epoch}"))

        def answered() -> None:
            self.broker_epoch = epoch
        sim.send(CONTROLLER, self.broker_id, answered, self)

    def _heartbeat(self, broker_epoch: int, metadata_offset: int) -> None:
        sim = self.sim
        try:
            sim.controller.heartbeat(self.broker_id, broker_epoch, metadata_offset, False, False, sim.now,
                                     self.connection)
        except KafkaError as exc:
            if exc.code != ErrorCode.stale_broker_epoch:
                raise

            def stale() -> None:
                # As broker_lifecycle: registered again (a registration request a dead incarnation
                # of this broker left in flight may have replaced this one's).
                if self.broker_epoch == broker_epoch:
                    sim.trace.append((sim.now, "stale", f"b{self.broker_id}", f"epoch={broker_epoch}"))
                    self.broker_epoch = -1
            sim.send(CONTROLLER, self.broker_id, stale, self)

    def _metadata(self) -> None:
        sim = self.sim
        image = sim.controller.image
        offset = image.offset
        registration = image.topics[TOPIC].partitions[0]
        view = {b.broker_id: (b.broker_epoch, b.fenced) for b in image.brokers.values()}

        def replay() -> None:
            self.metadata_due = sim.now + TICK_MS
            if offset <= self.metadata_offset and self.published:
                return  # an older answer overtaken by a newer one
            self.metadata_offset = max(self.metadata_offset, offset)
            self.brokers_view = view
            # As broker_lifecycle: replicas follow the metadata only once this incarnation has
            # registered and replayed past its own registration.
            if self.broker_epoch < 0 or self.metadata_offset < self.broker_epoch:
                return
            self.published = True
            partition = self.partition()
            before = (partition.leader_id, partition.leader_epoch) if partition is not None else None
            self.replica_manager.apply_partition(TOPIC, 0, sim.topic_id, registration)
            partition = self.partition()
            if partition is not None and (partition.leader_id, partition.leader_epoch) != before:
                sim.trace.append((sim.now, "role", f"b{self.broker_id}", f"leader={partition.leader_id}",
                                  f"epoch={partition.leader_epoch}", f"isr={list(partition.isr)}",
                                  f"leo={partition.log_end_offset}", f"hw={partition.high_watermark}"))
                if partition.is_leader:
                    sim.just_elected.append(self.broker_id)
        sim.send(CONTROLLER, self.broker_id, replay, self)

    # -- the replica fetchers, driven through their sans-IO half ----------------------------------------

    def _fetch(self) -> None:
        sim = self.sim
        manager = self.replica_manager.fetcher_manager
        assert manager is not None
        for leader_id, (fetcher, _sent, deadline) in list(self.in_flight.items()):
            if manager.fetchers.get(leader_id) is not fetcher:
                del self.in_flight[leader_id]  # stopped: its answer will be dropped
            elif deadline <= sim.now:
                del self.in_flight[leader_id]  # the link failed: the loop backs off
                self.fetch_idle_until[leader_id] = sim.now + SIM_SETTINGS.replica_fetch_backoff_ms
        for leader_id, fetcher in manager.fetchers.items():
            if leader_id in self.in_flight or self.fetch_idle_until.get(leader_id, 0) > sim.now:
                continue
            prepared = fetcher.next_request()
            if prepared is None:
                continue
            sent, request = prepared
            self.in_flight[leader_id] = (fetcher, sent, sim.now + RPC_TIMEOUT_MS)
            sim.send(self.broker_id, leader_id,
                     lambda f=fetcher, s=sent, r=request, lid=leader_id: self._served(lid, f, s, r))

    def _served(self, leader_id: int, fetcher: ReplicaFetcher, sent: SentFetch,
                request: fetch_request.FetchRequest) -> None:
        """At the leader: its ReplicaManager answers the fetch; the answer travels back."""
        sim = self.sim
        leader = sim.brokers[leader_id]
        assert leader is not None
        wanted = [
            FetchRequestPartition(TOPIC, p.partition, p.fetch_offset, p.partition_max_bytes, p.current_leader_epoch,
                                  p.last_fetched_epoch, p.log_start_offset)
            for t in request.topics if t.topic_id == sim.topic_id for p in t.partitions
        ]
        params = FetchParams(request.replica_state.replica_id, request.replica_state.replica_epoch)
        results = run_at_once(leader.replica_manager.fetch(wanted, 0, request.min_bytes, request.max_bytes, 0, params))
        partitions = []
        for asked, result in zip(wanted, results, strict=True):
            records = b""
            if result.records is not None:
                records = result.records.segment.read_bytes(result.records.position, result.records.length)
            epoch, end_offset = result.diverging_epoch or (-1, -1)
            partitions.append(fetch_response.PartitionData(
                partition_index=asked.partition, error_code=result.error, high_watermark=result.high_watermark,
                last_stable_offset=result.last_stable_offset, log_start_offset=result.log_start_offset,
                diverging_epoch=fetch_response.EpochEndOffset(epoch=epoch, end_offset=end_offset),
                aborted_transactions=None, records=records))
        response = fetch_response.FetchResponse(
            throttle_time=0, error_code=ErrorCode.none,
            responses=(fetch_response.FetchableTopicResponse(topic_id=sim.topic_id, partitions=tuple(partitions)),))

        def answered() -> None:
            current = self.in_flight.get(leader_id)
            if current is None or current[0] is not fetcher:
                return  # timed out or the fetcher was replaced meanwhile
            del self.in_flight[leader_id]
            fetcher.handle_response(sent, response)
        sim.send(leader_id, self.broker_id, answered, self)


def run_at_once(coroutine: Coroutine[object, object, T]) -> T:
    """Run a coroutine that completes without waiting (a fetch with max_wait 0) to its result."""
    try:
        coroutine.send(None)
    except StopIteration as done:
        return done.value
    coroutine.close()
    raise AssertionError("the fetch waited")
