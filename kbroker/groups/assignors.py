"""Server-side partition assignors of the KIP-848 consumer group protocol: "uniform" and "range".

The group coordinator (not a client) computes each consumer group's target assignment with
one of these, picked by the members' ``ServerAssignor`` (the most used one among members) or
else the first of ``group.consumer.assignors``. Kafka's class names are accepted as aliases of
the short names, so a Kafka ``server.properties`` carries over.

Both are pure functions of (members' subscriptions and current target assignment, partition
counts), so they are unit-tested without a broker.

- uniform: every partition of a subscribed topic goes to one subscribed member; no member
  holds two more than another it could hand a partition to, directly or along a chain of
  members with overlapping subscriptions; a member keeps the partitions it already had
  wherever balance allows (sticky), so a rebalance moves few partitions. Kafka splits this
  into a homogeneous and a heterogeneous builder; here one algorithm (keep, fill the least
  loaded, then shift along paths from most to least loaded) covers both, with that balance
  guarantee but not necessarily Kafka's exact placement.
- range: per topic, the subscribed members sorted by member id take contiguous ranges, the
  first ``partitions % members`` one more, as Kafka's classic RangeAssignor does (members that
  subscribe to the same topics get co-partitioned ranges). Deviation: not sticky.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field

# topic id -> partition indexes
Assignment = dict[uuid.UUID, set[int]]

UNIFORM = "uniform"
RANGE = "range"
_ALIASES = {
    "org.apache.kafka.coordinator.group.assignor.UniformAssignor": UNIFORM,
    "org.apache.kafka.coordinator.group.assignor.RangeAssignor": RANGE,
}


@dataclass(slots=True)
class MemberSubscription:
    """What an assignor knows of a member: the topic ids it subscribes to (existing topics
    only) and its current target assignment (for stickiness)."""

    topics: set[uuid.UUID]
    current: Assignment = field(default_factory=dict)


def canonical_name(name: str) -> str | None:
    """The short assignor name for a configured or requested name; None if unknown."""
    name = name.strip()
    if name in (UNIFORM, RANGE):
        return name
    return _ALIASES.get(name)


def assign(assignor: str, members: Mapping[str, MemberSubscription],
           partitions: Mapping[uuid.UUID, int]) -> dict[str, Assignment]:
    """The target assignment for every member (members without partitions map to {})."""
    if assignor == RANGE:
        return range_assign(members, partitions)
    return uniform_assign(members, partitions)


def range_assign(members: Mapping[str, MemberSubscription],
                 partitions: Mapping[uuid.UUID, int]) -> dict[str, Assignment]:
    result: dict[str, Assignment] = {member_id: {} for member_id in members}
    for topic_id, count in partitions.items():
        subscribers = sorted(m for m, sub in members.items() if topic_id in sub.topics)
        if not subscribers or count <= 0:
            continue
        base, extra = divmod(count, len(subscribers))
        start = 0
        for i, member_id in enumerate(subscribers):
            size = base + (1 if i < extra else 0)
            if size:
                result[member_id][topic_id] = set(range(start, start + size))
            start += size
    return result


def uniform_assign(members: Mapping[str, MemberSubscription],
                   partitions: Mapping[uuid.UUID, int]) -> dict[str, Assignment]:
    owner: dict[tuple[uuid.UUID, int], str] = {}
    owned: dict[str, set[tuple[uuid.UUID, int]]] = {m: set() for m in members}
    subscribers = {t: sorted(m for m, sub in members.items() if t in sub.topics) for t in partitions}
    all_partitions = [(t, p) for t in sorted(partitions) for p in range(partitions[t]) if subscribers[t]]
    # Whether every member subscribes to the same topics: then a member's fair share is known
    # up front and stickiness can be capped at it (moving fewer partitions later).
    topic_sets = {frozenset(sub.topics & partitions.keys()) for sub in members.values()}
    quota = -(-len(all_partitions) // len(members)) if members and len(topic_sets) == 1 else None

    # 1. Keep what members already had, while still subscribed (and within quota if known).
    for member_id in sorted(members):
        sub = members[member_id]
        for topic_id in sorted(sub.current):
            if topic_id not in sub.topics or topic_id not in partitions:
                continue
            for p in sorted(sub.current[topic_id]):
                tp = (topic_id, p)
                if p < partitions[topic_id] and tp not in owner and (quota is None or len(owned[member_id]) < quota):
                    owner[tp] = member_id
                    owned[member_id].add(tp)

    # 2. Give every unowned partition to the least loaded member subscribed to its topic.
    for tp in all_partitions:
        if tp not in owner:
            member_id = min(subscribers[tp[0]], key=lambda m: (len(owned[m]), m))
            owner[tp] = member_id
            owned[member_id].add(tp)

    # 3. Balance: while some member holds at least two more than another member it can reach,
    # shift one partition along the path between them (each step hands a partition to a member
    # subscribed to its topic; members in between keep their size). Each shift lowers the sum
    # of squared sizes, so this ends; with equal subscriptions every path has length one.
    while (path := _unbalancing_path(owned, subscribers)) is not None:
        for i in range(len(path) - 1):
            giver, (taker, tp) = path[i][0], path[i + 1]
            owned[giver].discard(tp)
            owned[taker].add(tp)
            owner[tp] = taker

    result: dict[str, Assignment] = {member_id: {} for member_id in members}
    for (topic_id, p), member_id in owner.items():
        result[member_id].setdefault(topic_id, set()).add(p)
    return result


def _unbalancing_path(owned: dict[str, set[tuple[uuid.UUID, int]]],
                      subscribers: dict[uuid.UUID, list[str]]) -> list[tuple[str, tuple[uuid.UUID, int]]] | None:
    """A path [(donor, _), (m1, tp1), ..., (mk, tpk)]: tp_i moves from m_{i-1} to m_i, and mk
    holds at least two fewer partitions than the donor; None when the assignment is balanced."""
    for donor in sorted(owned, key=lambda m: (-len(owned[m]), m)):
        seen = {donor}
        frontier: list[list[tuple[str, tuple[uuid.UUID, int]]]] = [[(donor, (uuid.UUID(int=0), -1))]]
        while frontier:
            next_frontier = []
            for path in frontier:
                holder = path[-1][0]
                for tp in sorted(owned[holder], key=lambda x: (str(x[0]), -x[1])):
                    for member in subscribers[tp[0]]:
                        if member in seen:
                            continue
                        seen.add(member)
                        extended = [*path, (member, tp)]
                        if len(owned[donor]) - len(owned[member]) >= 2:
                            return extended
                        next_frontier.append(extended)
            frontier = next_frontier
    return None
