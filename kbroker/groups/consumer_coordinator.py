"""ConsumerGroupCoordinator: the KIP-848 consumer group protocol (ConsumerGroupHeartbeat).

It owns the consumer groups (``ConsumerGroup``), their session and rebalance timers, and the
member-epoch checks that OffsetCommit / OffsetFetch make for consumer groups. The classic
GroupCoordinator keeps classic groups; a group id is one or the other. An Empty classic group
(one that only has offsets, or whose members all left) turns into a consumer group when a
consumer-protocol member joins it, as in Kafka. A classic group with members is upgraded
online and a consumer group left with classic members only is downgraded, as
``group.consumer.migration.policy`` allows; classic members of a consumer group are handled
in ``classic_members.py``. A classic group that cannot be upgraded refuses a consumer-protocol
member (GROUP_ID_NOT_FOUND).

Persistence: every change is written to ``__consumer_offsets`` as Kafka's consumer group
records (``consumer_group_records.py``) through the OffsetStore, before the heartbeat is
answered, and replayed at start-up (``load``), so members keep their epochs and assignments
across a broker restart. Only records that changed since the last write are appended.

Timers: ``group.consumer.session.timeout.ms`` after a member's last heartbeat it is removed;
a member asked to revoke partitions that has not done so within its rebalance timeout is
fenced (removed). Either bumps the group epoch and recomputes the target assignment.
offsets.retention.minutes (``expire_offsets``, run by the classic coordinator's retention
check): offsets of topics the group does not subscribe to expire the retention after their
commit, and an Empty group left without offsets is deleted, as Kafka does for consumer groups.
"""

from __future__ import annotations

import asyncio
import logging
import re
import uuid
from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING

from kbroker.coordinator_errors import coordinator_write_error
from kbroker.groups import assignors, classic_members
from kbroker.groups import consumer_group_records as records
from kbroker.groups.assignors import Assignment, MemberSubscription
from kbroker.groups.consumer_group import (
    LEAVE_EPOCH,
    LEAVE_STATIC_EPOCH,
    ConsumerGroup,
    ConsumerMember,
    GroupState,
    MemberState,
    compile_regex,
    is_subset,
)
from kbroker.protocol.errors import ErrorCode, KafkaError

if TYPE_CHECKING:
    from kbroker.config.kafka_config import KafkaConfig
    from kbroker.groups.coordinator import GroupCoordinator
    from kbroker.groups.offset_store import OffsetStore
    from kbroker.replication.forwarding_controller import ForwardingController

log = logging.getLogger(__name__)

FIRST_CLIENT_MEMBER_ID_VERSION = 1  # v1+: the consumer generates its member id
# Kafka's MemberState codes in ConsumerGroupCurrentMemberAssignmentValue.State
_STATE_CODES = {MemberState.STABLE: 0, MemberState.UNREVOKED_PARTITIONS: 1, MemberState.UNRELEASED_PARTITIONS: 2}
_STATES = {code: state for state, code in _STATE_CODES.items()}


@dataclass(slots=True)
class HeartbeatRequest:
    """The fields of ConsumerGroupHeartbeat that the coordinator uses (None: unchanged)."""

    group_id: str
    member_id: str
    member_epoch: int
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    subscribed_topic_names: list[str] | None = None
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    owned: Assignment | None = None
    client_id: str = ""
    client_host: str = ""
    api_version: int = 1


@dataclass(slots=True)
class HeartbeatResult:
    member_id: str
    member_epoch: int
    heartbeat_interval_ms: int
    assignment: Assignment | None = None


def _invalid(message: str) -> KafkaError:
    return KafkaError(ErrorCode.invalid_request, message)


class ConsumerGroupCoordinator:
    def __init__(self, config: KafkaConfig, controller: ForwardingController, classic: GroupCoordinator | None,
                 store: OffsetStore | None = None) -> None:
        self.controller = controller
        self.classic = classic
        self.store = store
        # group id -> record key -> value last written for it (what the log holds for the group)
        self.written: dict[str, dict[bytes, bytes]] = {}
        self.groups: dict[str, ConsumerGroup] = {}
        self.session_timeout_ms = config.get_int("group.consumer.session.timeout.ms")
        self.heartbeat_interval_ms = config.get_int("group.consumer.heartbeat.interval.ms")
        self.max_size = config.get_int("group.consumer.max.size")
        configured = [n for n in (config.get("group.consumer.assignors") or "").split(",") if n.strip()]
        self.assignors = [name for name in (assignors.canonical_name(n) for n in configured) if name]
        for unknown in (n.strip() for n in configured if assignors.canonical_name(n) is None):
            log.warning("group.consumer.assignors: %s is not a known assignor (uniform, range); ignored", unknown)
        if not self.assignors:
            self.assignors = [assignors.UNIFORM]
        self.migration_policy = (config.get("group.consumer.migration.policy") or "bidirectional").strip().lower()
        if self.migration_policy not in classic_members.POLICIES:
            log.warning("group.consumer.migration.policy: unknown value %s; using bidirectional", self.migration_policy)
            self.migration_policy = "bidirectional"

    # ----- lookups used by the classic coordinator and the group handlers --------------------

    def group(self, group_id: str) -> ConsumerGroup | None:
        group = self.groups.get(group_id)
        return None if group is None or group.dead else group

    def release_to_classic(self, group_id: str) -> bool:
        """A classic JoinGroup for ``group_id``: an Empty consumer group turns into a classic
        one (True); a consumer group with members refuses it (False)."""
        group = self.group(group_id)
        if group is None:
            return True
        if group.members:
            return False
        try:
            self._forget(group_id)
        except (OSError, KafkaError) as exc:
            log.error("deleting consumer group %s failed: %s", group_id, exc)
            return False
        return True

    def _forget(self, group_id: str) -> None:
        """Drop a consumer group, with tombstones for its records (raises if they cannot be
        written; then nothing is dropped)."""
        tombstones: list[tuple[bytes, bytes | None]] = [(key, None) for key in self.written.get(group_id, {})]
        if tombstones and self.store is not None:
            self.store._write(group_id, tombstones)
        self.written.pop(group_id, None)
        group = self.groups.pop(group_id)
        group.dead = True

    def _topics(self) -> dict[str, tuple[uuid.UUID, int]]:
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
        if self.classic is not None and self.classic.coordinator_error(req.group_id):
            raise KafkaError(self.classic.coordinator_error(req.group_id))
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
        topics = self._topics()
        metadata = group.compute_subscription_metadata(topics)
        if bump or metadata != group.subscription_metadata:
            group.subscription_metadata = metadata
            self._bump(group, topics, f"member {member.member_id} joined or changed its subscription"
                       if bump else "subscribed topics changed")
        self._schedule_session(group, member)
        changed = group.reconcile(member, req.owned)
        if member.state is MemberState.UNREVOKED_PARTITIONS:
            if changed:
                self._schedule_rebalance_timeout(group, member)
        elif member.rebalance_timer is not None:
            member.rebalance_timer.cancel()
            member.rebalance_timer = None
        self._persist(group)
        full = (req.rebalance_timeout_ms != -1 and req.owned is not None and
                (req.subscribed_topic_names is not None or req.subscribed_topic_regex is not None))
        return HeartbeatResult(member.member_id, member.member_epoch, self.heartbeat_interval_ms,
                               member.assigned if (changed or full or is_new) else None)

    def _group_for(self, group_id: str, create: bool) -> ConsumerGroup:
        group = self.group(group_id)
        if group is not None:
            return group
        classic = self.classic.groups.get(group_id) if self.classic is not None else None
        if classic is not None and classic.members:
            upgraded = classic_members.upgrade(self, classic) if create else None
            if upgraded is None:
                raise KafkaError(ErrorCode.group_id_not_found, f"Group {group_id} is not a consumer group.")
            return upgraded
        if not create:
            # The member cannot be known without its group: UNKNOWN_MEMBER_ID makes the client
            # rejoin with epoch 0 (after its group was deleted, say) instead of failing.
            raise KafkaError(ErrorCode.unknown_member_id, f"Consumer group {group_id} not found.")
        if classic is not None and self.classic is not None:
            del self.classic.groups[group_id]  # an Empty classic group becomes a consumer group
        group = self.groups[group_id] = ConsumerGroup(group_id)
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
                return self._replace_static(group, holder, member_id), False
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

    def _replace_static(self, group: ConsumerGroup, old: ConsumerMember, member_id: str) -> ConsumerMember:
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
            self._schedule_session(group, member)
            self._persist(group)
            return HeartbeatResult(req.member_id, LEAVE_STATIC_EPOCH, 0)
        self.remove_member(group, req.member_id, "left the group")
        return HeartbeatResult(req.member_id, LEAVE_EPOCH, 0)

    # ----- target assignment -------------------------------------------------------------------

    def _bump(self, group: ConsumerGroup, topics: dict[str, tuple[uuid.UUID, int]], reason: str) -> None:
        group.group_epoch += 1
        self._compute_target(group, topics)
        log.info("consumer group %s epoch %d (%d members): %s", group.group_id, group.group_epoch,
                 len(group.members), reason)

    def _compute_target(self, group: ConsumerGroup, topics: dict[str, tuple[uuid.UUID, int]]) -> None:
        preferred = Counter(assignors.canonical_name(m.server_assignor) for m in group.members.values()
                            if m.server_assignor)
        preferred.pop(None, None)
        name = preferred.most_common(1)[0][0] if preferred else self.assignors[0]
        specs = {}
        for member_id, member in group.members.items():
            ids = {topics[n][0] for n in group.member_subscribed_topics(member, topics)}
            specs[member_id] = MemberSubscription(ids, group.target.get(member_id, {}))
        partitions = {topic_id: count for topic_id, count in group.subscription_metadata.values()}
        group.target = assignors.assign(name or self.assignors[0], specs, partitions)
        group.assignor_name = name or self.assignors[0]
        group.assignment_epoch = group.group_epoch

    def remove_member(self, group: ConsumerGroup, member_id: str, reason: str) -> None:
        if member_id in group.members and classic_members.maybe_downgrade(self, group, member_id):
            return
        if group.remove_member(member_id) is None:
            return
        topics = self._topics()
        group.subscription_metadata = group.compute_subscription_metadata(topics)
        self._bump(group, topics, f"member {member_id} {reason}")
        self._persist(group)

    # ----- timers ----------------------------------------------------------------------------

    def _schedule_session(self, group: ConsumerGroup, member: ConsumerMember) -> None:
        if member.session_timer is not None:
            member.session_timer.cancel()
        timeout_ms = member.classic[0] if member.classic is not None else self.session_timeout_ms
        member.session_timer = asyncio.get_running_loop().call_later(
            timeout_ms / 1000, self._session_expired, group, member)

    def _session_expired(self, group: ConsumerGroup, member: ConsumerMember) -> None:
        member.session_timer = None
        if group.members.get(member.member_id) is member:
            self._remove_on_timer(group, member, "session expired")

    def _schedule_rebalance_timeout(self, group: ConsumerGroup, member: ConsumerMember) -> None:
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

    # ----- persistence -----------------------------------------------------------------------------

    def _records(self, group: ConsumerGroup) -> dict[bytes, bytes]:
        gid = group.group_id
        out = {records.encode_key(records.GROUP_METADATA, gid): records.encode_group_metadata(group.group_epoch),
               records.encode_key(records.TARGET_METADATA, gid):
                   records.encode_target_metadata(group.assignment_epoch)}
        for mid, m in group.members.items():
            out[records.encode_key(records.MEMBER_METADATA, gid, mid)] = records.encode_member_metadata(
                records.MemberMetadata(m.instance_id, m.rack_id, m.client_id, m.client_host,
                                       m.subscribed_topic_names, m.subscribed_topic_regex, m.rebalance_timeout_ms,
                                       m.server_assignor, m.classic))
            out[records.encode_key(records.TARGET_MEMBER, gid, mid)] = records.encode_target_member(
                group.target.get(mid, {}))
            out[records.encode_key(records.CURRENT_ASSIGNMENT, gid, mid)] = records.encode_current_assignment(
                records.CurrentAssignment(m.member_epoch, m.previous_member_epoch, _STATE_CODES[m.state],
                                          m.assigned, m.pending_revocation))
        return out

    def _persist(self, group: ConsumerGroup) -> None:
        """Append the records that changed since the last write (tombstones for members gone).

        As Kafka's coordinator: a change that cannot be written is not kept — the group goes
        back to what the log holds (members keep the epochs and assignments last written) and
        the request fails with Kafka's error for a failed coordinator write."""
        if self.store is None:
            return
        wanted = self._records(group)
        before = self.written.get(group.group_id, {})
        batch: list[tuple[bytes, bytes | None]] = [(k, v) for k, v in wanted.items() if before.get(k) != v]
        batch += [(k, None) for k in before if k not in wanted]
        if not batch:
            return
        try:
            self.store._write(group.group_id, batch)
        except (OSError, KafkaError) as exc:
            self._revert(group.group_id)
            raise KafkaError(coordinator_write_error(exc)) from exc
        self.written[group.group_id] = wanted

    def _revert(self, group_id: str) -> None:
        """Rebuild a group from the records last written for it (none: it goes away)."""
        logged = list(self.written.get(group_id, {}).items())
        self.unload({group_id})
        self._rebuild(logged)

    def load(self, logged: list[tuple[bytes, bytes | None]]) -> None:
        """Rebuild consumer groups from their replayed records (in log order; last one wins).
        Members come back with their epochs and assignments and must heartbeat within their
        session timeout. An Empty classic group standing for the same id (made from its
        offsets by the classic coordinator's load) is dropped."""
        self._rebuild(logged)
        if self.groups:
            log.info("loaded %d consumer groups", len(self.groups))

    def _rebuild(self, logged: list[tuple[bytes, bytes | None]]) -> None:
        latest: dict[bytes, bytes | None] = {}
        for key, value in logged:
            latest[key] = value
        topics = self._topics()
        for key, value in latest.items():
            decoded = records.decode_key(key)
            if value is None or decoded is None:
                continue
            kind, gid, mid = decoded
            self.written.setdefault(gid, {})[key] = value
            group = self.groups.get(gid) or self.groups.setdefault(gid, ConsumerGroup(gid))
            if kind == records.GROUP_METADATA:
                group.group_epoch = records.decode_epoch(value)
            elif kind == records.TARGET_METADATA:
                group.assignment_epoch = records.decode_epoch(value)
            elif mid is not None:
                member = group.members.get(mid) or group.members.setdefault(mid, ConsumerMember(mid))
                if kind == records.MEMBER_METADATA:
                    meta = records.decode_member_metadata(value)
                    (member.instance_id, member.rack_id, member.client_id, member.client_host,
                     member.subscribed_topic_names, member.subscribed_topic_regex, member.rebalance_timeout_ms,
                     member.server_assignor) = (meta.instance_id, meta.rack_id, meta.client_id, meta.client_host,
                                                meta.subscribed_topic_names, meta.subscribed_topic_regex,
                                                meta.rebalance_timeout_ms, meta.server_assignor)
                    member.classic = meta.classic
                elif kind == records.TARGET_MEMBER:
                    group.target[mid] = records.decode_target_member(value)
                else:
                    current = records.decode_current_assignment(value)
                    member.member_epoch, member.previous_member_epoch = (current.member_epoch,
                                                                         current.previous_member_epoch)
                    member.state = _STATES.get(current.state, MemberState.STABLE)
                    member.assigned, member.pending_revocation = current.assigned, current.pending_revocation
        for gid, group in list(self.groups.items()):
            if records.encode_key(records.GROUP_METADATA, gid) not in self.written.get(gid, {}):
                del self.groups[gid]  # members without their group's record: nothing to restore
                continue
            for mid in [mid for mid in group.members
                        if records.encode_key(records.MEMBER_METADATA, gid, mid) not in self.written[gid]]:
                del group.members[mid]  # an assignment record of a member that was removed
            for member in group.members.values():
                group.claim(member)
                if member.instance_id:
                    group.static_members[member.instance_id] = member.member_id
            group.subscription_metadata = group.compute_subscription_metadata(topics)
            preferred = Counter(assignors.canonical_name(m.server_assignor) for m in group.members.values()
                                if m.server_assignor)
            preferred.pop(None, None)
            group.assignor_name = (preferred.most_common(1)[0][0] if preferred else self.assignors[0]) or ""
            shadow = self.classic.groups.get(gid) if self.classic is not None else None
            if shadow is not None and not shadow.members and self.classic is not None:
                del self.classic.groups[gid]
            for member in group.members.values():
                self._schedule_session(group, member)

    def stop(self) -> None:
        self.unload(set(self.groups))

    def unload(self, group_ids: set[str]) -> None:
        """Drop groups (shutdown, or their offsets partition moved to another broker)."""
        for group_id in group_ids:
            group = self.groups.pop(group_id, None)
            self.written.pop(group_id, None)
            for member in group.members.values() if group is not None else ():
                member.cancel_timers()

    # ----- hooks for offsets and the admin APIs ----------------------------------------------------

    def validate_commit(self, group: ConsumerGroup, member_id: str, member_epoch: int, api_version: int) -> None:
        """OffsetCommit to a consumer group: epoch -1 without members is a simple commit;
        otherwise the member must exist, use v9+, and commit at its current epoch."""
        if member_epoch < 0 and not group.members:
            return
        member = group.members.get(member_id)
        if member is None:
            raise KafkaError(ErrorCode.unknown_member_id)
        if member.classic is not None:
            classic_members.validate_commit(member, member_epoch)
            return
        if api_version < 9:
            raise KafkaError(ErrorCode.unsupported_version,
                             "OffsetCommit version 9 or above must be used by members using the consumer group "
                             "protocol")
        if member_epoch != member.member_epoch:
            raise KafkaError(ErrorCode.stale_member_epoch,
                             f"The member epoch {member_epoch} is stale; the current one is {member.member_epoch}.")

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
        self._forget(group_id)  # raises OSError/KafkaError: nothing deleted
        return ErrorCode.none

    def subscribed_topics(self, group: ConsumerGroup) -> set[str]:
        return set(group.subscription_metadata)

    def expire_offsets(self, now_ms: int, retention_ms: int) -> None:
        """offsets.retention.minutes at ``now_ms`` (Kafka's ConsumerGroup expiration condition):
        offsets of topics no member subscribes to (by name, or a regex matching an existing
        topic) expire ``retention_ms`` after their commit, whatever the group's state; an Empty
        group with no offset left is deleted (tombstones for its records and offsets; Dead)."""
        if self.store is None:
            return
        for group_id, group in list(self.groups.items()):
            if group.dead:
                continue
            subscribed = set(group.subscription_metadata)
            for member in group.members.values():
                subscribed.update(member.subscribed_topic_names)
            try:
                if (self.store.expire_offsets(group_id, now_ms, retention_ms, None, subscribed.__contains__)
                        and group.state is GroupState.EMPTY):
                    self._forget(group_id)
                    self.store.delete_group(group_id)
                    log.info("consumer group %s: offsets expired, group deleted", group_id)
            except (OSError, KafkaError) as exc:
                log.error("expiring offsets of consumer group %s failed: %s", group_id, exc)
