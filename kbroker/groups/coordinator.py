"""GroupCoordinator: the group service the group APIs call, as Kafka's GroupMetadataManager.

It owns the one map of groups of every type (``GroupRegistry``) and routes each request by the
type of the group its id stands for: classic groups to the ClassicGroupCoordinator, classic
members of a consumer group to ``classic_members.py``, consumer groups to the
ConsumerGroupCoordinator (which the composition root builds over this service's map and
attaches as ``consumer``). It also runs the offsets retention check, whose rules differ by type.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from kbroker.groups import classic_members
from kbroker.groups.classic_coordinator import ClassicGroupCoordinator
from kbroker.groups.classic_group import ClassicGroup, JoinResult, SyncResult
from kbroker.groups.group_registry import GroupRegistry, Ownership
from kbroker.groups.group_settings import GroupCoordinatorSettings
from kbroker.protocol.errors import ErrorCode, KafkaError
from kbroker.storage.clock import SYSTEM_CLOCK, Clock

if TYPE_CHECKING:
    from kbroker.groups.consumer_coordinator import CommitPartitionCheck, ConsumerGroupCoordinator
    from kbroker.groups.consumer_group import ConsumerGroup
    from kbroker.groups.offset_store import OffsetAndMetadata, OffsetStore


class GroupCoordinator:
    def __init__(self, offset_store: OffsetStore, settings: GroupCoordinatorSettings,
                 clock: Clock = SYSTEM_CLOCK) -> None:
        self.store = offset_store
        self.clock = clock
        self.registry = GroupRegistry()
        self.classic = ClassicGroupCoordinator(offset_store, settings.classic, self.registry, clock)
        # KIP-848 consumer groups: attached by the composition root once it has the controller
        # (None: this service coordinates classic groups only).
        self.consumer: ConsumerGroupCoordinator | None = None
        self.min_session_ms = settings.min_session_timeout_ms
        self.max_session_ms = settings.max_session_timeout_ms
        self.retention_ms = settings.offsets_retention_ms
        self.retention_check_s = settings.offsets_retention_check_interval_ms / 1000
        self._retention_timer: asyncio.TimerHandle | None = None

    @property
    def ownership(self) -> Ownership | None:
        """Which offsets partitions this broker coordinates (None: all); set by the broker."""
        return self.registry.ownership

    @ownership.setter
    def ownership(self, ownership: Ownership | None) -> None:
        self.registry.ownership = ownership

    @property
    def groups(self) -> dict[str, ClassicGroup]:
        """The classic groups of the one map (a snapshot; consumer groups: ``consumer.groups``)."""
        return self.registry.classic_groups()

    def coordinator_error(self, group_id: str) -> ErrorCode:
        return self.registry.coordinator_error(group_id)

    def _consumer_group(self, group_id: str) -> tuple[ConsumerGroupCoordinator, ConsumerGroup] | None:
        """The consumer coordinator and the group, if ``group_id`` stands for a consumer group."""
        group = self.registry.consumer(group_id)
        if group is None or self.consumer is None:
            return None
        return self.consumer, group

    # ----- start and stop --------------------------------------------------------------------

    def start(self) -> None:
        """Arm the timers (needs the running loop): loaded members' sessions, offsets retention."""
        self.classic.arm_sessions(set(self.groups))
        self._retention_timer = asyncio.get_running_loop().call_later(self.retention_check_s, self._expire_offsets)

    def stop(self) -> None:
        """Shutdown: parked JoinGroup/SyncGroup requests are told to find the coordinator again."""
        if self._retention_timer is not None:
            self._retention_timer.cancel()
        self.classic.stop()

    # ----- classic group APIs ------------------------------------------------------------------

    async def join(self, group_id: str, member_id: str, instance_id: str | None, protocol_type: str,
                   protocols: list[tuple[str, bytes]], session_ms: int, rebalance_ms: int, client_id: str,
                   client_host: str, require_known_member_id: bool) -> JoinResult:
        if not group_id:
            return JoinResult(ErrorCode.invalid_group_id, member_id)
        if self.coordinator_error(group_id):
            return JoinResult(self.coordinator_error(group_id), member_id)
        if not self.min_session_ms <= session_ms <= self.max_session_ms:
            return JoinResult(ErrorCode.invalid_session_timeout, member_id)
        consumer = self._consumer_group(group_id)
        if consumer is not None:
            cc, group = consumer
            if group.members:
                return classic_members.join(cc, group, member_id, instance_id, protocol_type, protocols,
                                            session_ms, rebalance_ms, client_id, client_host,
                                            require_known_member_id)
            if not cc.release_to_classic(group_id):  # an Empty consumer group turns classic
                return JoinResult(ErrorCode.inconsistent_group_protocol, member_id)
        return await self.classic.join(group_id, member_id, instance_id, protocol_type, protocols, session_ms,
                                       rebalance_ms, client_id, client_host, require_known_member_id)

    async def sync(self, group_id: str, generation: int, member_id: str, instance_id: str | None,
                   protocol_type: str | None, protocol_name: str | None,
                   assignments: dict[str, bytes]) -> SyncResult:
        if self.coordinator_error(group_id):
            return SyncResult(self.coordinator_error(group_id))
        consumer = self._consumer_group(group_id)
        if consumer is not None:
            return classic_members.sync(*consumer, generation, member_id, instance_id, protocol_type, protocol_name)
        return await self.classic.sync(group_id, generation, member_id, instance_id, protocol_type, protocol_name,
                                       assignments)

    def heartbeat(self, group_id: str, generation: int, member_id: str, instance_id: str | None) -> ErrorCode:
        if self.coordinator_error(group_id):
            return self.coordinator_error(group_id)
        consumer = self._consumer_group(group_id)
        if consumer is not None:
            return classic_members.heartbeat(*consumer, generation, member_id, instance_id)
        return self.classic.heartbeat(group_id, generation, member_id, instance_id)

    def leave(self, group_id: str, members: list[tuple[str, str | None]]) -> tuple[ErrorCode, list[ErrorCode]]:
        """Top-level error and one error per (member id, instance id) leaving."""
        if self.coordinator_error(group_id):
            return self.coordinator_error(group_id), []
        consumer = self._consumer_group(group_id)
        if consumer is not None:
            return classic_members.leave(*consumer, members)
        return self.classic.leave(group_id, members)

    # ----- offsets and group administration ------------------------------------------------------

    def validate_commit(self, group_id: str, generation: int, member_id: str, instance_id: str | None,
                        api_version: int, transactional: bool = False) -> CommitPartitionCheck | None:
        """Raises the error an OffsetCommit (or, ``transactional``, a TxnOffsetCommit) gets for this
        group: member epochs for a consumer group, Kafka's classic-group checks otherwise. An
        OffsetCommit at an older member epoch returns the check each partition must pass."""
        if self.coordinator_error(group_id):
            raise KafkaError(self.coordinator_error(group_id))
        consumer = self._consumer_group(group_id)
        if consumer is None:
            self.classic.validate_commit(group_id, generation, member_id, instance_id, api_version, transactional)
            return None
        cc, group = consumer
        if not transactional:
            return cc.validate_commit(group, member_id, generation, api_version)
        # Kafka: no API-version rule for a transactional commit, and a stale epoch is ILLEGAL_GENERATION;
        # one that names no member at all (generation -1, no member or instance id) is accepted.
        # Deviation: Kafka 4.3 checks an older epoch partition by partition here too.
        if generation < 0 and not group.members:
            return None
        if generation == -1 and not member_id and instance_id is None:
            return None
        member = group.members.get(member_id)
        if member is None:
            raise KafkaError(ErrorCode.unknown_member_id)
        if generation != member.member_epoch:
            raise KafkaError(ErrorCode.illegal_generation)
        return None

    def commit(self, group_id: str, offsets: dict[tuple[str, int], OffsetAndMetadata]) -> None:
        self.store.commit(group_id, offsets)

    def delete_group(self, group_id: str) -> ErrorCode:
        if self.coordinator_error(group_id):
            return self.coordinator_error(group_id)
        consumer = self._consumer_group(group_id)
        if consumer is None:
            return self.classic.delete_group(group_id)
        error = consumer[0].delete_group(group_id)
        if error == ErrorCode.none:
            self.store.delete_group(group_id)
        return error

    def validate_offset_delete(self, group_id: str) -> tuple[ClassicGroup | ConsumerGroup, set[str] | None]:
        """The group and the topics it is subscribed to (None: every topic counts as subscribed)."""
        if self.coordinator_error(group_id):
            raise KafkaError(self.coordinator_error(group_id))
        consumer = self._consumer_group(group_id)
        if consumer is not None:
            return consumer[1], set(consumer[1].subscription_metadata)
        return self.classic.validate_offset_delete(group_id)

    def _expire_offsets(self) -> None:
        """The offsets.retention.check.interval.ms timer."""
        self._retention_timer = asyncio.get_running_loop().call_later(self.retention_check_s, self._expire_offsets)
        self.expire_offsets(self.clock.wall_ms())

    def expire_offsets(self, now_ms: int) -> None:
        """offsets.retention.minutes at ``now_ms``, by each group type's rules."""
        self.classic.expire_offsets(now_ms, self.retention_ms)
        if self.consumer is not None:
            self.consumer.expire_offsets(now_ms, self.retention_ms)
