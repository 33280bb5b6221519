"""Partition leadership and ISR changes, classified and counted as a node replays metadata.

Every decision about a partition reaches each node as a PartitionRecord, which the node's
MetadataImage applies; the image hands each (before, after) pair of registrations to a listener.
Counting there sees every committed change, also one that reverts before Prometheus scrapes:

- a broker counts Kafka's ReplicaManager ``IsrShrinksPerSec`` / ``IsrExpandsPerSec`` for the
  partitions it leads (the same leader before and after, so an ISR change that comes with an
  election is the controller's decision, not this leader's), once it serves clients (the
  records it replays while starting are history, which Kafka's meters do not hold either);
- the active controller counts ControllerStats ``LeaderElectionRateAndTimeMs`` and
  ``UncleanLeaderElectionsPerSec`` for the elections it commits.

``leader_change`` is the one rule for what kind of leadership change a record is; the console's
replication timeline uses it too.
"""

from __future__ import annotations

from collections.abc import Callable

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
    """A broker's ISR shrinks and expansions of the partitions it leads."""

    def __init__(self, node_id: int, serving: Callable[[], bool]) -> None:
        self.node_id = node_id
        self.serving = serving  # False while the broker replays history at start-up
        self.shrinks = 0
        self.expands = 0

    def replayed(self, _topic: str, _index: int, before: PartitionRegistration | None,
                 after: PartitionRegistration) -> None:
        if (before is None or after.leader != self.node_id or before.leader != self.node_id
                or after.isr == before.isr or not self.serving()):
            return
        self.shrinks += not set(before.isr) <= set(after.isr)
        self.expands += not set(after.isr) <= set(before.isr)


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
