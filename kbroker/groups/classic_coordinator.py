"""ClassicGroupCoordinator: the classic group protocol (join, sync, heartbeat, leave) for
classic groups, and the checks offset commits make against one, as Kafka's group coordinator does.

The group service (coordinator.py) routes a request here when its group id stands for a classic
group (or for none yet). All timing is asyncio timers (``call_later``): a member's session
timeout, the rebalance (join) timeout, group.initial.rebalance.delay.ms for a group leaving
Empty, and the sync timeout. Group metadata is persisted through the OffsetStore (the one
writer of ``__consumer_offsets``) when a generation becomes Stable or a group becomes Empty.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from typing import TYPE_CHECKING

from kbroker.coordinator_errors import coordinator_write_error
from kbroker.groups.classic_group import (
    ClassicGroup,
    GroupState,
    JoinResult,
    Member,
    SyncResult,
    leaving_member,
    resolve,
)
from kbroker.groups.offset_expiry import expire_classic_group_offsets
from kbroker.protocol.errors import ErrorCode, KafkaError
from kbroker.storage.clock import SYSTEM_CLOCK, Clock

if TYPE_CHECKING:
    from kbroker.groups.group_registry import GroupRegistry
    from kbroker.groups.group_settings import ClassicGroupSettings
    from kbroker.groups.offset_store import OffsetStore

log = logging.getLogger(__name__)

_E, _P, _C, _S, _D = (GroupState.EMPTY, GroupState.PREPARING_REBALANCE, GroupState.COMPLETING_REBALANCE,
                      GroupState.STABLE, GroupState.DEAD)


class ClassicGroupCoordinator:
    def __init__(self, offset_store: OffsetStore, settings: ClassicGroupSettings, registry: GroupRegistry,
                 clock: Clock = SYSTEM_CLOCK) -> None:
        self.store = offset_store
        self.clock = clock
        self.registry = registry
        self.initial_delay_ms = settings.initial_rebalance_delay_ms
        self.max_size = settings.max_size

    # ----- start-up -------------------------------------------------------------------------

    def load(self) -> None:
        """Groups from the replayed log: members of a stored generation come back Stable and must
        heartbeat within their session timeout; groups known only by offsets come back Empty."""
        now = self.clock.wall_ms()
        for group_id, record in self.store.loaded_groups.items():
            if record is None:
                continue
            group = ClassicGroup(group_id, now)
            group.generation_id, group.protocol_name, group.leader_id = (
                record.generation, record.protocol, record.leader)
            group.protocol_type = record.protocol_type or None
            if record.current_state_timestamp >= 0:
                group.state_timestamp = record.current_state_timestamp
            for m in record.members:
                member = Member(m.member_id, m.group_instance_id, m.client_id, m.client_host,
                                m.rebalance_timeout_ms, m.session_timeout_ms, record.protocol_type,
                                [(record.protocol or "", m.subscription)], m.assignment, is_new=False)
                group.members[m.member_id] = member
                if m.group_instance_id:
                    group.static_members[m.group_instance_id] = m.member_id
            group.state = _S if group.members else _E
            self.registry.add(group)
        for group_id, offsets in self.store.committed.items():
            if offsets:  # a group whose offsets all got tombstones (expired, deleted) is gone
                if self.registry.get(group_id) is None:
                    self.registry.add(ClassicGroup(group_id, now))
        self.store.loaded_groups.clear()

    def arm_sessions(self, group_ids: set[str]) -> None:
        for group_id in group_ids:
            group = self.registry.classic(group_id)
            for member in group.members.values() if group is not None else ():
                self.schedule_session(group, member)

    def stop(self) -> None:
        """Shutdown: parked JoinGroup/SyncGroup requests are told to find the coordinator again."""
        self.unload(set(self.registry.classic_groups()))

    def unload(self, group_ids: set[str]) -> None:
        """Drop groups (shutdown, or their partition moved): parked requests get NOT_COORDINATOR."""
        for group_id in group_ids:
            group = self.registry.classic(group_id)
            if group is not None:
                self.registry.remove(group_id)
                group.close(ErrorCode.not_coordinator)

    # ----- JoinGroup --------------------------------------------------------------------------

    async def join(self, group_id: str, member_id: str, instance_id: str | None, protocol_type: str,
                   protocols: list[tuple[str, bytes]], session_ms: int, rebalance_ms: int, client_id: str,
                   client_host: str, require_known_member_id: bool) -> JoinResult:
        """JoinGroup for a classic group (or a group id not in use), once the group service has
        checked the group id, the coordinator and the session timeout."""
        group = self.registry.classic(group_id)
        if group is None or group.is_in(_D):
            if member_id:
                return JoinResult(ErrorCode.unknown_member_id, member_id)
            group = ClassicGroup(group_id, self.clock.wall_ms())
            self.registry.add(group)
        if not group.is_in(_E) and not group.supports(protocol_type, protocols):
            return JoinResult(ErrorCode.inconsistent_group_protocol, member_id)
        if group.is_in(_E) and not (protocol_type and protocols):
            return JoinResult(ErrorCode.inconsistent_group_protocol, member_id)
        loop = asyncio.get_running_loop()
        if not member_id:
            known_static = instance_id is not None and instance_id in group.static_members
            if not known_static and len(group.members) + len(group.pending_members) >= self.max_size:
                return JoinResult(ErrorCode.group_max_size_reached, member_id)
            new_id = f"{client_id}-{uuid.uuid4()}"
            if known_static:
                return await self._replace_static_member(group, instance_id or "", new_id, protocols, session_ms,
                                                         rebalance_ms)
            if require_known_member_id and instance_id is None:
                # KIP-394: the client must come back with this id; it holds a place until its session ends.
                group.pending_members[new_id] = loop.call_later(
                    session_ms / 1000, self._expire_pending, group, new_id)
                return JoinResult(ErrorCode.member_id_required, new_id)
            member = Member(new_id, instance_id, client_id, client_host, rebalance_ms, session_ms, protocol_type,
                            protocols)
            return await self._add_member_and_rebalance(group, member)
        if member_id in group.pending_members:
            group.pending_members.pop(member_id).cancel()
            member = Member(member_id, instance_id, client_id, client_host, rebalance_ms, session_ms, protocol_type,
                            protocols)
            return await self._add_member_and_rebalance(group, member)
        error = self._validate_member(group, member_id, instance_id)
        if error:
            return JoinResult(error, member_id)
        member = group.members[member_id]
        if group.is_in(_P):
            self._update_member(member, protocols, session_ms, rebalance_ms)
            return await self._await_join(group, member)
        if group.is_in(_C) and member.matches(protocols):
            # The member missed its JoinGroup response: answer it again.
            return self._join_result(group, member)
        if group.is_in(_S) and member_id != group.leader_id and member.matches(protocols):
            return self._join_result(group, member)
        if group.is_in(_C, _S):
            self._update_member(member, protocols, session_ms, rebalance_ms)
            self.prepare_rebalance(group, f"{member_id} rejoined with changed metadata or as leader")
            return await self._await_join(group, member)
        return JoinResult(ErrorCode.unknown_member_id, member_id)

    async def _replace_static_member(self, group: ClassicGroup, instance_id: str, new_id: str,
                                     protocols: list[tuple[str, bytes]], session_ms: int,
                                     rebalance_ms: int) -> JoinResult:
        """KIP-345: a known instance id takes over its member's place (and assignment) under a new
        member id; the old id is fenced. A Stable group with unchanged metadata does not rebalance."""
        old = group.members.pop(group.static_members[instance_id])
        old.cancel_session()
        resolve(old.join_future, JoinResult(ErrorCode.fenced_instance_id, old.member_id))
        resolve(old.sync_future, SyncResult(ErrorCode.fenced_instance_id))
        unchanged = old.matches(protocols)
        group.pending_sync.discard(old.member_id)
        old.member_id = new_id
        old.join_future = old.sync_future = None
        group.members[new_id] = old
        group.static_members[instance_id] = new_id
        if group.leader_id not in group.members:
            group.leader_id = new_id
        self._update_member(old, protocols, session_ms, rebalance_ms)
        if group.is_in(_S) and unchanged:
            self.store_group(group)
            self.schedule_session(group, old)
            result = self._join_result(group, old)
            if new_id == group.leader_id:
                result.skip_assignment = True  # the leader learns the members but keeps the assignment
            return result
        self.prepare_rebalance(group, f"static member {instance_id} rejoined")
        return await self._await_join(group, old)

    def _update_member(self, member: Member, protocols: list[tuple[str, bytes]], session_ms: int,
                       rebalance_ms: int) -> None:
        member.protocols, member.session_timeout_ms, member.rebalance_timeout_ms = protocols, session_ms, rebalance_ms

    async def _add_member_and_rebalance(self, group: ClassicGroup, member: Member) -> JoinResult:
        group.members[member.member_id] = member
        if group.protocol_type is None or not group.members.keys() - {member.member_id}:
            group.protocol_type = member.protocol_type
        if member.group_instance_id:
            group.static_members[member.group_instance_id] = member.member_id
        if group.leader_id not in group.members:
            group.leader_id = member.member_id
        if group.is_in(_P):
            return await self._await_join(group, member)
        self.prepare_rebalance(group, f"adding new member {member.member_id}")
        return await self._await_join(group, member)

    async def _await_join(self, group: ClassicGroup, member: Member) -> JoinResult:
        member.join_future = asyncio.get_running_loop().create_future()
        future = member.join_future
        self.schedule_session(group, member)
        self._maybe_complete_join(group)
        return await future

    def _join_result(self, group: ClassicGroup, member: Member) -> JoinResult:
        result = JoinResult(ErrorCode.none, member.member_id, group.generation_id, group.protocol_type,
                            group.protocol_name, group.leader_id or "")
        if member.member_id == group.leader_id:
            result.members = [(m.member_id, m.group_instance_id, m.metadata(group.protocol_name))
                              for m in group.members.values()]
        return result

    # ----- rebalance ----------------------------------------------------------------------------

    def prepare_rebalance(self, group: ClassicGroup, reason: str) -> None:
        loop = asyncio.get_running_loop()
        if group.is_in(_C):
            for member in group.members.values():
                member.assignment = b""
                resolve(member.sync_future, SyncResult(ErrorCode.rebalance_in_progress))
        if group.sync_timer is not None:
            group.sync_timer.cancel()
            group.sync_timer = None
        group.pending_sync.clear()
        if group.join_timer is not None:
            group.join_timer.cancel()
        if group.is_in(_E) and self.initial_delay_ms > 0:
            # Kafka's InitialDelayedJoin: wait for more members, up to the rebalance timeout; it
            # does not end early when everyone known has joined.
            group.in_initial_delay = True
            group.initial_delay_left_ms = max(group.max_rebalance_timeout_ms() - self.initial_delay_ms, 0)
            group.join_timer = loop.call_later(self.initial_delay_ms / 1000, self._initial_delay_expired, group,
                                               len(group.members))
        else:
            group.join_timer = loop.call_later(group.max_rebalance_timeout_ms() / 1000, self._complete_join, group)
        log.info("group %s preparing rebalance (generation %d): %s", group.group_id, group.generation_id, reason)
        group.transition(_P, self.clock.wall_ms())

    def _initial_delay_expired(self, group: ClassicGroup, members_before: int) -> None:
        if len(group.members) > members_before and group.initial_delay_left_ms > 0:
            delay = min(self.initial_delay_ms, group.initial_delay_left_ms)
            group.initial_delay_left_ms -= delay
            group.join_timer = asyncio.get_running_loop().call_later(
                delay / 1000, self._initial_delay_expired, group, len(group.members))
            return
        self._complete_join(group)

    def _maybe_complete_join(self, group: ClassicGroup) -> None:
        if group.is_in(_P) and not group.in_initial_delay and group.all_members_joined():
            self._complete_join(group)

    def _complete_join(self, group: ClassicGroup) -> None:
        if not group.is_in(_P):
            return
        if group.join_timer is not None:
            group.join_timer.cancel()
            group.join_timer = None
        group.initial_delay_left_ms = 0
        group.in_initial_delay = False
        now = self.clock.wall_ms()
        for member in [m for m in group.members.values() if not m.awaiting_join]:
            log.info("group %s: removing member %s, which did not rejoin in time", group.group_id, member.member_id)
            self._remove_member(group, member)
        group.generation_id += 1
        if not group.members:
            group.protocol_name = None
            group.leader_id = None
            group.transition(_E, now)
            self.store_group(group)
            return
        if group.leader_id not in group.members:
            group.leader_id = next(iter(group.members))
        group.protocol_name = group.select_protocol()
        group.transition(_C, now)
        group.pending_sync = set(group.members)
        group.sync_timer = asyncio.get_running_loop().call_later(
            group.max_rebalance_timeout_ms() / 1000, self._sync_expired, group, group.generation_id)
        log.info("group %s generation %d: %d members, protocol %s", group.group_id, group.generation_id,
                 len(group.members), group.protocol_name)
        for member in group.members.values():
            resolve(member.join_future, self._join_result(group, member))
            member.is_new = False
            self.schedule_session(group, member)

    def _sync_expired(self, group: ClassicGroup, generation: int) -> None:
        """Members that never sent SyncGroup for this generation are removed (Kafka's pending sync)."""
        group.sync_timer = None
        if group.generation_id != generation or not group.is_in(_C, _S) or not group.pending_sync:
            return
        for member_id in list(group.pending_sync):
            if member_id in group.members:
                self._remove_member(group, group.members[member_id])
        self._after_removal(group, "members did not sync in time")

    def _remove_member(self, group: ClassicGroup, member: Member) -> None:
        group.members.pop(member.member_id, None)
        group.pending_sync.discard(member.member_id)
        if member.group_instance_id and group.static_members.get(member.group_instance_id) == member.member_id:
            del group.static_members[member.group_instance_id]
        member.cancel_session()
        resolve(member.join_future, JoinResult(ErrorCode.unknown_member_id, member.member_id))
        resolve(member.sync_future, SyncResult(ErrorCode.unknown_member_id))
        if group.leader_id == member.member_id:
            group.leader_id = next(iter(group.members), None)

    def _after_removal(self, group: ClassicGroup, reason: str) -> None:
        if group.is_in(_C, _S):
            self.prepare_rebalance(group, reason)
        if group.is_in(_P):
            # As Kafka's DelayedJoin, tried at once: the last member gone, the group is Empty now
            # (not a rebalance timeout later), which is when its offsets' retention starts.
            self._maybe_complete_join(group)

    # ----- sessions ------------------------------------------------------------------------------

    def schedule_session(self, group: ClassicGroup, member: Member) -> None:
        member.cancel_session()
        member.session_timer = asyncio.get_running_loop().call_later(
            member.session_timeout_ms / 1000, self._session_expired, group, member)

    def _session_expired(self, group: ClassicGroup, member: Member) -> None:
        member.session_timer = None
        if group.members.get(member.member_id) is not member:
            return
        if member.awaiting_join or member.awaiting_sync:
            self.schedule_session(group, member)  # a parked request counts as a heartbeat
            return
        log.info("group %s: member %s session expired", group.group_id, member.member_id)
        self._remove_member(group, member)
        self._after_removal(group, f"removing member {member.member_id} on heartbeat expiration")

    def _expire_pending(self, group: ClassicGroup, member_id: str) -> None:
        if group.pending_members.pop(member_id, None) is not None:
            self._maybe_complete_join(group)

    # ----- SyncGroup / Heartbeat / LeaveGroup ------------------------------------------------

    def _validate_member(self, group: ClassicGroup, member_id: str, instance_id: str | None) -> ErrorCode:
        if instance_id is not None and instance_id in group.static_members:
            if group.static_members[instance_id] != member_id:
                return ErrorCode.fenced_instance_id
        if member_id not in group.members:
            return ErrorCode.unknown_member_id
        return ErrorCode.none

    async def sync(self, group_id: str, generation: int, member_id: str, instance_id: str | None,
                   protocol_type: str | None, protocol_name: str | None,
                   assignments: dict[str, bytes]) -> SyncResult:
        group = self.registry.classic(group_id)
        if group is None or group.is_in(_D, _E):
            return SyncResult(ErrorCode.unknown_member_id)
        error = self._validate_member(group, member_id, instance_id)
        if error:
            return SyncResult(error)
        if generation != group.generation_id:
            return SyncResult(ErrorCode.illegal_generation)
        if (protocol_type is not None and protocol_type != group.protocol_type) or (
                protocol_name is not None and protocol_name != group.protocol_name):
            return SyncResult(ErrorCode.inconsistent_group_protocol)
        if group.is_in(_P):
            return SyncResult(ErrorCode.rebalance_in_progress)
        member = group.members[member_id]
        self.schedule_session(group, member)
        group.pending_sync.discard(member_id)
        if group.is_in(_S):
            return SyncResult(ErrorCode.none, group.protocol_type, group.protocol_name, member.assignment)
        member.sync_future = asyncio.get_running_loop().create_future()
        future = member.sync_future
        if member_id == group.leader_id:
            for m in group.members.values():
                m.assignment = assignments.get(m.member_id, b"")
            try:
                self.store_group(group, raise_errors=True)
            except (OSError, KafkaError) as exc:
                log.warning("storing group %s failed: %s", group.group_id, exc)
                error = coordinator_write_error(exc)
                for m in group.members.values():
                    m.assignment = b""
                    resolve(m.sync_future, SyncResult(error))
                self.prepare_rebalance(group, "storing the assignment failed")
                return await future
            group.transition(_S, self.clock.wall_ms())
            for m in group.members.values():
                resolve(m.sync_future,
                         SyncResult(ErrorCode.none, group.protocol_type, group.protocol_name, m.assignment))
        return await future

    def heartbeat(self, group_id: str, generation: int, member_id: str, instance_id: str | None) -> ErrorCode:
        group = self.registry.classic(group_id)
        if group is None or group.is_in(_D, _E):
            return ErrorCode.unknown_member_id
        error = self._validate_member(group, member_id, instance_id)
        if error:
            return error
        if generation != group.generation_id:
            return ErrorCode.illegal_generation
        self.schedule_session(group, group.members[member_id])
        return ErrorCode.rebalance_in_progress if group.is_in(_P) else ErrorCode.none

    def leave(self, group_id: str, members: list[tuple[str, str | None]]) -> tuple[ErrorCode, list[ErrorCode]]:
        """Top-level error and one error per (member id, instance id) leaving."""
        group = self.registry.classic(group_id)
        if group is None or group.is_in(_D):
            return ErrorCode.unknown_member_id, []
        errors = []
        removed = False
        for member_id, instance_id in members:
            member_id, error = leaving_member(group.static_members, member_id, instance_id)
            if error is not ErrorCode.none:
                errors.append(error)
                continue
            if member_id in group.pending_members:
                group.pending_members.pop(member_id).cancel()
                errors.append(ErrorCode.none)
                removed = True
                continue
            if member_id not in group.members:
                errors.append(ErrorCode.unknown_member_id)
                continue
            log.info("group %s: member %s left the group (LeaveGroup)", group.group_id, member_id)
            self._remove_member(group, group.members[member_id])
            errors.append(ErrorCode.none)
            removed = True
        if removed:
            self._after_removal(group, "members left the group")
        return ErrorCode.none, errors

    # ----- offsets -----------------------------------------------------------------------------

    def validate_commit(self, group_id: str, generation: int, member_id: str, instance_id: str | None,
                        api_version: int, transactional: bool = False) -> None:
        """Raises the error an OffsetCommit (or, ``transactional``, a TxnOffsetCommit) gets for this
        group, as Kafka's OffsetMetadataManager and ClassicGroup checks. A commit at generation -1
        to a group that does not exist creates it as a simple (Empty) group and is accepted,
        whatever member id it names: an admin client, or a consumer that assigns its partitions
        (librdkafka's with group.protocol=consumer sends its own member id). A commit from a
        member of a Stable or rebalancing group counts as its heartbeat."""
        group = self.registry.classic(group_id)
        if group is None or group.is_in(_D):
            if generation >= 0:
                raise KafkaError(ErrorCode.group_id_not_found if api_version >= 9 and not transactional
                                 else ErrorCode.illegal_generation)
            log.info("group %s: creating a simple consumer group via manual offset commit", group_id)
            group = ClassicGroup(group_id, self.clock.wall_ms())
            self.registry.add(group)
        if generation < 0 and group.is_in(_E):
            return
        if generation >= 0 or member_id or instance_id is not None:
            error = self._validate_member(group, member_id, instance_id)
            if error:
                raise KafkaError(error)
            if generation != group.generation_id:
                raise KafkaError(ErrorCode.illegal_generation)
        elif not transactional:
            raise KafkaError(ErrorCode.unknown_member_id)
        if group.is_in(_C) and not transactional:
            raise KafkaError(ErrorCode.rebalance_in_progress)
        if not transactional and group.is_in(_S, _P):
            self.schedule_session(group, group.members[member_id])

    def delete_group(self, group_id: str) -> ErrorCode:
        group = self.registry.classic(group_id)
        if group is None or group.is_in(_D):
            return ErrorCode.group_id_not_found
        if not group.is_in(_E):
            return ErrorCode.non_empty_group
        self.store.delete_group(group_id)
        group.transition(_D, self.clock.wall_ms())
        self.registry.remove(group_id)
        return ErrorCode.none

    def validate_offset_delete(self, group_id: str) -> tuple[ClassicGroup, set[str] | None]:
        """The group and the topics it is subscribed to (None: every topic counts as subscribed)."""
        group = self.registry.classic(group_id)
        if group is None or group.is_in(_D):
            raise KafkaError(ErrorCode.group_id_not_found)
        if group.is_in(_E):
            return group, set()
        if group.protocol_type != "consumer":
            raise KafkaError(ErrorCode.non_empty_group)
        return group, group.subscribed_topics()

    def store_group(self, group: ClassicGroup, raise_errors: bool = False) -> None:
        try:
            self.store.store_group(group.group_id, group.to_record())
        except (OSError, KafkaError) as exc:
            if raise_errors:
                raise
            log.error("storing group %s failed: %s", group.group_id, exc)

    def expire_offsets(self, now_ms: int, retention_ms: int) -> None:
        """offsets.retention.minutes at ``now_ms`` (offset_expiry.py has Kafka's rules)."""
        expire_classic_group_offsets(self.registry, self.store, retention_ms, now_ms)

    def adopt(self, group: ClassicGroup, reason: str) -> None:
        """Take over a group a downgrade just turned into a classic one (it replaces the consumer
        group in the registry): store it, arm its members' sessions, and rebalance it."""
        self.registry.add(group)
        self.store_group(group)
        for member in group.members.values():
            self.schedule_session(group, member)
        self.prepare_rebalance(group, reason)
