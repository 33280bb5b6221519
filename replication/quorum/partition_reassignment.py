"""Partition reassignment (KIP-455): how a partition's registration moves to new replicas.

Starting a reassignment to target replicas T from current replicas R makes the replica set
T followed by R − T (the removing replicas), with ``adding`` = T − R; the ISR and the leader do
not change, and the adding replicas start following the leader. Once every target replica is
in the ISR the reassignment completes: the replicas become T, the ISR loses the removed ones,
and a leader outside T hands over to the first in-sync target replica (new leader epoch).
Cancelling goes back to the original replicas (R without the adding ones). Pure functions:
the QuorumController writes what they return as PartitionRecords.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from .partition_registration import NO_LEADER, PartitionRegistration


def start(reg: PartitionRegistration, target: Sequence[int]) -> PartitionRegistration:
    original = original_replicas(reg)
    adding = tuple(r for r in target if r not in original)
    removing = tuple(r for r in original if r not in target)
    return replace(reg, replicas=(*target, *removing), adding=adding, removing=removing,
                   partition_epoch=reg.partition_epoch + 1)


def cancel(reg: PartitionRegistration) -> PartitionRegistration:
    original = original_replicas(reg)
    isr = tuple(r for r in reg.isr if r in original) or reg.isr
    return _with_leader(replace(reg, replicas=original, isr=isr, adding=(), removing=(),
                                partition_epoch=reg.partition_epoch + 1))


def original_replicas(reg: PartitionRegistration) -> tuple[int, ...]:
    """The replicas before the reassignment in progress (all of them when there is none)."""
    return tuple(r for r in reg.replicas if r not in reg.adding)


def target_replicas(reg: PartitionRegistration) -> tuple[int, ...]:
    return tuple(r for r in reg.replicas if r not in reg.removing)


def maybe_complete(reg: PartitionRegistration) -> PartitionRegistration:
    """The finished registration if every target replica is in sync, else ``reg`` unchanged."""
    if not (reg.adding or reg.removing):
        return reg
    target = target_replicas(reg)
    if any(r not in reg.isr for r in target):
        return reg
    isr = tuple(r for r in reg.isr if r in target)
    elr = tuple(r for r in reg.elr if r in target)
    return _with_leader(replace(reg, replicas=target, isr=isr, elr=elr, adding=(), removing=()))


def _with_leader(reg: PartitionRegistration) -> PartitionRegistration:
    if reg.leader in reg.replicas:
        return reg
    leader = next((r for r in reg.replicas if r in reg.isr), NO_LEADER)
    return replace(reg, leader=leader, leader_epoch=reg.leader_epoch + 1)
