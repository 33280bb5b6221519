"""Deterministic simulation of partition replication (the data plane) under one seed.

Three brokers, each a real ``ReplicaManager`` over real ``PartitionLog``s in a temp dir, and one
real ``QuorumController`` (its metadata log on disk; the controller quorum itself is simulated in
raft_sim.py) replicate one partition (replication factor 3) on a virtual clock. Everything that
crosses the network is a message this module delivers after a random delay, or loses, or holds
back behind a network partition (between any of the four nodes) or a link dropping one way:
followers' Fetch requests and their answers, AlterPartition, broker registration and heartbeats,
and the metadata each broker replays (a broker process: sim_broker.py). Producers write acks=all
(and some acks=1) batches to whichever broker believes it leads.

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

Checked after every step by replica_log_checker.py (``Violation`` names the seed and the trace
that led there):

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
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import NoReturn

from kbroker.protocol.errors import ErrorCode, KafkaError
from kbroker.protocol.record_builder import build_batch
from kbroker.replication.quorum.partition_registration import NO_LEADER, PartitionRegistration
from kbroker.replication.quorum.quorum_controller import ControllerSettings, QuorumController
from kbroker.replication.quorum.raft_log import PartitionRaftLog
from kbroker.replication.replica_manager import ProduceResult
from kbroker.storage.log import PartitionLog
from kbroker.storage.log_config import LogConfig

from tests.replication.replica_log_checker import Batch, ReplicaLogChecker
from tests.replication.sim_broker import CONTROLLER, TICK_MS, TOPIC, Broker
from tests.support.clock import ManualClock

BROKERS = (1, 2, 3)
FAULT_PHASE_MS = 3_000
CONVERGE_LIMIT_MS = 6_000
SESSION_MS = 500
DISCONNECT_FENCE_MS = 150
PRODUCE_TIMEOUT_MS = 1_000
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
        # A link that drops one direction only: requests get through, their answers are lost.
        self.one_way_rate = rng.choice((0.0, 0.005, 0.02))
        self.crash_at_risk = rng.choice((0.0, 0.0, 0.1, 0.3))
        self.closed_seen = rng.choice((0.0, 0.5, 1.0))  # chance the controller sees a crash's reset
        self.shutdown_share = rng.choice((0.0, 0.3))  # of the brokers stopped, those stopped cleanly
        self.produce_rate = rng.choice((0.1, 0.3, 0.6))
        self.acks_all_share = rng.choice((0.7, 1.0))
        if script is not None:
            self.loss = self.crash_rate = self.partition_rate = self.crash_at_risk = self.produce_rate = 0.0
            self.one_way_rate = 0.0
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
        self.one_way_heal_at: dict[tuple[int, int], int] = {}  # (source, destination) -> when it heals
        self.incarnations = dict.fromkeys(self.broker_ids, 0)
        self.brokers: dict[int, Broker | None] = {}
        self.restart_at: dict[int, int] = {}
        self.produces: list[tuple[int, int, Broker, ProduceResult]] = []  # (id, deadline, leader, result)
        self.just_acked: list[int] = []
        self.just_elected: list[int] = []
        self.acked: dict[int, int] = {}  # produce id -> base offset it was acknowledged at
        self.checker = ReplicaLogChecker(self._fail, BASE_WALL_MS)
        self.converged_after_ms = 0
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

    def _fail(self, message: str) -> NoReturn:
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
        self.checker.forget(broker_id)  # a new process: the checker reads its log afresh

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
            broker.tick()
        self._clients()
        await settle()
        self._check()
        for broker_id, when in list(self.restart_at.items()) if self.script is None else ():
            # (also after the faults stop: a controlled shutdown may finish only then)
            if when <= self.now or not self.faults:
                self.restart(broker_id)
        if self.faults:
            self._inject_faults()

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
        for link, when in list(self.one_way_heal_at.items()):
            if when <= self.now:
                del self.one_way_heal_at[link]
                self.blocked.discard(link)
        if rng.random() < self.one_way_rate:
            source, destination = rng.sample(nodes, 2)
            if (source, destination) not in self.blocked:
                self.blocked.add((source, destination))
                self.one_way_heal_at[(source, destination)] = self.now + rng.randint(50, 1000)
                self.trace.append((self.now, "one-way", f"{source}->{destination} drops"))

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
        # Mid-step: what it committed (and acknowledged) this step is seen before it goes.
        self._check_replica(broker)
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
        self.blocked.difference_update(self.one_way_heal_at)
        self.one_way_heal_at.clear()
        self.heal_at = None
        self.trace.append((self.now, "heal"))

    # -- safety ----------------------------------------------------------------------------------------

    def _check(self) -> None:
        if self.script is not None and not self.script.checked:
            for broker in self._live():  # the copies of the logs only (converged() compares them)
                if (partition := broker.partition()) is not None:
                    self.checker.mirror((broker.broker_id, broker.incarnation), partition.log)
            return
        for broker in self._live():
            self._check_replica(broker)
        self.checker.check_acknowledged(self.acked)

    def _check_replica(self, broker: Broker) -> None:
        registration = self.registration()
        partition = broker.partition()
        if partition is not None and (self.script is None or self.script.checked):
            named = registration.leader == broker.broker_id and registration.leader_epoch == partition.leader_epoch
            self.checker.check_replica((broker.broker_id, broker.incarnation), partition, named)

    def log_of(self, broker_id: int) -> list[Batch]:
        """The batches in a live broker's log now (the checker's copy, re-read where it changed)."""
        broker = self.brokers[broker_id]
        assert broker is not None
        partition_log = broker.log_manager.get(TOPIC, 0)
        key = (broker_id, broker.incarnation)
        return [] if partition_log is None else list(self.checker.mirror(key, partition_log).batches)

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
        logs = [self.log_of(b.broker_id) for b, _p in replicas]
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
        self.checker.check_holds_committed(self.log_of(self.registration().leader))
        return self.steps

    def close(self) -> None:
        for broker in self._live():
            broker.crash()
        self.controller.log.close()


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
        result.truncations += simulation.checker.truncations
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
