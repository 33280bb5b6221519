"""The failover cases Kafka's KIP-101 and KIP-279 were written for, scripted end to end.

Each runs on the replication simulation (partition_sim.py): real ReplicaManagers, Partitions and
PartitionLogs for brokers A (1) and B (2), a real QuorumController deciding ISR changes and
elections, every message on a virtual clock; the failpoints are links that drop everything
(``Simulation.blocked``) and process crashes at chosen moments. Where a case keeps unclean leader
election off, the simulation's per-step invariants stay on too (committed prefix, no acknowledged
loss, leader completeness, one batch per leader epoch and offset).

* KIP-101 scenario 1: a follower holding an acknowledged record above its (stale) high watermark
  restarts and is then elected: truncating to the high watermark on restart (Kafka before
  KIP-101) would lose the record; kbroker's followers truncate only by leader epoch.
* KIP-101 scenario 2: after a failover the old and the new leader hold different records at one
  offset; the returning replica must end with the new leader's. Both the clean form (the old
  leader's record was never acknowledged) and the KIP's own form (its high watermark covered the
  record, so only an unclean election can take it) are run.
* KIP-279: a fast double failover A -> B -> A, where B wrote in an epoch A never saw: when B comes
  back it must truncate to the end of the last epoch both know (the leader answers its largest
  epoch not above B's, with that epoch's end), not keep its tail.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path

from kbroker.protocol.errors import ErrorCode
from kbroker.replication.partition import Partition

from tests.replication.partition_sim import CONTROLLER, Script, Simulation

A, B = 1, 2
ACKS_ALL, ACKS_LEADER = -1, 1
LIMIT_MS = 5_000  # virtual time any one step of a scenario may take


def scripted(tmp_path: Path, script: Script, body: Callable[[Simulation], Awaitable[None]]) -> None:
    async def main() -> None:
        sim = Simulation(0, tmp_path, script)
        try:
            await sim.setup()
            await body(sim)
        finally:
            sim.close()
    asyncio.run(main())


async def until(sim: Simulation, predicate: Callable[[], bool], what: str) -> None:
    """Step the simulation until ``predicate`` holds, failing after LIMIT_MS of virtual time."""
    deadline = sim.now + LIMIT_MS
    while not predicate():
        assert sim.now < deadline, f"{what}: not reached by t={sim.now} ms; registration {sim.registration()}"
        await sim.step()


def replica(sim: Simulation, broker_id: int) -> Partition:
    broker = sim.brokers[broker_id]
    assert broker is not None
    partition = broker.partition()
    assert partition is not None
    return partition


def leads(sim: Simulation, broker_id: int) -> bool:
    """The controller names ``broker_id`` leader and the broker has taken up that leadership."""
    registration = sim.registration()
    broker = sim.brokers[broker_id]
    partition = broker.partition() if broker is not None else None
    return (registration.leader == broker_id and partition is not None and partition.is_leader
            and partition.leader_epoch == registration.leader_epoch)


def follows(sim: Simulation, broker_id: int, leader_id: int) -> bool:
    broker = sim.brokers[broker_id]
    partition = broker.partition() if broker is not None else None
    return (partition is not None and partition.leader_id == leader_id
            and partition.leader_epoch == sim.registration().leader_epoch)


def unfenced(sim: Simulation, broker_id: int) -> bool:
    broker = sim.brokers[broker_id]
    registered = sim.controller.image.brokers.get(broker_id)
    return (broker is not None and registered is not None and not registered.fenced
            and registered.broker_epoch == broker.broker_epoch)


def produce_ids(sim: Simulation, broker_id: int) -> list[int]:
    return [batch.produce_id for batch in sim.log_of(broker_id)]


async def acknowledged(sim: Simulation, broker_id: int) -> int:
    produce_id, result = sim.produce(broker_id, ACKS_ALL)
    assert result.error == ErrorCode.none
    await until(sim, lambda: produce_id in sim.acked, f"p{produce_id} acknowledged")
    return produce_id


def test_kip101_scenario_1_a_restarted_follower_keeps_records_above_its_high_watermark(tmp_path: Path) -> None:
    async def body(sim: Simulation) -> None:
        await until(sim, lambda: leads(sim, A) and follows(sim, B, A), "A leads, B follows")
        m1 = await acknowledged(sim, A)
        m2, _ = sim.produce(A, ACKS_ALL)
        await until(sim, lambda: replica(sim, B).log_end_offset == 2, "B holds m2")
        # B's next fetch moves A's high watermark to 2 and acknowledges m2; the answer that would
        # tell B so is lost, so B holds m2 above its own high watermark.
        sim.blocked.add((A, B))
        await until(sim, lambda: m2 in sim.acked, "m2 acknowledged")
        assert (replica(sim, A).high_watermark, replica(sim, B).high_watermark) == (2, 1)

        before = sim.registration().partition_epoch
        sim.crash(B)
        sim.restart(B)
        sim.blocked.clear()
        broker_b = sim.brokers[B]
        assert broker_b is not None
        # Before KIP-101 the restarted B cut its log to this mark (1): m2 would be gone.
        assert broker_b.log_manager.checkpointed_high_watermark("sim", 0) <= 1
        assert produce_ids(sim, B) == [m1, m2]
        await until(sim, lambda: unfenced(sim, B) and sim.registration().isr == (A, B)
                    and sim.registration().partition_epoch >= before + 2, "the new B back in the ISR")

        sim.crash(A)  # right away: B is elected from the ISR
        await until(sim, lambda: leads(sim, B), "B leads")
        assert produce_ids(sim, B)[:2] == [m1, m2]
        m3 = await acknowledged(sim, B)
        sim.restart(A)
        await until(sim, sim.converged, "replicas converge")
        assert produce_ids(sim, A) == produce_ids(sim, B) == [m1, m2, m3]
        assert {sim.acked[m] for m in (m1, m2, m3)} == {0, 1, 2}

    scripted(tmp_path, Script(replicas=(A, B), min_isr=1), body)


def test_kip101_scenario_2_the_old_leaders_unreplicated_tail_is_truncated(tmp_path: Path) -> None:
    async def body(sim: Simulation) -> None:
        await until(sim, lambda: leads(sim, A) and follows(sim, B, A), "A leads, B follows")
        m1 = await acknowledged(sim, A)
        await until(sim, lambda: replica(sim, B).high_watermark == 1, "B knows m1 is committed")
        sim.blocked.add((B, A))  # B's fetches no longer reach A
        m2, _ = sim.produce(A, ACKS_ALL)  # waits for B, which never gets it
        await sim.step()
        sim.crash(A)
        sim.blocked.clear()
        await until(sim, lambda: leads(sim, B), "B leads")
        m3 = await acknowledged(sim, B)
        assert sim.acked[m3] == 1 and m2 not in sim.acked

        sim.restart(A)
        assert produce_ids(sim, A) == [m1, m2]  # offset 1 differs between A and B: m2 / m3
        await until(sim, sim.converged, "replicas converge")
        assert produce_ids(sim, A) == produce_ids(sim, B) == [m1, m3]

    scripted(tmp_path, Script(replicas=(A, B), min_isr=1), body)


def test_kip101_scenario_2_with_the_high_watermark_past_the_diverging_record(tmp_path: Path) -> None:
    """The KIP's own form: A's high watermark covers m2 (acknowledged while the ISR was A alone),
    B lacks it and is elected anyway — only an unclean election can do that, and it is enabled
    here (so the per-step invariants are off: this election loses m2 by design). A comes back with
    m2 below its high watermark and must still end with B's log, not a divergent one."""
    async def body(sim: Simulation) -> None:
        await until(sim, lambda: leads(sim, A) and follows(sim, B, A), "A leads, B follows")
        m1 = await acknowledged(sim, A)
        sim.blocked.add((B, A))
        m2, _ = sim.produce(A, ACKS_ALL)
        # replica.lag.time.max.ms later A drops B from the ISR, and m2 is committed on A alone.
        await until(sim, lambda: m2 in sim.acked, "m2 acknowledged with the ISR shrunk to A")
        assert sim.registration().isr == (A,) and replica(sim, A).high_watermark == 2
        sim.crash(A)
        sim.blocked.clear()
        await until(sim, lambda: leads(sim, B), "B leads (unclean)")
        m3 = await acknowledged(sim, B)
        assert sim.acked[m3] == 1

        sim.restart(A)
        assert produce_ids(sim, A) == [m1, m2]
        await until(sim, sim.converged, "replicas converge")
        assert produce_ids(sim, A) == produce_ids(sim, B) == [m1, m3]

    scripted(tmp_path, Script(replicas=(A, B), min_isr=1, unclean_leader_election=True, checked=False), body)


def test_kip279_fast_double_failover_truncates_to_the_last_common_epoch(tmp_path: Path) -> None:
    async def body(sim: Simulation) -> None:
        await until(sim, lambda: leads(sim, A) and follows(sim, B, A), "A leads, B follows")
        first = [await acknowledged(sim, A) for _ in range(3)]
        epoch_a = sim.registration().leader_epoch

        sim.blocked.add((B, A))
        x, answer = sim.produce(A, ACKS_LEADER)  # offset 3 in A's epoch, never replicated
        assert answer.base_offset == 3
        await sim.step()
        sim.crash(A)
        await until(sim, lambda: leads(sim, B), "B leads")
        epoch_b = sim.registration().leader_epoch
        y, answer = sim.produce(B, ACKS_LEADER)  # offset 3 in B's epoch: below min ISR, not committed
        assert answer.base_offset == 3

        # A returns but never reaches B, then B fails too: the fast failover back to A (unclean:
        # the ISR is B alone) — A leads an epoch after B's without ever having seen it.
        sim.blocked.add((A, B))
        sim.restart(A)
        await until(sim, lambda: unfenced(sim, A) and follows(sim, A, B), "A back, following B")
        sim.crash(B)
        await until(sim, lambda: leads(sim, A), "A leads again")
        assert sim.registration().leader_epoch > epoch_b > epoch_a
        z, answer = sim.produce(A, ACKS_LEADER)
        assert answer.base_offset == 4
        assert produce_ids(sim, A) == [*first, x, z]

        # B comes back with y at offset 3 from an epoch A does not have. A answers B's fetch with
        # DivergingEpoch (A's epoch, 4): the largest epoch not above B's, and where it ends; B
        # truncates to where that epoch ends in its own log (3), dropping y.
        sim.blocked.clear()
        sim.restart(B)
        assert produce_ids(sim, B) == [*first, y]
        await until(sim, sim.converged, "replicas converge")
        assert produce_ids(sim, A) == produce_ids(sim, B) == [*first, x, z]
        last = await acknowledged(sim, A)
        assert all(m in sim.acked for m in [*first, last])

    scripted(tmp_path, Script(replicas=(A, B), min_isr=2, unclean_leader_election=True), body)


def test_an_isr_expansion_whose_answer_is_lost_still_counts_for_the_high_watermark(tmp_path: Path) -> None:
    """KIP-497's maximal ISR when AlterPartition's outcome is unknown: the controller applies A's
    expansion back to [A, B, C] but the answer is lost (the controller's link to A drops). A must
    go on counting B for the high watermark (and retry) until the controller's registration
    arrives; if it fell back to [A, C], it would acknowledge a record B lacks, and the controller,
    electing B from its ISR when A dies, would lose it (found by the simulation)."""
    C = 3

    async def body(sim: Simulation) -> None:
        await until(sim, lambda: leads(sim, A) and follows(sim, B, A) and follows(sim, C, A), "A leads")
        first = await acknowledged(sim, A)
        sim.blocked.add((B, A))
        sim.produce(A, ACKS_LEADER)  # B cannot fetch it
        await until(sim, lambda: replica(sim, A).isr == [A, C] and replica(sim, A).pending_isr is None,
                    "B out of the ISR (lagging)")
        epoch = sim.registration().partition_epoch
        sim.blocked.discard((B, A))
        sim.blocked.add((CONTROLLER, A))  # from here A hears nothing from the controller
        await until(sim, lambda: sim.registration().isr == (A, B, C), "the controller applies B's return")
        assert sim.registration().partition_epoch == epoch + 1
        sim.blocked.add((B, A))  # and B stops fetching again
        at_risk, _ = sim.produce(A, ACKS_ALL)
        for _ in range(50):  # 500 ms: past the AlterPartition timeout and replica.lag.time.max.ms
            await sim.step()
        sim.crash(A)
        sim.blocked.clear()
        await until(sim, lambda: leads(sim, B), "B leads (first in the controller's ISR)")
        sim.restart(A)
        await until(sim, sim.converged, "replicas converge")
        assert produce_ids(sim, B)[0] == first
        assert at_risk not in sim.acked or at_risk in produce_ids(sim, B)

    scripted(tmp_path, Script(replicas=(A, B, C), min_isr=2), body)
