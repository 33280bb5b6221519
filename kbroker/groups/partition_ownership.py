"""GroupPartitionOwnership: which ``__consumer_offsets`` partitions this broker coordinates.

A group is coordinated by the leader of the offsets partition its id hashes to, and that moves:
when this broker becomes the leader of an offsets partition it replays it and takes over its
groups (Kafka's ``onElection``), and when it stops leading the groups are dropped — members
parked in JoinGroup/SyncGroup get NOT_COORDINATOR, so clients look the coordinator up again
(``onResignation``). Requests for a group of a partition not owned here get NOT_COORDINATOR.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from kbroker.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from kbroker.groups.consumer_coordinator import ConsumerGroupCoordinator
    from kbroker.groups.coordinator import GroupCoordinator
    from kbroker.groups.offset_store import OffsetStore

log = logging.getLogger(__name__)


class GroupPartitionOwnership:
    def __init__(self, store: OffsetStore, groups: GroupCoordinator, consumer: ConsumerGroupCoordinator) -> None:
        self.store = store
        self.groups = groups
        self.consumer = consumer
        self.owned: set[int] = set()  # nothing until elected leader of an offsets partition

    def error_for(self, group_id: str) -> ErrorCode:
        if self.store.partition_for(group_id) in self.owned:
            return ErrorCode.none
        return ErrorCode.not_coordinator

    def on_leadership(self, index: int, leader: bool) -> None:
        """The broker became (or stopped being) the leader of offsets partition ``index``."""
        if leader and index not in self.owned:
            self.store.load_partition(index)
            loaded = set(self.store.loaded_groups)
            self.groups.classic.load()
            self.consumer.load(self.store.consumer_group_records)
            self.store.consumer_group_records.clear()
            self.groups.classic.arm_sessions(loaded)
            self.owned.add(index)
            log.info("coordinating the groups of __consumer_offsets-%d", index)
        elif not leader and index in self.owned:
            self.owned.discard(index)
            groups = {g for g in self.groups.registry.ids() if self.store.partition_for(g) == index}
            self.groups.classic.unload(groups)
            self.consumer.unload(groups)
            self.store.unload_partition(index)
            log.info("no longer coordinating the groups of __consumer_offsets-%d", index)
