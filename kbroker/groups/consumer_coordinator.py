"""ConsumerGroupCoordinator: the KIP-848 consumer group protocol (ConsumerGroupHeartbeat).

It drives the consumer groups of the group service's one map (``GroupRegistry``): their
session and rebalance timers, target assignments, and the member-epoch checks that OffsetCommit
/ OffsetFetch make for consumer groups. An Empty classic group (one that only has offsets, or
whose members all left) turns into a consumer group when a consumer-protocol member joins it,
as in Kafka. A classic group with members is upgraded online and a consumer group left with
classic members only is downgraded, as ``group.consumer.migration.policy`` allows
(``migration.py`` has the conversions; the downgraded group goes to the classic coordinator).
A classic group that cannot be upgraded refuses a consumer-protocol member (GROUP_ID_NOT_FOUND).
Classic members of a consumer group are served by ``classic_members.py`` through the public
operations here.

Persistence: every change is written to ``__consumer_offsets`` (``consumer_group_log.py``)
before the heartbeat is answered, and replayed at start-up (``load``), so members keep their
epochs and assignments across a broker restart.

Timers: ``group.consumer.session.timeout.ms`` after a member's last heartbeat it is removed;
a member asked to revoke partitions that has not done so within its rebalance timeout is
fenced (removed). Either bumps the group epoch and recomputes the target assignment.
offsets.retention.minutes (``expire_offsets``, run by the group service's retention
check): offsets of topics the group does not subscribe to expire the retention after their
commit, and an Empty group left without offsets is deleted, as Kafka does for consumer groups.
"""

from __future__ import annotations

import asyncio
import logging
import re
import uuid
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Protocol

from kbroker.config.group_config import CONSUMER_HEARTBEAT_INTERVAL_MS, CONSUMER_SESSION_TIMEOUT_MS, group_int
from kbroker.coordinator_errors import coordinator_write_error
from kbroker.groups import assignors, migration
from kbroker.groups.assignors import MemberSubscription
from kbroker.groups.classic_group import CONSUMER_PROTOCOL_TYPE, ClassicGroup
from kbroker.groups.classic_group import GroupState as ClassicState
from kbroker.groups.consumer_group import (
    LEAVE_EPOCH,
    LEAVE_STATIC_EPOCH,
    ConsumerGroup,
    ConsumerMember,
    GroupState,
    MemberState,
    TopicMap,
    compile_regex,
    is_subset,
)
from kbroker.groups.consumer_group_log import ConsumerGroupLog, preferred_assignor
from kbroker.groups.consumer_heartbeat import HeartbeatRequest, HeartbeatResult
from kbroker.groups.group_registry import GroupRegistry
from kbroker.network.rate_limited_log import RateLimitedLogger
from kbroker.protocol.errors import ErrorCode, KafkaError
from kbroker.storage.clock import SYSTEM_CLOCK, Clock

if TYPE_CHECKING:
    from kbroker.groups.classic_coordinator import ClassicGroupCoordinator
    from kbroker.groups.group_settings import ConsumerGroupSettings
    from kbroker.groups.offset_store import OffsetStore
    from kbroker.replication.forwarding_controller import ForwardingController

log = logging.getLogger(__name__)
# Per request: every heartbeat of a new member retries the upgrade of a classic group it cannot read.
_limited = RateLimitedLogger(log)

FIRST_CLIENT_MEMBER_ID_VERSION = 1  # v1+: the consumer generates its member id
# An older member epoch's commit is checked partition by partition (topic id, partition):
# raises the commit's error for a partition not held since that epoch.
CommitPartitionCheck = Callable[[uuid.UUID, int], None]


class GroupServiceParts(Protocol):
    """What the consumer coordinator shares with the group service it belongs to: the one map
    of groups, and the classic coordinator that takes over a downgraded group."""

    @property
    def registry(self) -> GroupRegistry: ...

    @property
    def classic(self) -> ClassicGroupCoordinator: ...


def _invalid(message: str) -> KafkaError:
    return KafkaError(ErrorCode.invalid_request, message)


class ConsumerGroupCoordinator:
    def __init__(self, settings: ConsumerGroupSettings, controller: ForwardingController,
                 service: GroupServiceParts | None, store: OffsetStore | None = None,
                 clock: Clock = SYSTEM_CLOCK) -> None:
        self.controller = controller
        self.clock = clock
        # On its own (service None, in tests) it has a map of its own and no classic groups.
        self.registry = service.registry if service is not None else GroupRegistry()
        self.classic = service.classic if service is not None else None
        self.store = store
        self.log = ConsumerGroupLog(store)
        self.session_timeout_ms = settings.session_timeout_ms
        self.heartbeat_interval_ms = settings.heartbeat_interval_ms
        # A group's own configs (GROUP config resource; the composition root reads them from the
        # metadata log): consumer.session.timeout.ms / consumer.heartbeat.interval.ms override the above.
        self.group_configs: Callable[[str], Mapping[str, str]] = lambda _group_id: {}
        self.max_size = settings.max_size
        self.assignors = settings.assignors
        self.migration_policy = settings.migration_policy

    # ----- lookups used by the group service and the group handlers ------------------------

    @property
    def groups(self) -> dict[str, ConsumerGroup]:
        """The consumer groups of the one map (a snapshot)."""
        return self.registry.consumer_groups()

    def group(self, group_id: str) -> ConsumerGroup | None:
        return self.registry.consumer(group_id)

    def release_to_classic(self, group_id: str) -> bool:
        """A classic JoinGroup for ``group_id``: an Empty consumer group turns into a classic
        one (True); a consumer group with members refuses it (False)."""
        group = self.group(group_id)
        if group is None:
            return True
        if group.members:
            return False
        try:
            self.forget(group_id)
        except (OSError, KafkaError) as exc:
            log.error("deleting consumer group %s failed: %s", group_id, exc)
            return False
        return True

    def forget(self, group_id: str) -> None:
        """Drop a consumer group, with tombstones for its records (raises if they cannot be
        written; then nothing is dropped)."""
        self.log.delete(group_id)
        group = self.registry.consumer(group_id)
        self.registry.remove(group_id)
        if group is not None:
            group.dead = True

    def topics(self) -> TopicMap:
        return {name: (info.topic_id, info.partitions) for name, info in self.controller.topics.items()}

    # ----- ConsumerGroupHeartbeat ------------------------------------------------------------

    def validate(self, req: HeartbeatRequest) -> None:
        """Request checks, in Kafka's order and with its messages (INVALID_REQUEST and co)."""
        if not req.group_id:
            raise _invalid("GroupId can't be empty.")
        if req.instance_id == "":
            raise _invalid("InstanceId can't be empty.")
        if req.rack_id == "":
            raise _invalid("RackId can't be empty.")
        if (req.api_version >= FIRST_CLIENT_MEMBER_ID_VERSION or req.member_epoch != 0) and not req.member_id:
            raise _invalid("MemberId can't be empty.")
        if req.member_epoch == 0:
            if req.rebalance_timeout_ms == -1:
                raise _invalid("RebalanceTimeoutMs must be provided in first request.")
            if req.owned is None or req.owned:
                raise _invalid("TopicPartitions must be empty when (re-)joining.")
            if req.subscribed_topic_names is None and req.subscribed_topic_regex is None:
                raise _invalid("Either SubscribedTopicNames or SubscribedTopicRegex must be non-null when "
                               "(re-)joining.")
        elif req.member_epoch == LEAVE_STATIC_EPOCH:
            if req.instance_id is None:
                raise _invalid("InstanceId can't be null.")
        elif req.member_epoch < LEAVE_STATIC_EPOCH:
            raise _invalid("MemberEpoch is invalid.")
        if req.subscribed_topic_regex is not None:
            try:
                compile_regex(req.subscribed_topic_regex)
            except (ValueError, re.error) as exc:
                raise KafkaError(ErrorCode.invalid_regular_expression,
                                 f"SubscribedTopicRegex `{req.subscribed_topic_regex}` is not a valid regular "
                                 f"expression: {exc}.") from None
        if req.server_assignor is not None and assignors.canonical_name(req.server_assignor) not in self.assignors:
            raise KafkaError(ErrorCode.unsupported_assignor,
                             f"ServerAssignor {req.server_assignor} is not supported. Supported assignors: "
                             f"{', '.join(self.assignors)}.")

    def heartbeat(self, req: HeartbeatRequest) -> HeartbeatResult:
        """One ConsumerGroupHeartbeat; raises KafkaError (with Kafka's message) on error."""
        if self.registry.coordinator_error(req.group_id):
            raise KafkaError(self.registry.coordinator_error(req.group_id))
        self.validate(req)
        if req.member_epoch in (LEAVE_EPOCH, LEAVE_STATIC_EPOCH):
            return self._leave(req)
        group = self._group_for(req.group_id, create=req.member_epoch == 0)
        member, is_new = self._member_for(group, req)
        bump = is_new
        if req.instance_id is not None:
            member.instance_id = req.instance_id
        if req.rack_id is not None:
            member.rack_id = req.rack_id
        if req.rebalance_timeout_ms >= 0:
            member.rebalance_timeout_ms = req.rebalance_timeout_ms
        if req.subscribed_topic_names is not None and sorted(req.subscribed_topic_names) != sorted(
                member.subscribed_topic_names):
            member.subscribed_topic_names = list(req.subscribed_topic_names)
            bump = True
        if req.subscribed_topic_regex is not None and (req.subscribed_topic_regex or None) != (
                member.subscribed_topic_regex or None):
            member.subscribed_topic_regex = req.subscribed_topic_regex or None
            bump = True
        if req.server_assignor is not None and req.server_assignor != member.server_assignor:
            member.server_assignor = req.server_assignor
            bump = True
        member.client_id, member.client_host = req.client_id, req.client_host
        topics = self.topics()
        metadata = group.compute_subscription_metadata(topics)
        if bump or metadata != group.subscription_metadata:
            group.subscription_metadata = metadata
            self.bump(group, topics, f"member {member.member_id} joined or changed its subscription"
                       if bump else "subscribed topics changed")
        self.schedule_session(group, member)
        changed = group.reconcile(member, req.owned)
        if member.state is MemberState.UNREVOKED_PARTITIONS:
            if changed:
                self.schedule_rebalance_timeout(group, member)
        elif member.rebalance_timer is not None:
            member.rebalance_timer.cancel()
            member.rebalance_timer = None
        self.persist(group)
        full = (req.rebalance_timeout_ms != -1 and req.owned is not None and
                (req.subscribed_topic_names is not None or req.subscribed_topic_regex is not None))
        interval_ms = group_int(self.group_configs(group.group_id), CONSUMER_HEARTBEAT_INTERVAL_MS,
                                self.heartbeat_interval_ms)
        return HeartbeatResult(member.member_id, member.member_epoch, interval_ms,
                               member.assigned if (changed or full or is_new) else None)

    def _group_for(self, group_id: str, create: bool) -> ConsumerGroup:
        group = self.group(group_id)
        if group is not None:
            return group
        classic = self.registry.classic(group_id)
        if classic is not None and classic.members:
            upgraded = self._upgrade(classic) if create else None
            if upgraded is None:
                raise KafkaError(ErrorCode.group_id_not_found, f"Group {group_id} is not a consumer group.")
            return upgraded
        if not create:
            # The member cannot be known without its group: UNKNOWN_MEMBER_ID makes the client
            # rejoin with epoch 0 (after its group was deleted, say) instead of failing.
            raise KafkaError(ErrorCode.unknown_member_id, f"Consumer group {group_id} not found.")
        group = ConsumerGroup(group_id)
        self.registry.add(group)  # in place of an Empty classic group, if one stood for the id
        return group

    def _member_for(self, group: ConsumerGroup, req: HeartbeatRequest) -> tuple[ConsumerMember, bool]:
        """The member this heartbeat is from, created or replaced on a join (epoch 0), with
        Kafka's fencing checks otherwise. Returns (member, whether it is new to the group)."""
        member_id = req.member_id or str(uuid.uuid4())  # v0 lets the coordinator pick the id
        existing = group.members.get(member_id)
        if req.member_epoch != 0:
            if existing is None or existing.classic is not None:
                raise KafkaError(ErrorCode.unknown_member_id,
                                 f"Member {member_id} is not a member of group {group.group_id}.")
            if req.instance_id is not None and group.static_members.get(req.instance_id) != member_id:
                raise KafkaError(ErrorCode.fenced_instance_id,
                                 f"Static member {member_id} with instance id {req.instance_id} was fenced.")
            self._check_epoch(existing, req)
            return existing, False
        if req.instance_id is not None:
            holder_id = group.static_members.get(req.instance_id)
            holder = group.members.get(holder_id) if holder_id is not None else None
            if holder is not None and holder_id != member_id:
                if holder.member_epoch != LEAVE_STATIC_EPOCH:
                    raise KafkaError(ErrorCode.unreleased_instance_id,
                                     f"Static member {holder_id} with instance id {req.instance_id} is not "
                                     "released yet: it must leave with epoch -2 first.")
                return self.replace_static(group, holder, member_id), False
        if existing is not None and existing.classic is not None:
            raise KafkaError(ErrorCode.unknown_member_id,
                             f"Member {member_id} uses the classic protocol in group {group.group_id}.")
        if existing is not None:
            # A known member rejoining (after being fenced, for instance) owns nothing now.
            group.release(existing)
            existing.assigned, existing.pending_revocation = {}, {}
            existing.state, existing.member_epoch = MemberState.STABLE, 0
            return existing, True
        if len(group.members) >= self.max_size:
            raise KafkaError(ErrorCode.group_max_size_reached,
                             f"The consumer group has reached its maximum capacity of {self.max_size} members.")
        member = ConsumerMember(member_id, instance_id=req.instance_id)
        group.members[member_id] = member
        if req.instance_id is not None:
            group.static_members[req.instance_id] = member_id
        return member, True

    @staticmethod
    def _check_epoch(member: ConsumerMember, req: HeartbeatRequest) -> None:
        """Kafka's member epoch check: a newer epoch than known, or an older one other than the
        previous epoch with owned partitions within the assignment (a lost response), is fenced."""
        if req.member_epoch > member.member_epoch:
            raise KafkaError(ErrorCode.fenced_member_epoch,
                             f"The consumer group member has a greater member epoch ({req.member_epoch}) than the "
                             f"one known by the group coordinator ({member.member_epoch}). The member must abandon "
                             "all its partitions and rejoin.")
        if req.member_epoch < member.member_epoch:
            if req.member_epoch != member.previous_member_epoch or not is_subset(req.owned, member.assigned):
                raise KafkaError(ErrorCode.fenced_member_epoch,
                                 f"The consumer group member has a smaller member epoch ({req.member_epoch}) than "
                                 f"the one known by the group coordinator ({member.member_epoch}). The member must "
                                 "abandon all its partitions and rejoin.")

    def replace_static(self, group: ConsumerGroup, old: ConsumerMember, member_id: str) -> ConsumerMember:
        """KIP-848 static membership: a new member id takes over a released instance id with its
        assignment and epoch, without a rebalance."""
        del group.members[old.member_id]
        old.cancel_timers()
        target = group.target.pop(old.member_id, {})
        old.member_id = member_id
        group.members[member_id] = old
        group.target[member_id] = target
        group.static_members[old.instance_id or ""] = member_id
        old.member_epoch = old.previous_member_epoch if old.previous_member_epoch >= 0 else 0
        return old

    def _leave(self, req: HeartbeatRequest) -> HeartbeatResult:
        group = self.group(req.group_id)
        if group is None:
            raise KafkaError(ErrorCode.unknown_member_id, f"Consumer group {req.group_id} not found.")
        member = group.members.get(req.member_id)
        if member is None:
            raise KafkaError(ErrorCode.unknown_member_id,
                             f"Member {req.member_id} is not a member of group {group.group_id}.")
        if req.instance_id is not None and group.static_members.get(req.instance_id) != req.member_id:
            raise KafkaError(ErrorCode.fenced_instance_id,
                             f"Static member {req.member_id} with instance id {req.instance_id} was fenced.")
        if req.member_epoch == LEAVE_STATIC_EPOCH:
            # A static member leaving temporarily keeps its partitions until its session ends.
            if member.member_epoch != LEAVE_STATIC_EPOCH:
                member.previous_member_epoch = member.member_epoch
            member.member_epoch = LEAVE_STATIC_EPOCH
            self.schedule_session(group, member)
            self.persist(group)
            return HeartbeatResult(req.member_id, LEAVE_STATIC_EPOCH, 0)
        self.remove_member(group, req.member_id, "left the group")
        return HeartbeatResult(req.member_id, LEAVE_EPOCH, 0)

    # ----- target assignment -------------------------------------------------------------------

    def bump(self, group: ConsumerGroup, topics: TopicMap, reason: str) -> None:
        group.group_epoch += 1
        if group.members:
            self._compute_target(group, topics)
        else:  # as Kafka: an empty group has no target to compute; its assignment epoch stays
            group.target = {}
        log.info("consumer group %s epoch %d (%d members): %s", group.group_id, group.group_epoch,
                 len(group.members), reason)

    def _compute_target(self, group: ConsumerGroup, topics: TopicMap) -> None:
        name = preferred_assignor(group, self.assignors[0])
        specs = {}
        for member_id, member in group.members.items():
            ids = {topics[n][0] for n in group.member_subscribed_topics(member, topics)}
            specs[member_id] = MemberSubscription(ids, group.target.get(member_id, {}))
        partitions = {topic_id: count for topic_id, count in group.subscription_metadata.values()}
        group.target = assignors.assign(name, specs, partitions)
        group.assignor_name = name
        group.assignment_epoch = group.group_epoch

    def remove_member(self, group: ConsumerGroup, member_id: str, reason: str) -> None:
        if member_id in group.members and self._maybe_downgrade(group, member_id):
            return
        if group.remove_member(member_id) is None:
            return
        topics = self.topics()
        group.subscription_metadata = group.compute_subscription_metadata(topics)
        self.bump(group, topics, f"member {member_id} {reason}")
        self.persist(group)

    # ----- timers ----------------------------------------------------------------------------

    def schedule_session(self, group: ConsumerGroup, member: ConsumerMember) -> None:
        if member.session_timer is not None:
            member.session_timer.cancel()
        timeout_ms = member.classic[0] if member.classic is not None else group_int(
            self.group_configs(group.group_id), CONSUMER_SESSION_TIMEOUT_MS, self.session_timeout_ms)
        member.session_timer = asyncio.get_running_loop().call_later(
            timeout_ms / 1000, self._session_expired, group, member)

    def _session_expired(self, group: ConsumerGroup, member: ConsumerMember) -> None:
        member.session_timer = None
        if group.members.get(member.member_id) is member:
            self._remove_on_timer(group, member, "session expired")

    def schedule_rebalance_timeout(self, group: ConsumerGroup, member: ConsumerMember) -> None:
        if member.rebalance_timer is not None:
            member.rebalance_timer.cancel()
        member.rebalance_timer = asyncio.get_running_loop().call_later(
            member.rebalance_timeout_ms / 1000, self._rebalance_expired, group, member, member.member_epoch)

    def _rebalance_expired(self, group: ConsumerGroup, member: ConsumerMember, epoch: int) -> None:
        member.rebalance_timer = None
        if (group.members.get(member.member_id) is member and member.member_epoch == epoch
                and member.state is MemberState.UNREVOKED_PARTITIONS):
            self._remove_on_timer(group, member, "did not revoke its partitions within the rebalance timeout")

    def _remove_on_timer(self, group: ConsumerGroup, member: ConsumerMember, reason: str) -> None:
        """A timer's removal that cannot be written is retried when the restored member's
        session runs out again."""
        try:
            self.remove_member(group, member.member_id, reason)
        except KafkaError as exc:
            log.warning("consumer group %s: removing member %s (%s) not written: %s", group.group_id,
                        member.member_id, reason, exc.code.name)

    # ----- migration between the group types ------------------------------------------------

    def _upgrade(self, classic: ClassicGroup) -> ConsumerGroup | None:
        """Convert a classic group with members into a consumer group, or None when not allowed."""
        if self.classic is None or not migration.allows_upgrade(self.migration_policy):
            return None
        if classic.protocol_type != CONSUMER_PROTOCOL_TYPE or len(classic.members) > self.max_size:
            return None
        try:
            group = migration.to_consumer_group(classic, self.topics())
        except ValueError as exc:
            _limited.info("cannot upgrade classic group %s: malformed consumer protocol (%s)", classic.group_id, exc)
            return None
        # Tombstone the classic group's metadata first: if that fails, the group stays classic.
        if self.store is not None:
            self.store.delete_group_metadata(classic.group_id)
        classic.close(ErrorCode.rebalance_in_progress)  # parked JoinGroup/SyncGroup rejoin
        classic.transition(ClassicState.DEAD, classic.state_timestamp)
        self.registry.add(group)
        for member in group.members.values():
            group.claim(member)
            self.schedule_session(group, member)
        log.info("classic group %s upgraded to a consumer group (%d classic members)", group.group_id,
                 len(group.members))
        return group

    def _maybe_downgrade(self, group: ConsumerGroup, leaving_id: str) -> bool:
        """Before ``leaving_id`` is removed: turn the group back into a classic group if only
        classic members remain and the policy allows it (True: done, the member is gone)."""
        rest = [m for m in group.members.values() if m.member_id != leaving_id]
        if self.classic is None or not rest or any(m.classic is None for m in rest):
            return False
        if not migration.allows_downgrade(self.migration_policy) or len(rest) > self.classic.max_size:
            return False
        classic = migration.to_classic_group(group, rest, self.topics(), self.session_timeout_ms,
                                             self.clock.wall_ms())
        try:
            self.forget(group.group_id)  # tombstones for the consumer group's records
        except (OSError, KafkaError) as exc:
            log.error("downgrading group %s failed: %s", group.group_id, exc)
            return False
        for m in group.members.values():
            m.cancel_timers()
        self.classic.adopt(classic, f"downgrade of group {group.group_id} from consumer to classic")
        log.info("consumer group %s downgraded to a classic group (%d members)", group.group_id, len(rest))
        return True

    # ----- persistence -----------------------------------------------------------------------------

    def persist(self, group: ConsumerGroup) -> None:
        """Write the group's changes (consumer_group_log.py).

        As Kafka's coordinator: a change that cannot be written is not kept — the group goes
        back to what the log holds (members keep the epochs and assignments last written) and
        the request fails with Kafka's error for a failed coordinator write."""
        try:
            self.log.persist(group)
        except (OSError, KafkaError) as exc:
            logged = self.log.forget(group.group_id)
            self.unload({group.group_id})
            self._restore(logged)
            raise KafkaError(coordinator_write_error(exc)) from exc

    def load(self, logged: list[tuple[bytes, bytes | None]]) -> None:
        """Rebuild consumer groups from their replayed records (in log order; last one wins).
        Members come back with their epochs and assignments and must heartbeat within their
        session timeout. A group replaces the Empty classic group the classic coordinator's
        load made from its offsets."""
        if self._restore(logged):
            log.info("loaded %d consumer groups", len(self.registry.consumer_groups()))

    def _restore(self, logged: list[tuple[bytes, bytes | None]]) -> int:
        groups = self.log.rebuild(logged, self.topics(), self.assignors[0])
        for group in groups:
            self.registry.add(group)
            for member in group.members.values():
                self.schedule_session(group, member)
        return len(groups)

    def stop(self) -> None:
        self.unload(set(self.registry.consumer_groups()))

    def unload(self, group_ids: set[str]) -> None:
        """Drop groups (shutdown, or their offsets partition moved to another broker)."""
        for group_id in group_ids:
            self.log.forget(group_id)
            group = self.registry.consumer(group_id)
            if group is None:
                continue
            self.registry.remove(group_id)
            for member in group.members.values():
                member.cancel_timers()

    # ----- hooks for offsets and the admin APIs ----------------------------------------------------

    def validate_commit(self, group: ConsumerGroup, member_id: str, member_epoch: int,
                        api_version: int) -> CommitPartitionCheck | None:
        """OffsetCommit to a consumer group, as Kafka 4.3's ConsumerGroup: epoch -1 without members
        is a simple commit; otherwise the member must exist and use v9+ (a consumer-protocol
        member). Its current epoch commits anything; a newer one is refused; an older one is
        checked per partition by the returned check (None: nothing to check)."""
        if member_epoch < 0 and not group.members:
            return None
        member = group.members.get(member_id)
        if member is None:
            raise KafkaError(ErrorCode.unknown_member_id, f"Member {member_id} is not a member of group "
                                                          f"{group.group_id}.")
        classic = member.classic is not None  # a classic member commits at its generation, its member epoch
        if not classic and api_version < 9:
            raise KafkaError(ErrorCode.unsupported_version,
                             "OffsetCommit version 9 or above must be used by members using the consumer group "
                             "protocol")
        error = ErrorCode.illegal_generation if classic else ErrorCode.stale_member_epoch
        if member_epoch > member.member_epoch:
            raise KafkaError(error, f"Received member epoch {member_epoch} is newer than current member epoch "
                                    f"{member.member_epoch}.")
        if member_epoch == member.member_epoch:
            return None

        def check(topic_id: uuid.UUID, partition: int) -> None:
            held_since = member.partition_epoch(topic_id, partition)
            if held_since is None:
                raise KafkaError(error, f"Partition {topic_id}-{partition} is not assigned or pending revocation "
                                        "for member.")
            if member_epoch < held_since:
                raise KafkaError(error, f"Received member epoch {member_epoch} is older than assignment epoch "
                                        f"{held_since} for partition {topic_id}-{partition}.")
        return check

    def validate_fetch(self, group_id: str, member_id: str | None, member_epoch: int) -> None:
        """OffsetFetch v9+: a member id and epoch, when given, must be current."""
        group = self.group(group_id)
        if group is None or (member_id is None and member_epoch < 0):
            return
        member = group.members.get(member_id or "")
        if member is None:
            raise KafkaError(ErrorCode.unknown_member_id)
        if member_epoch != member.member_epoch:
            raise KafkaError(ErrorCode.stale_member_epoch)

    def delete_group(self, group_id: str) -> ErrorCode:
        """DeleteGroups for a consumer group: only an Empty one (offsets by the caller)."""
        group = self.group(group_id)
        if group is None:
            return ErrorCode.group_id_not_found
        if group.state is not GroupState.EMPTY:
            return ErrorCode.non_empty_group
        self.forget(group_id)  # raises OSError/KafkaError: nothing deleted
        return ErrorCode.none

    def expire_offsets(self, now_ms: int, retention_ms: int) -> None:
        """offsets.retention.minutes at ``now_ms`` (Kafka's ConsumerGroup expiration condition):
        offsets of topics no member subscribes to (by name, or a regex matching an existing
        topic) expire ``retention_ms`` after their commit, whatever the group's state; an Empty
        group with no offset left is deleted (tombstones for its records and offsets; Dead)."""
        if self.store is None:
            return
        for group_id, group in self.registry.consumer_groups().items():
            subscribed = set(group.subscription_metadata)
            for member in group.members.values():
                subscribed.update(member.subscribed_topic_names)
            try:
                if (self.store.expire_offsets(group_id, now_ms, retention_ms, None, subscribed.__contains__)
                        and group.state is GroupState.EMPTY):
                    self.forget(group_id)
                    self.store.delete_group(group_id)
                    log.info("consumer group %s: offsets expired, group deleted", group_id)
            except (OSError, KafkaError) as exc:
                log.error("expiring offsets of consumer group %s failed: %s", group_id, exc)
