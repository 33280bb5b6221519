"""Partition leadership and ISR changes, classified and counted for /metrics.

Each change is counted where Kafka counts it, as it happens, so one that reverts before
Prometheus scrapes counts too:

- a leader broker counts ReplicaManager ``IsrShrinksPerSec`` / ``IsrExpandsPerSec`` when the
  controller accepts the ISR change it proposed (AlterPartition's answer);
- the active controller counts ControllerStats ``LeaderElectionRateAndTimeMs`` and
  ``UncleanLeaderElectionsPerSec`` for the elections it commits: its MetadataImage hands each
  PartitionRecord's (before, after) registrations to ``Elections.replayed`` as it applies them.

``leader_change`` is the one rule for what kind of leadership change a record is; the console's
replication timeline uses it too.
"""

from __future__ import annotations

from collections.abc import Iterable

from kbroker.replication.quorum.partition_registration import PartitionRegistration

OFFLINE = "offline"
LEADER_EPOCH_BUMP = "leader_epoch_bump"
ELECTION = "election"
UNCLEAN_ELECTION = "unclean_election"


def leader_change(before: PartitionRegistration, after: PartitionRegistration) -> str | None:
    """What the leadership did between two registrations of a partition: None (unchanged),
    ``offline`` (no leader now), ``leader_epoch_bump`` (the same leader at a new epoch),
    ``election`` (a new leader from the ISR or the KIP-966 ELR before it) or
    ``unclean_election`` (a new leader from outside both: unclean.leader.election.enable)."""
    if after.leader_epoch == before.leader_epoch and after.leader == before.leader:
        return None
    if after.leader < 0:
        return OFFLINE
    if after.leader == before.leader:
        return LEADER_EPOCH_BUMP
    if after.leader in before.isr or after.leader in before.elr:
        return ELECTION
    return UNCLEAN_ELECTION


class IsrChanges:
    """A leader's ISR shrinks and expansions, counted when the controller accepts an ISR change
    the leader proposed in AlterPartition, where Kafka's Partition marks IsrShrinksPerSec /
    IsrExpandsPerSec. The controller's own ISR changes (a fenced follower taken out, the ISR an
    election leaves) are not the leader's and are not counted, as in Kafka."""

    def __init__(self) -> None:
        self.shrinks = 0
        self.expands = 0

    def committed(self, before: Iterable[int], after: Iterable[int]) -> None:
        """The controller answered the leader's AlterPartition with ISR ``after`` (from ``before``)."""
        old, new = set(before), set(after)
        self.shrinks += new < old
        self.expands += new > old


class Elections:
    """The elections an active controller committed (it applies each record it commits to its
    image at once; a standby applies none)."""

    def __init__(self) -> None:
        self.elections = 0
        self.unclean = 0

    def replayed(self, _topic: str, _index: int, before: PartitionRegistration | None,
                 after: PartitionRegistration) -> None:
        if before is None:
            return
        kind = leader_change(before, after)
        if kind == ELECTION or kind == UNCLEAN_ELECTION:
            self.elections += 1
            self.unclean += kind == UNCLEAN_ELECTION
