"""A KIP-848 consumer group: group epoch, target assignment, members and their reconciliation.

The model follows KIP-848 and Kafka's ConsumerGroup / CurrentAssignmentBuilder:

- The **group epoch** is bumped whenever something that changes the target assignment
  changes: a member joins, leaves or is fenced, a subscription changes, or a subscribed
  topic appears, disappears or grows partitions (the "subscription metadata").
- The **target assignment** is computed by a server-side assignor for the current group epoch;
  its epoch is the **assignment epoch**. Here it is computed as soon as the group epoch moves
  (Kafka may defer it), so the Assigning state is never observed for long.
- Each member converges on its target independently, only when it heartbeats:
  partitions it must give up are revoked first (state UNREVOKED_PARTITIONS, member epoch
  unchanged) and the member must confirm by no longer listing them as owned; a member gets
  a newly assigned partition only once no other member holds it (assigned or pending
  revocation); partitions still held elsewhere leave it in UNRELEASED_PARTITIONS. Its member
  epoch jumps to the assignment epoch once nothing is left to revoke.
- ``partition_owner_epoch`` records, for every partition some member holds (assigned or
  pending revocation), that member's epoch: the "is it free?" test above.
- Each member keeps the **assignment epoch of each partition** it holds: the member epoch at
  which the partition became its own (Kafka 4.3's per-partition epochs). An OffsetCommit at an
  older member epoch is accepted for a partition held since that epoch or earlier.

State names (Empty, Assigning, Reconciling, Stable, Dead) are those Kafka reports in
ListGroups / DescribeGroups / ConsumerGroupDescribe.
"""

from __future__ import annotations

import asyncio
import enum
import re
import uuid
from dataclasses import dataclass, field

from kbroker.groups.assignors import Assignment

# topic name -> (topic id, partition count)
TopicMap = dict[str, tuple[uuid.UUID, int]]

LEAVE_EPOCH = -1
LEAVE_STATIC_EPOCH = -2


class GroupState(enum.Enum):
    EMPTY = "Empty"
    ASSIGNING = "Assigning"
    RECONCILING = "Reconciling"
    STABLE = "Stable"
    DEAD = "Dead"


class MemberState(enum.Enum):
    STABLE = "stable"
    UNREVOKED_PARTITIONS = "unrevoked_partitions"
    UNRELEASED_PARTITIONS = "unreleased_partitions"


def copy_assignment(assignment: Assignment) -> Assignment:
    return {t: set(ps) for t, ps in assignment.items() if ps}


def is_subset(owned: Assignment | None, of: Assignment) -> bool:
    """Whether every partition of ``owned`` is in ``of`` (a null list is no proof: False)."""
    if owned is None:
        return False
    return all(ps <= of.get(t, set()) for t, ps in owned.items())


@dataclass(slots=True, eq=False)
class ConsumerMember:
    member_id: str
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    rebalance_timeout_ms: int = 300_000
    subscribed_topic_names: list[str] = field(default_factory=list)
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    member_epoch: int = 0
    previous_member_epoch: int = -1
    state: MemberState = MemberState.STABLE
    assigned: Assignment = field(default_factory=dict)
    pending_revocation: Assignment = field(default_factory=dict)
    # (topic id, partition) -> member epoch at which it was assigned; a held partition missing
    # here (one restored from the log, which does not keep these) counts from the current epoch
    partition_epochs: dict[tuple[uuid.UUID, int], int] = field(default_factory=dict)
    session_timer: asyncio.TimerHandle | None = None
    rebalance_timer: asyncio.TimerHandle | None = None
    # a classic member (JoinGroup/SyncGroup/Heartbeat): its session timeout and protocols
    classic: tuple[int, list[tuple[str, bytes]]] | None = None

    def partition_epoch(self, topic_id: uuid.UUID, partition: int) -> int | None:
        """The epoch ``partition`` was assigned to this member at, None if it holds it not
        (assigned or pending revocation)."""
        if partition not in self.assigned.get(topic_id, ()) and partition not in self.pending_revocation.get(
                topic_id, ()):
            return None
        return self.partition_epochs.get((topic_id, partition), self.member_epoch)

    def cancel_timers(self) -> None:
        for timer in (self.session_timer, self.rebalance_timer):
            if timer is not None:
                timer.cancel()
        self.session_timer = self.rebalance_timer = None


def compile_regex(pattern: str) -> re.Pattern[str]:
    """Compile a subscription regex with RE2/J semantics as far as Python's ``re`` allows.

    Kafka uses RE2/J and matches whole topic names (``matches()``): here ``fullmatch``. RE2/J
    rejects lookarounds and backreferences, which Python accepts, so they are refused here
    too (INVALID_REGULAR_EXPRESSION). Remaining differences: RE2/J's Unicode classes
    (``\\p{...}``) and possessive quantifiers are not supported by ``re`` (refused here); ``re``
    accepts a few constructs RE2/J does not, like conditionals ``(?(1)..)``, which are refused.
    """
    if re.search(r"\(\?<?[=!]|\\[1-9]|\(\?\(|\(\?P=", pattern):
        raise ValueError("lookarounds, backreferences and conditionals are not supported by RE2/J")
    return re.compile(pattern)


class ConsumerGroup:
    """One consumer group's state (the coordinator owns timers and the heartbeat flow)."""

    def __init__(self, group_id: str) -> None:
        self.group_id = group_id
        # Kafka 4.3 starts a new group at epoch 1, so its first member's join bumps it to 2 and
        # no member of a live group ever holds the epoch 0 a joining member sends.
        self.group_epoch = 1
        self.assignment_epoch = 0
        self.assignor_name = ""
        self.members: dict[str, ConsumerMember] = {}
        self.static_members: dict[str, str] = {}  # instance id -> member id
        self.target: dict[str, Assignment] = {}  # member id -> target assignment
        self.partition_owner_epoch: dict[tuple[uuid.UUID, int], int] = {}
        # name -> (topic id, partition count) of every topic some member subscribes to
        self.subscription_metadata: TopicMap = {}
        self.dead = False

    # ----- state -------------------------------------------------------------------------

    @property
    def state(self) -> GroupState:
        if self.dead:
            return GroupState.DEAD
        if not self.members:
            return GroupState.EMPTY
        if self.group_epoch > self.assignment_epoch:
            return GroupState.ASSIGNING
        for member in self.members.values():
            if member.member_epoch != self.assignment_epoch or member.state is not MemberState.STABLE:
                return GroupState.RECONCILING
        return GroupState.STABLE

    def member_subscribed_topics(self, member: ConsumerMember, topics: TopicMap) -> set[str]:
        """The names of existing topics ``member`` subscribes to (by name or regex). Internal
        topics (``__``-prefixed, as ``__consumer_offsets``) never match a regex."""
        names = {n for n in member.subscribed_topic_names if n in topics}
        if member.subscribed_topic_regex:
            try:
                pattern = compile_regex(member.subscribed_topic_regex)
            except (ValueError, re.error):
                return names
            names |= {n for n in topics if not n.startswith("__") and pattern.fullmatch(n)}
        return names

    def compute_subscription_metadata(self, topics: TopicMap) -> TopicMap:
        wanted: set[str] = set()
        for member in self.members.values():
            wanted |= self.member_subscribed_topics(member, topics)
        return {name: topics[name] for name in sorted(wanted)}

    # ----- partition ownership -----------------------------------------------------------

    def owner_epoch(self, topic_id: uuid.UUID, partition: int) -> int:
        return self.partition_owner_epoch.get((topic_id, partition), -1)

    def release(self, member: ConsumerMember) -> None:
        """Forget the partitions ``member`` holds (before its update or removal)."""
        for assignment in (member.assigned, member.pending_revocation):
            for t, ps in assignment.items():
                for p in ps:
                    if self.partition_owner_epoch.get((t, p)) is not None:
                        del self.partition_owner_epoch[(t, p)]

    def claim(self, member: ConsumerMember) -> None:
        for assignment in (member.assigned, member.pending_revocation):
            for t, ps in assignment.items():
                for p in ps:
                    self.partition_owner_epoch[(t, p)] = member.member_epoch

    def remove_member(self, member_id: str) -> ConsumerMember | None:
        member = self.members.pop(member_id, None)
        if member is None:
            return None
        member.cancel_timers()
        self.release(member)
        self.target.pop(member_id, None)
        if member.instance_id and self.static_members.get(member.instance_id) == member_id:
            del self.static_members[member.instance_id]
        return member

    # ----- reconciliation ----------------------------------------------------------------

    def reconcile(self, member: ConsumerMember, owned: Assignment | None) -> bool:
        """Move ``member`` towards its target assignment given the partitions it reports
        owning (None: not reported in this heartbeat). Returns whether anything changed."""
        before = (member.member_epoch, member.state, copy_assignment(member.assigned),
                  copy_assignment(member.pending_revocation))
        self.release(member)
        if member.state is MemberState.UNREVOKED_PARTITIONS:
            if not self._owns_any(owned, member.pending_revocation):
                self._next_assignment(member, owned)
        elif member.state is MemberState.UNRELEASED_PARTITIONS or member.member_epoch != self.assignment_epoch:
            self._next_assignment(member, owned)
        self.claim(member)
        after = (member.member_epoch, member.state, member.assigned, member.pending_revocation)
        return before != after

    @staticmethod
    def _owns_any(owned: Assignment | None, partitions: Assignment) -> bool:
        """Kafka's ownsRevokedPartitions: without a reported list, assume it still owns them."""
        if owned is None:
            return True
        return any(ps & owned.get(t, set()) for t, ps in partitions.items())

    def _next_assignment(self, member: ConsumerMember, owned: Assignment | None) -> None:
        target = self.target.get(member.member_id, {})
        assigned: Assignment = {}
        revoke: Assignment = {}
        newly: Assignment = {}
        unreleased = False
        for topic_id in set(target) | set(member.assigned):
            want = target.get(topic_id, set())
            have = member.assigned.get(topic_id, set())
            if keep := have & want:
                assigned[topic_id] = keep
            if gone := have - want:
                revoke[topic_id] = gone
            free = {p for p in want - have if self.owner_epoch(topic_id, p) == -1}
            if free:
                newly[topic_id] = free
            if len(free) < len(want - have):
                unreleased = True
        held = {(t, p): member.partition_epochs.get((t, p), member.member_epoch)
                for t, ps in (*assigned.items(), *revoke.items()) for p in ps}
        if revoke and self._owns_any(owned, revoke):
            # Revocation first: the member keeps its epoch and gets nothing new until the
            # partitions it must give up are confirmed released.
            member.state = MemberState.UNREVOKED_PARTITIONS
            member.assigned, member.pending_revocation = assigned, revoke
            member.partition_epochs = held
            return
        member.state = MemberState.UNRELEASED_PARTITIONS if unreleased else MemberState.STABLE
        if member.member_epoch != self.assignment_epoch:
            member.previous_member_epoch = member.member_epoch
            member.member_epoch = self.assignment_epoch
        for topic_id, ps in newly.items():
            assigned.setdefault(topic_id, set()).update(ps)
            held.update({(topic_id, p): member.member_epoch for p in ps})
        member.assigned, member.pending_revocation = assigned, {}
        member.partition_epochs = {key: epoch for key, epoch in held.items() if key[1] in assigned.get(key[0], ())}
