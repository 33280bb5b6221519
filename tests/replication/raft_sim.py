"""Deterministic simulation of the controller quorum (`kbroker.replication.quorum.raft`) under one seed.

Nodes run in process on a virtual clock; a simulated network delays, loses, duplicates and reorders
messages; nodes crash (volatile state lost, quorum state and log kept) and restart; partitions come and
heal; clients propose at random; nodes snapshot their committed prefix and cut their log behind it
(KIP-630), so a node that falls behind a leader's log start catches up by FetchSnapshot. Raft's safety
properties are checked after every step, and after the faults stop a single leader must emerge and
every node must converge within a bounded virtual time.

`python -m tests.replication.raft_sim --seeds 20000 --start 0` runs many seeds; a failing seed prints its
seed and the tail of its step trace (`--start SEED --seeds 1` replays it).
"""

from __future__ import annotations

import argparse
import collections
import heapq
import random
import sys
import time
from dataclasses import dataclass, field, replace

from kbroker.replication.quorum.raft import RaftConfig, RaftNode, RaftRole
from kbroker.replication.quorum.raft_messages import Outbound, RaftMessage, SnapshotId

from tests.support.raft_memory import MemoryQuorumState, MemoryRaftLog

TICK_MS = 10
FAULT_PHASE_MS = 3_000
# After healing: this long to elect a leader, plus one fetch round trip per batch of entries to copy.
ELECTION_ALLOWANCE_MS = 3_000
SIM_CONFIG = RaftConfig(
    election_timeout_ms=150,
    fetch_timeout_ms=300,
    request_timeout_ms=100,
    retry_backoff_ms=20,
    fetch_backoff_ms=30,
)


class Violation(AssertionError):
    """A broken safety or liveness property; `report()` names the seed and the trace that led there."""

    def __init__(self, seed: int, message: str, trace: list[str]) -> None:
        super().__init__(f"seed {seed}: {message}")
        self.seed = seed
        self.message = message
        self.trace = trace

    def report(self) -> str:
        return "\n".join([f"VIOLATION seed {self.seed}: {self.message}", "last steps:", *self.trace])


class CheckedLog(MemoryRaftLog):
    """A `MemoryRaftLog` that remembers the lowest offset truncated since the checker last looked (entries
    dropped behind a snapshot are not truncated: the snapshot holds them)."""

    def __init__(self) -> None:
        super().__init__()
        self.low_water: int = sys.maxsize

    def truncate_to(self, offset: int) -> None:
        if offset < self.end_offset:
            self.low_water = min(self.low_water, offset)
        super().truncate_to(offset)

    def install_snapshot(self, snapshot_id: SnapshotId, data: bytes) -> None:
        if snapshot_id.end_offset < self.end_offset:
            self.low_water = min(self.low_water, snapshot_id.end_offset)
        super().install_snapshot(snapshot_id, data)

    def committed_payloads(self, high_watermark: int) -> list[bytes]:
        """What this node's state machine holds at `high_watermark`: its snapshot, then its entries."""
        snapshot = self.latest_snapshot_id
        if snapshot is None:
            return [e.payload for e in self.entries(0, high_watermark)]
        after = self.entries(snapshot.end_offset, high_watermark - snapshot.end_offset)
        return self.snapshot_payloads(snapshot) + [e.payload for e in after]


@dataclass
class _Checker:
    """Incremental state for the safety checks, kept across node restarts."""

    leaders_by_epoch: dict[int, int] = field(default_factory=dict)
    # (offset, epoch) -> (payload, epoch of the previous entry): by induction, equal keys mean equal prefixes.
    matching: dict[tuple[int, int], tuple[bytes, int]] = field(default_factory=dict)
    verified: dict[int, int] = field(default_factory=dict)
    committed: list[tuple[int, bytes]] = field(default_factory=list)
    commit_epoch: list[int] = field(default_factory=list)
    hw_checked: dict[int, int] = field(default_factory=dict)
    max_hw_ever: dict[int, int] = field(default_factory=dict)
    leader_verified: dict[tuple[int, int], int] = field(default_factory=dict)
    snapshots_verified: dict[int, SnapshotId] = field(default_factory=dict)


class Simulation:
    """One seeded run: 3 or 5 voters plus one observer; everything random comes from `random.Random(seed)`."""

    def __init__(self, seed: int) -> None:
        self.seed = seed
        self.rng = random.Random(seed)
        rng = self.rng
        voter_count = rng.choice((3, 5))
        self.voters = list(range(1, voter_count + 1))
        self.observer = voter_count + 1
        self.ids = [*self.voters, self.observer]
        self.loss = rng.choice((0.0, 0.02, 0.1, 0.2))
        self.duplication = rng.choice((0.0, 0.05, 0.15))
        self.max_delay_ms = rng.choice((5, 20, 60))
        self.crash_rate = rng.choice((0.0, 0.004, 0.012, 0.03))
        self.partition_rate = rng.choice((0.0, 0.003, 0.01))
        self.resign_rate = rng.choice((0.0, 0.002))
        # Chance that a leader crashes right after its election or right after moving its high watermark:
        # the moments when losing it strands entries that only it holds.
        self.crash_at_risk = rng.choice((0.0, 0.0, 0.1, 0.3))
        self.propose_rate = rng.choice((0.05, 0.3))
        self.snapshot_rate = rng.choice((0.0, 0.02, 0.1))
        # One record per fetch separates a new leader's LeaderChange entry from the entries before it.
        self.config = replace(SIM_CONFIG, max_fetch_records=rng.choice((1, 4, 64)))
        self.now = 0
        self.steps = 0
        self.faults = True
        self.logs = {i: CheckedLog() for i in self.ids}
        self.stores = {i: MemoryQuorumState() for i in self.ids}
        self.incarnation = dict.fromkeys(self.ids, 0)
        self.nodes: dict[int, RaftNode | None] = {i: self._start(i) for i in self.ids}
        self.restart_at: dict[int, int] = {}
        self.side: dict[int, int] = dict.fromkeys(self.ids, 0)
        self.heal_at: int | None = None
        # (deliver_at, sequence, sent_at, source, destination, message)
        self.queue: list[tuple[int, int, int, int, int, RaftMessage]] = []
        self.sequence = 0
        self.payloads = 0
        self.trace: collections.deque[tuple] = collections.deque(maxlen=1000)
        self.check = _Checker()
        self._final_epoch: int | None = None
        self.just_committed: list[int] = []
        self.just_elected: list[int] = []
        self.converged_after_ms = 0
        self.converge_limit_ms = 0

    # -- plumbing --------------------------------------------------------------------------------------

    def _start(self, node_id: int) -> RaftNode:
        self.incarnation[node_id] += 1
        node_rng = random.Random(f"{self.seed}/{node_id}/{self.incarnation[node_id]}")
        return RaftNode(node_id, self.voters, self.logs[node_id], self.stores[node_id], node_rng, self.config, self.now)

    def _send(self, source: int, outbound: list[Outbound]) -> None:
        rng = self.rng
        for item in outbound:
            if rng.random() < self.loss or self.side[source] != self.side[item.destination]:
                self.trace.append((self.now, "lost", f"n{source}->n{item.destination}", item.message))
                continue
            copies = 2 if rng.random() < self.duplication else 1
            for _ in range(copies):
                self.sequence += 1
                deliver_at = self.now + rng.randint(1, self.max_delay_ms)
                queued = (deliver_at, self.sequence, self.now, source, item.destination, item.message)
                heapq.heappush(self.queue, queued)

    def _fail(self, message: str) -> None:
        raise Violation(self.seed, message, [self._format(event) for event in self.trace])

    @staticmethod
    def _format(event: tuple) -> str:
        now, kind, *rest = event
        return f"t={now:>6} {kind:<9} " + " ".join(str(part) for part in rest)

    def _after_input(self, node_id: int, node: RaftNode, role: RaftRole, epoch: int) -> None:
        """Cheap checks after every single input, so a leadership that lasts less than a step is seen too."""
        if node.role is not role or node.epoch != epoch:
            self.trace.append((self.now, "role", f"n{node_id}", node.role.value, f"epoch={node.epoch}"))
            if node.role is RaftRole.LEADER:
                self.just_elected.append(node_id)
        if node.role is RaftRole.LEADER:
            holder = self.check.leaders_by_epoch.setdefault(node.epoch, node_id)
            if holder != node_id:
                self._fail(f"election safety: n{holder} and n{node_id} both led epoch {node.epoch}")

    # -- one step --------------------------------------------------------------------------------------

    def step(self) -> None:
        self.now += TICK_MS
        self.steps += 1
        while self.queue and self.queue[0][0] <= self.now:
            _, _, _, source, destination, message = heapq.heappop(self.queue)
            node = self.nodes[destination]
            if node is None or self.side[source] != self.side[destination]:
                continue
            self.trace.append((self.now, "deliver", f"n{source}->n{destination}", message))
            role, epoch = node.role, node.epoch
            out = node.handle(self.now, source, message)
            self._after_input(destination, node, role, epoch)
            self._send(destination, out)
        for node_id in self.ids:
            node = self.nodes[node_id]
            if node is not None:
                role, epoch = node.role, node.epoch
                out = node.tick(self.now)
                self._after_input(node_id, node, role, epoch)
                self._send(node_id, out)
        self._clients()
        self._check_invariants()
        if self.faults:
            self._snapshots()
            self._inject_faults()

    def _inject_faults(self) -> None:
        rng = self.rng
        for node_id, when in list(self.restart_at.items()):
            if when <= self.now:
                self._restart(node_id)
        live = [i for i in self.ids if self.nodes[i] is not None]
        if live and rng.random() < self.crash_rate:
            self._crash(rng.choice(live))
        for node_id in self.just_elected + self.just_committed:
            if self.nodes[node_id] is not None and rng.random() < self.crash_at_risk:
                self._crash(node_id)
        self.just_elected = []
        if self.heal_at is None and rng.random() < self.partition_rate:
            shuffled = list(self.ids)
            rng.shuffle(shuffled)
            cut = rng.randint(1, len(shuffled) - 1)
            leaders = [i for i in self.voters if self.nodes[i] is not None and self.nodes[i].role is RaftRole.LEADER]
            if leaders and rng.random() < 0.5:
                # Cut the leader off with at most a minority: the classic way to strand uncommitted entries.
                shuffled.remove(leaders[0])
                shuffled.insert(0, leaders[0])
                cut = rng.randint(1, len(self.voters) // 2)
            self.side = {node_id: int(position >= cut) for position, node_id in enumerate(shuffled)}
            self.heal_at = self.now + rng.randint(100, 2000)
            self.trace.append((self.now, "partition", sorted(shuffled[:cut]), sorted(shuffled[cut:])))
        elif self.heal_at is not None and self.heal_at <= self.now:
            self._heal()
        if rng.random() < self.resign_rate:
            for node_id in self.voters:
                node = self.nodes[node_id]
                if node is not None and node.role is RaftRole.LEADER:
                    self.trace.append((self.now, "resign", f"n{node_id}"))
                    self._send(node_id, node.resign(self.now))
                    self._after_input(node_id, node, RaftRole.LEADER, node.epoch)

    def _crash(self, node_id: int) -> None:
        self.nodes[node_id] = None
        # What the node sent during this very step had not left the machine yet: it dies with it.
        kept = [queued for queued in self.queue if queued[3] != node_id or queued[2] < self.now]
        if len(kept) != len(self.queue):
            self.queue = kept
            heapq.heapify(self.queue)
        self.restart_at[node_id] = self.now + self.rng.randint(50, 1500)
        self.trace.append((self.now, "crash", f"n{node_id}"))

    def _restart(self, node_id: int) -> None:
        del self.restart_at[node_id]
        self.nodes[node_id] = self._start(node_id)
        # A restarted node starts again from a high watermark of 0; its log and quorum state survived.
        self.check.hw_checked[node_id] = 0
        self.trace.append((self.now, "restart", f"n{node_id}", self.stores[node_id].state))

    def _heal(self) -> None:
        self.side = dict.fromkeys(self.ids, 0)
        self.heal_at = None
        self.trace.append((self.now, "heal"))

    def _clients(self) -> None:
        if self.rng.random() >= self.propose_rate:
            return
        node_id = self.rng.choice(self.voters)
        node = self.nodes[node_id]
        if node is not None and node.role is RaftRole.LEADER:
            count = self.rng.randint(1, 3)
            payloads = [b"p%d" % (self.payloads + i) for i in range(count)]
            self.payloads += count
            last = node.propose(payloads)
            self.trace.append((self.now, "propose", f"n{node_id}", payloads, f"last={last}"))

    def _snapshots(self) -> None:
        """A node snapshots what it has committed and drops the entries behind it."""
        if self.rng.random() >= self.snapshot_rate:
            return
        node_id = self.rng.choice(self.ids)
        node = self.nodes[node_id]
        log = self.logs[node_id]
        if node is None or node.high_watermark <= log.start_offset:
            return
        snapshot_id = log.create_snapshot(node.high_watermark, log.committed_payloads(node.high_watermark))
        log.delete_before_snapshot()
        self.trace.append((self.now, "snapshot", f"n{node_id}", snapshot_id))

    # -- safety ----------------------------------------------------------------------------------------

    def _check_invariants(self) -> None:
        check = self.check
        self.just_committed = []
        for node_id in self.ids:
            node = self.nodes[node_id]
            log = self.logs[node_id]
            end = log.end_offset
            max_hw = check.max_hw_ever.get(node_id, 0)
            # Committed entries never disappear: no truncation below any high watermark this node reported.
            if log.low_water < max_hw:
                self._fail(f"n{node_id} truncated to {log.low_water} below its high watermark {max_hw}")
            start = max(min(check.verified.get(node_id, 0), log.low_water), log.start_offset)
            if start < end:
                prev_epoch = log.epoch_of(start - 1) if start > 0 else 0
                for entry in log.entries(start, end - start):
                    expected = check.matching.setdefault((entry.offset, entry.epoch), (entry.payload, prev_epoch))
                    if expected != (entry.payload, prev_epoch):
                        self._fail(f"log matching: n{node_id} offset {entry.offset} epoch {entry.epoch} holds "
                                   f"{(entry.payload, prev_epoch)}, another log holds {expected}")
                    prev_epoch = entry.epoch
            check.verified[node_id] = end
            log.low_water = sys.maxsize
            if node is None:
                continue
            hw = node.high_watermark
            if hw > end:
                self._fail(f"n{node_id} high watermark {hw} beyond its end offset {end}")
            checked = check.hw_checked.get(node_id, 0)
            self._check_snapshot(node_id, log)
            if hw > checked:
                for entry in log.entries(max(checked, log.start_offset), hw - max(checked, log.start_offset)):
                    if entry.offset < len(check.committed):
                        if check.committed[entry.offset] != (entry.epoch, entry.payload):
                            self._fail(f"committed offset {entry.offset} was {check.committed[entry.offset]}, "
                                       f"n{node_id} commits {(entry.epoch, entry.payload)}")
                    else:
                        check.committed.append((entry.epoch, entry.payload))
                        check.commit_epoch.append(node.epoch)
                check.hw_checked[node_id] = hw
            if hw > max_hw:
                check.max_hw_ever[node_id] = hw
            if node.role is RaftRole.LEADER:
                if hw > checked:
                    self.just_committed.append(node_id)
                self._check_leader_completeness(node_id, node, log)

    def _check_snapshot(self, node_id: int, log: CheckedLog) -> None:
        """Committed entries are never lost to a snapshot: a node's snapshot (its own or its leader's) holds
        exactly the committed prefix it ends at."""
        snapshot = log.latest_snapshot_id
        if snapshot is None or self.check.snapshots_verified.get(node_id) == snapshot:
            return
        committed = [payload for _, payload in self.check.committed[: snapshot.end_offset]]
        held = log.snapshot_payloads(snapshot)
        if snapshot.end_offset > len(self.check.committed) or held != committed:
            self._fail(f"n{node_id} snapshot {snapshot} holds {held[-3:]}... ({len(held)} entries), the committed "
                       f"prefix is {committed[-3:]}... ({len(self.check.committed)} committed)")
        self.check.snapshots_verified[node_id] = snapshot

    def _check_leader_completeness(self, node_id: int, node: RaftNode, log: CheckedLog) -> None:
        check = self.check
        key = (node_id, node.epoch)
        # (Below the log start the snapshot holds the committed entries: _check_snapshot.)
        verified = max(check.leader_verified.get(key, 0), log.start_offset)
        for offset in range(verified, len(check.committed)):
            if check.commit_epoch[offset] > node.epoch:
                continue  # committed under a later leader: a stale leader need not have it
            found = log.entries(offset, 1)
            if not found or (found[0].epoch, found[0].payload) != check.committed[offset]:
                self._fail(f"leader completeness: n{node_id} leads epoch {node.epoch} without committed offset "
                           f"{offset} {check.committed[offset]}")
        check.leader_verified[key] = len(check.committed)

    # -- liveness --------------------------------------------------------------------------------------

    def _converged(self) -> bool:
        leaders = [n for n in self.nodes.values() if n is not None and n.role is RaftRole.LEADER]
        if len(leaders) != 1:
            return False
        leader = leaders[0]
        last = leader.high_watermark - 1
        tail = leader.log.entries(last, 1) if last >= leader.log.start_offset else []
        if not any(e.payload.startswith(b"final") for e in tail):
            if self._final_epoch != leader.epoch:
                self._final_epoch = leader.epoch
                leader.propose([b"final%d" % self.payloads])
                self.payloads += 1
            return False
        end = leader.log.end_offset
        for node in self.nodes.values():
            assert node is not None
            if node is leader:
                continue
            if node.epoch != leader.epoch or node.leader_id != leader.node_id:
                return False
            if node.log.end_offset != end or node.high_watermark != end:
                return False
        return leader.high_watermark == end

    def run(self) -> int:
        """Faults for FAULT_PHASE_MS, then everything heals and the quorum must converge; returns steps."""
        try:
            return self._run()
        except Violation:
            raise
        except Exception as error:  # a crash inside the state machine is a finding too, with its trace
            self._fail(f"{type(error).__name__}: {error}")
            raise

    def _run(self) -> int:
        while self.now < FAULT_PHASE_MS:
            self.step()
        self.faults = False
        self.loss = 0.0
        self.duplication = 0.0
        self.propose_rate = 0.0
        for node_id in list(self.restart_at):
            self._restart(node_id)
        self._heal()
        healed_at = self.now
        longest = max(log.end_offset for log in self.logs.values())
        rounds = -(-longest // self.config.max_fetch_records) + 2
        self.converge_limit_ms = ELECTION_ALLOWANCE_MS + rounds * (2 * self.max_delay_ms + 2 * TICK_MS)
        deadline = self.now + self.converge_limit_ms
        while not self._converged():
            if self.now >= deadline:
                states = {i: (n.role.value, n.epoch, n.leader_id, n.log.end_offset, n.high_watermark)
                          for i, n in self.nodes.items() if n is not None}
                self._fail(f"liveness: no convergence {self.converge_limit_ms} ms after the faults stopped: {states}")
            self.step()
        self.converged_after_ms = self.now - healed_at
        return self.steps


@dataclass
class SeedsResult:
    steps: int = 0
    violations: list[Violation] = field(default_factory=list)
    slowest_convergence_ms: int = 0
    slowest_seed: int | None = None
    # The seed that came closest to its liveness bound: (convergence / bound, seed).
    tightest: tuple[float, int | None] = (0.0, None)


def run_seeds(start: int, count: int) -> SeedsResult:
    """Run seeds start..start+count-1: total steps, violations, and the slowest convergence after healing."""
    result = SeedsResult()
    for seed in range(start, start + count):
        simulation = Simulation(seed)
        try:
            result.steps += simulation.run()
        except Violation as violation:
            result.violations.append(violation)
            continue
        if simulation.converged_after_ms > result.slowest_convergence_ms:
            result.slowest_convergence_ms = simulation.converged_after_ms
            result.slowest_seed = seed
        result.tightest = max(result.tightest, (simulation.converged_after_ms / simulation.converge_limit_ms, seed))
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=1000)
    parser.add_argument("--start", type=int, default=0)
    args = parser.parse_args(argv)
    began = time.perf_counter()
    result = run_seeds(args.start, args.seeds)
    for violation in result.violations[:3]:
        print(violation.report())
    if result.violations:
        print("failing seeds:", " ".join(str(v.seed) for v in result.violations))
    elapsed = time.perf_counter() - began
    ratio, tight_seed = result.tightest
    print(f"{args.seeds} seeds, {len(result.violations)} violations, {result.steps} steps ({elapsed:.1f} s); "
          f"slowest convergence after healing {result.slowest_convergence_ms} ms (seed {result.slowest_seed}); "
          f"closest to its bound: seed {tight_seed} at {ratio:.0%}")
    return 1 if result.violations else 0


if __name__ == "__main__":
    sys.exit(main())
