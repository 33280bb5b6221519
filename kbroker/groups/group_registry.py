"""GroupRegistry: the one map of the groups this broker coordinates, of every type.

As Kafka's GroupMetadataManager keeps one ``groups`` map of classic and consumer groups, a
group id here stands for one group of one type at a time: turning a group from one type into
the other (an Empty group taken over, an online upgrade or downgrade) replaces its entry, so
the two types can never disagree about who owns an id. The registry also answers whether a
group is coordinated here at all (its ``__consumer_offsets`` partition is led by this broker).
"""

from __future__ import annotations

from typing import Protocol

from kbroker.groups.classic_group import ClassicGroup
from kbroker.groups.consumer_group import ConsumerGroup
from kbroker.protocol.errors import ErrorCode

Group = ClassicGroup | ConsumerGroup


class Ownership(Protocol):
    """Which groups are coordinated here (partition_ownership.py)."""

    def error_for(self, group_id: str) -> ErrorCode: ...


class GroupRegistry:
    def __init__(self) -> None:
        self._groups: dict[str, Group] = {}
        # None until the composition root wires partition ownership: every group is coordinated here.
        self.ownership: Ownership | None = None

    def coordinator_error(self, group_id: str) -> ErrorCode:
        """NOT_COORDINATOR when another broker leads the group's offsets partition, else NONE."""
        return ErrorCode.none if self.ownership is None else self.ownership.error_for(group_id)

    def get(self, group_id: str) -> Group | None:
        return self._groups.get(group_id)

    def classic(self, group_id: str) -> ClassicGroup | None:
        group = self._groups.get(group_id)
        return group if isinstance(group, ClassicGroup) else None

    def consumer(self, group_id: str) -> ConsumerGroup | None:
        group = self._groups.get(group_id)
        return group if isinstance(group, ConsumerGroup) else None

    def add(self, group: Group) -> None:
        """Store ``group`` under its id, replacing whatever group of either type stood there."""
        self._groups[group.group_id] = group

    def remove(self, group_id: str) -> None:
        self._groups.pop(group_id, None)

    def ids(self) -> list[str]:
        return list(self._groups)

    def classic_groups(self) -> dict[str, ClassicGroup]:
        return {gid: g for gid, g in self._groups.items() if isinstance(g, ClassicGroup)}

    def consumer_groups(self) -> dict[str, ConsumerGroup]:
        return {gid: g for gid, g in self._groups.items() if isinstance(g, ConsumerGroup)}
