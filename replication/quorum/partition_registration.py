"""PartitionRegistration: the controller's record of one partition's replicas and leadership.

Kafka's ``PartitionRegistration``: who the replicas are, which are in sync, who leads and at
which leader epoch. The partition epoch counts every change (leader or ISR), so an ISR change
proposed against an old partition epoch is refused (AlterPartition's INVALID_UPDATE_VERSION).
Invariants: ``isr`` is a subset of ``replicas``; ``leader`` is -1 or a member of ``isr``
(after an unclean election the ISR is just the new leader); every change that moves the
leader bumps ``leader_epoch``; ``adding`` and ``removing`` are subsets of ``replicas``.
"""

from __future__ import annotations

from dataclasses import dataclass

NO_LEADER = -1


@dataclass(slots=True, frozen=True)
class PartitionRegistration:
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    leader: int
    leader_epoch: int
    partition_epoch: int
    # KIP-966 Eligible Leader Replicas: replicas that left the ISR while it was below
    # min.insync.replicas and still hold every committed record.
    elr: tuple[int, ...] = ()
    last_known_elr: tuple[int, ...] = ()
    # KIP-455 reassignment in progress: replicas being added (target replicas not yet in sync)
    # and removed (current replicas not in the target); ``replicas`` holds both meanwhile.
    adding: tuple[int, ...] = ()
    removing: tuple[int, ...] = ()
