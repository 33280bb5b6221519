"""Classic members of consumer groups and the online migration between the two group protocols.

As Kafka 4's group coordinator (KIP-848 "upgrade/downgrade", ``group.consumer.migration.policy``
= bidirectional, upgrade, downgrade or disabled):

- **Upgrade**: a ConsumerGroupHeartbeat joining a classic group with members converts it into a
  consumer group when the policy allows the upgrade, every member uses the ``consumer``
  protocol type with a parseable embedded ConsumerProtocol subscription, and the group fits
  ``group.consumer.max.size``. The classic members become *classic members* of the consumer
  group: epoch = the classic generation, assigned = target = their last classic assignment.
  Parked JoinGroup/SyncGroup requests are answered REBALANCE_IN_PROGRESS.
- Classic members keep using JoinGroup / SyncGroup / Heartbeat / LeaveGroup / OffsetCommit.
  A JoinGroup updates the member (subscription from its ConsumerProtocol metadata), bumps the
  group epoch if that changed, reconciles it against its target with the partitions its
  subscription says it owns, and is answered at once with generation = member epoch (no
  leader, no member list). SyncGroup returns the member's assigned partitions in the
  ConsumerProtocol assignment encoding; REBALANCE_IN_PROGRESS if the group epoch moved past
  the member's and it has nothing to revoke. Heartbeat returns REBALANCE_IN_PROGRESS when the
  group epoch is ahead of the member's, it must revoke, or partitions it waits for are free.
- **Downgrade**: when the last consumer-protocol member leaves (or is fenced) and the remaining
  members are all classic members, the policy allows it and they fit ``group.max.size``, the
  group becomes a classic group again (generation = group epoch, each member's assignment =
  its target) and a rebalance is prepared.

Deviation: Kafka's classic-member join and sync timeouts are not armed; the session timeout
(the classic one, from JoinGroup) removes a classic member that stops heartbeating.
"""

from __future__ import annotations

import logging
import struct
import time
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING

from kbroker.groups.classic_group import (
    CONSUMER_PROTOCOL_TYPE,
    ClassicGroup,
    JoinResult,
    Member,
    SyncResult,
    leaving_member,
)
from kbroker.groups.classic_group import GroupState as ClassicState
from kbroker.groups.consumer_group import ConsumerGroup, ConsumerMember, MemberState
from kbroker.groups.group_metadata import encode_group_key
from kbroker.protocol.errors import ErrorCode, KafkaError

if TYPE_CHECKING:
    from kbroker.groups.assignors import Assignment
    from kbroker.groups.consumer_coordinator import ConsumerGroupCoordinator

log = logging.getLogger(__name__)

POLICIES = ("bidirectional", "upgrade", "downgrade", "disabled")


# ----- ConsumerProtocol (the embedded subscription and assignment) --------------------------

@dataclass(slots=True)
class Subscription:
    version: int
    topics: list[str]
    owned: dict[str, set[int]] | None  # None: v0, which does not report owned partitions
    rack_id: str | None = None


class _Buf:
    def __init__(self, data: bytes) -> None:
        self.data, self.pos = data, 0

    def num(self, fmt: str) -> int:
        (value,) = struct.unpack_from(fmt, self.data, self.pos)
        self.pos += struct.calcsize(fmt)
        return value

    def str(self) -> str | None:
        size = self.num(">h")
        if size < 0:
            return None
        if self.pos + size > len(self.data):
            raise ValueError("truncated string")
        text = self.data[self.pos : self.pos + size].decode()
        self.pos += size
        return text

    def skip_bytes(self) -> None:
        size = self.num(">i")
        self.pos += max(size, 0)

    def partitions(self) -> dict[str, set[int]]:
        out: dict[str, set[int]] = {}
        for _ in range(self.num(">i")):
            topic = self.str() or ""
            out.setdefault(topic, set()).update(self.num(">i") for _ in range(self.num(">i")))
        return out

    @property
    def left(self) -> int:
        return len(self.data) - self.pos


def decode_subscription(data: bytes) -> Subscription:
    """ConsumerProtocolSubscription v0-v3 (later versions read as v3); ValueError if malformed."""
    try:
        buf = _Buf(data)
        version = buf.num(">h")
        if version < 0:
            raise ValueError(f"bad version {version}")
        topics = [buf.str() or "" for _ in range(buf.num(">i"))]
        buf.skip_bytes()
        sub = Subscription(version, topics, None)
        if version >= 1:
            sub.owned = buf.partitions() if buf.left else {}
        if version >= 2 and buf.left >= 4:
            buf.num(">i")  # generation id
        if version >= 3 and buf.left >= 2:
            sub.rack_id = buf.str()
        return sub
    except (struct.error, UnicodeDecodeError) as exc:
        raise ValueError(str(exc)) from None


def decode_assignment(data: bytes) -> dict[str, set[int]]:
    """The partitions of a ConsumerProtocolAssignment (empty bytes: none)."""
    if not data:
        return {}
    try:
        buf = _Buf(data)
        buf.num(">h")
        return buf.partitions()
    except (struct.error, UnicodeDecodeError) as exc:
        raise ValueError(str(exc)) from None


def encode_assignment(version: int, partitions: dict[str, set[int]]) -> bytes:
    """ConsumerProtocolAssignment (same layout in v0-v3; the version is clamped there), null user data."""
    out = [struct.pack(">hi", min(max(version, 0), 3), len(partitions))]
    for topic, ps in sorted(partitions.items()):
        name = topic.encode()
        out.append(struct.pack(">h", len(name)) + name + struct.pack(f">i{len(ps)}i", len(ps), *sorted(ps)))
    out.append(struct.pack(">i", -1))
    return b"".join(out)


def _protocol_version(member: ConsumerMember) -> int:
    protocols = member.classic[1] if member.classic else []
    data = protocols[0][1] if protocols else b""
    return struct.unpack_from(">h", data)[0] if len(data) >= 2 else 0


# ----- helpers ------------------------------------------------------------------------------

def _by_name(cc: ConsumerGroupCoordinator, partitions: dict[str, set[int]]) -> Assignment:
    """Topic names to topic ids (unknown topics dropped)."""
    topics = cc._topics()
    return {topics[t][0]: set(ps) for t, ps in partitions.items() if t in topics and ps}


def _by_id(cc: ConsumerGroupCoordinator, assignment: Assignment) -> dict[str, set[int]]:
    names = {topic_id: name for name, (topic_id, _) in cc._topics().items()}
    return {names[t]: set(ps) for t, ps in assignment.items() if t in names and ps}


def _common_protocols(group: ConsumerGroup, except_id: str | None = None) -> set[str] | None:
    """Protocol names every other classic member supports (None: no other classic member)."""
    common: set[str] | None = None
    for m in group.members.values():
        if m.classic is not None and m.member_id != except_id:
            names = {name for name, _ in m.classic[1]}
            common = names if common is None else common & names
    return common


def _member(group: ConsumerGroup, member_id: str, instance_id: str | None) -> ConsumerMember:
    """Kafka's validateConsumerGroupMember plus "the member must use the classic protocol"."""
    if instance_id is not None:
        holder = group.static_members.get(instance_id)
        if holder is None:
            raise KafkaError(ErrorCode.unknown_member_id)
        if holder != member_id:
            raise KafkaError(ErrorCode.fenced_instance_id)
    member = group.members.get(member_id)
    if member is None or member.classic is None:
        raise KafkaError(ErrorCode.unknown_member_id)
    return member


# ----- upgrade / downgrade --------------------------------------------------------------------

def upgrade(cc: ConsumerGroupCoordinator, classic: ClassicGroup) -> ConsumerGroup | None:
    """Convert a classic group with members into a consumer group, or None when not allowed."""
    coordinator = cc.classic
    if coordinator is None or cc.migration_policy not in ("bidirectional", "upgrade"):
        return None
    if classic.protocol_type != CONSUMER_PROTOCOL_TYPE or len(classic.members) > cc.max_size:
        return None
    group = ConsumerGroup(classic.group_id)
    group.group_epoch = group.assignment_epoch = classic.generation_id
    try:
        for m in classic.members.values():
            sub = decode_subscription(m.metadata(classic.protocol_name))
            assigned = _by_name(cc, decode_assignment(m.assignment))
            member = ConsumerMember(m.member_id, instance_id=m.group_instance_id, rack_id=sub.rack_id,
                                    client_id=m.client_id, client_host=m.client_host,
                                    rebalance_timeout_ms=m.rebalance_timeout_ms,
                                    subscribed_topic_names=list(sub.topics), member_epoch=classic.generation_id,
                                    previous_member_epoch=classic.generation_id, assigned=assigned,
                                    classic=(m.session_timeout_ms, list(m.protocols)))
            group.members[m.member_id] = member
            group.target[m.member_id] = {t: set(ps) for t, ps in assigned.items()}
            if m.group_instance_id:
                group.static_members[m.group_instance_id] = m.member_id
    except ValueError as exc:
        log.info("cannot upgrade classic group %s: malformed consumer protocol (%s)", classic.group_id, exc)
        return None
    # Tombstone the classic group's metadata first: if that fails, the group stays classic.
    if cc.store is not None:
        cc.store._write(classic.group_id, [(encode_group_key(classic.group_id), None)])
    for m in classic.members.values():
        coordinator._cancel_session(m)
        if m.join_future is not None and not m.join_future.done():
            m.join_future.set_result(JoinResult(ErrorCode.rebalance_in_progress, m.member_id))
        if m.sync_future is not None and not m.sync_future.done():
            m.sync_future.set_result(SyncResult(ErrorCode.rebalance_in_progress))
    for timer in (classic.join_timer, classic.sync_timer, *classic.pending_members.values()):
        if timer is not None:
            timer.cancel()
    classic.transition(ClassicState.DEAD, classic.state_timestamp)
    del coordinator.groups[classic.group_id]
    cc.groups[classic.group_id] = group
    for member in group.members.values():
        group.claim(member)
        cc._schedule_session(group, member)
    group.subscription_metadata = group.compute_subscription_metadata(cc._topics())
    log.info("classic group %s upgraded to a consumer group (%d classic members)", group.group_id,
             len(group.members))
    return group


def maybe_downgrade(cc: ConsumerGroupCoordinator, group: ConsumerGroup, leaving_id: str) -> bool:
    """Before ``leaving_id`` is removed: turn the group back into a classic group if only
    classic members remain and the policy allows it (True: done, the member is gone)."""
    coordinator = cc.classic
    rest = [m for m in group.members.values() if m.member_id != leaving_id]
    if coordinator is None or not rest or any(m.classic is None for m in rest):
        return False
    if cc.migration_policy not in ("bidirectional", "downgrade") or len(rest) > coordinator.max_size:
        return False
    now = int(time.time() * 1000)
    classic = ClassicGroup(group.group_id, now)
    classic.generation_id, classic.protocol_type = group.group_epoch, CONSUMER_PROTOCOL_TYPE
    for m in rest:
        session_ms, protocols = m.classic or (cc.session_timeout_ms, [])
        member = Member(m.member_id, m.instance_id, m.client_id, m.client_host, m.rebalance_timeout_ms,
                        session_ms, CONSUMER_PROTOCOL_TYPE, list(protocols), is_new=False)
        member.assignment = encode_assignment(_protocol_version(m), _by_id(cc, group.target.get(m.member_id, {})))
        classic.members[m.member_id] = member
        if m.instance_id:
            classic.static_members[m.instance_id] = m.member_id
    classic.protocol_name = classic.select_protocol()
    classic.leader_id = next(iter(classic.members))
    classic.transition(ClassicState.STABLE, now)
    try:
        cc._forget(group.group_id)  # tombstones for the consumer group's records
    except (OSError, KafkaError) as exc:
        log.error("downgrading group %s failed: %s", group.group_id, exc)
        return False
    for m in group.members.values():
        m.cancel_timers()
    coordinator.groups[group.group_id] = classic
    coordinator._store(classic)
    for member in classic.members.values():
        coordinator._schedule_session(classic, member)
    coordinator._prepare_rebalance(classic, f"downgrade of group {group.group_id} from consumer to classic")
    log.info("consumer group %s downgraded to a classic group (%d members)", group.group_id, len(rest))
    return True


# ----- classic requests to a consumer group ---------------------------------------------------

def join(cc: ConsumerGroupCoordinator, group: ConsumerGroup, member_id: str, instance_id: str | None,
         protocol_type: str, protocols: list[tuple[str, bytes]], session_ms: int, rebalance_ms: int,
         client_id: str, client_host: str, require_known_member_id: bool) -> JoinResult:
    unknown = not member_id
    member_id = member_id or str(uuid.uuid4())
    if member_id not in group.members and len(group.members) >= cc.max_size:
        return JoinResult(ErrorCode.group_max_size_reached, member_id)
    common = _common_protocols(group, member_id)
    names = {name for name, _ in protocols}
    if protocol_type != CONSUMER_PROTOCOL_TYPE or not protocols or (common is not None and not common & names):
        return JoinResult(ErrorCode.inconsistent_group_protocol, member_id)
    try:
        sub = decode_subscription(protocols[0][1])
    except ValueError:
        return JoinResult(ErrorCode.inconsistent_group_protocol, member_id)
    if unknown and require_known_member_id and instance_id is None:
        return JoinResult(ErrorCode.member_id_required, member_id)
    member = group.members.get(member_id)
    if instance_id is not None:
        holder_id = group.static_members.get(instance_id)
        if holder_id is not None and holder_id != member_id:
            if not unknown:
                return JoinResult(ErrorCode.fenced_instance_id, member_id)
            member = cc._replace_static(group, group.members[holder_id], member_id)
    elif member is not None and member.classic is None:
        return JoinResult(ErrorCode.unknown_member_id, member_id)
    is_new = member is None
    if member is None:
        member = ConsumerMember(member_id, instance_id=instance_id)
        group.members[member_id] = member
        if instance_id is not None:
            group.static_members[instance_id] = member_id
    member.rack_id = sub.rack_id
    member.rebalance_timeout_ms = rebalance_ms
    member.server_assignor = None
    member.client_id, member.client_host = client_id, client_host
    member.classic = (session_ms, list(protocols))
    bump = is_new or sorted(sub.topics) != sorted(member.subscribed_topic_names) or (
        member.subscribed_topic_regex is not None)
    member.subscribed_topic_names, member.subscribed_topic_regex = list(sub.topics), None
    topics = cc._topics()
    metadata = group.compute_subscription_metadata(topics)
    if bump or metadata != group.subscription_metadata:
        group.subscription_metadata = metadata
        cc._bump(group, topics, f"classic member {member_id} joined or changed its subscription")
    owned = _by_name(cc, sub.owned or {})
    if member.member_epoch != group.assignment_epoch or member.state is not MemberState.STABLE:
        if group.reconcile(member, owned) and member.state is MemberState.UNREVOKED_PARTITIONS:
            cc._schedule_rebalance_timeout(group, member)
    if member.state is not MemberState.UNREVOKED_PARTITIONS and member.rebalance_timer is not None:
        member.rebalance_timer.cancel()
        member.rebalance_timer = None
    cc._schedule_session(group, member)
    try:
        cc._persist(group)
    except KafkaError as exc:  # not written: the group is back to what the log holds
        return JoinResult(exc.code, member_id)
    return JoinResult(ErrorCode.none, member_id, member.member_epoch, CONSUMER_PROTOCOL_TYPE, protocols[0][0], "")


def sync(cc: ConsumerGroupCoordinator, group: ConsumerGroup, generation: int, member_id: str,
         instance_id: str | None, protocol_type: str | None, protocol_name: str | None) -> SyncResult:
    try:
        member = _member(group, member_id, instance_id)
    except KafkaError as exc:
        return SyncResult(exc.code)
    if generation != member.member_epoch:
        return SyncResult(ErrorCode.illegal_generation)
    name = member.classic[1][0][0] if member.classic and member.classic[1] else None
    if (protocol_type is not None and protocol_type != CONSUMER_PROTOCOL_TYPE) or (
            protocol_name is not None and protocol_name != name):
        return SyncResult(ErrorCode.inconsistent_group_protocol)
    if group.group_epoch > member.member_epoch and member.state is not MemberState.UNREVOKED_PARTITIONS:
        return SyncResult(ErrorCode.rebalance_in_progress)
    cc._schedule_session(group, member)
    return SyncResult(ErrorCode.none, CONSUMER_PROTOCOL_TYPE, name,
                      encode_assignment(_protocol_version(member), _by_id(cc, member.assigned)))


def heartbeat(cc: ConsumerGroupCoordinator, group: ConsumerGroup, generation: int, member_id: str,
              instance_id: str | None) -> ErrorCode:
    try:
        member = _member(group, member_id, instance_id)
    except KafkaError as exc:
        return exc.code
    if generation != member.member_epoch:
        return ErrorCode.illegal_generation
    cc._schedule_session(group, member)
    if (member.member_epoch < group.group_epoch or member.state is MemberState.UNREVOKED_PARTITIONS
            or (member.state is MemberState.UNRELEASED_PARTITIONS and not _waiting(group, member))):
        return ErrorCode.rebalance_in_progress
    return ErrorCode.none


def _waiting(group: ConsumerGroup, member: ConsumerMember) -> bool:
    """Whether a partition of its target it does not have yet is still held by another member."""
    for topic_id, ps in group.target.get(member.member_id, {}).items():
        for p in ps - member.assigned.get(topic_id, set()):
            if group.owner_epoch(topic_id, p) != -1:
                return True
    return False


def leave(cc: ConsumerGroupCoordinator, group: ConsumerGroup,
          members: list[tuple[str, str | None]]) -> tuple[ErrorCode, list[ErrorCode]]:
    errors = []
    for member_id, instance_id in members:
        member_id, error = leaving_member(group.static_members, member_id, instance_id)
        if error is not ErrorCode.none:
            errors.append(error)
            continue
        member = group.members.get(member_id)
        if member is None or member.classic is None:
            errors.append(ErrorCode.unknown_member_id)
            continue
        try:
            cc.remove_member(group, member_id, "left the group (LeaveGroup)")
        except KafkaError as exc:
            errors.append(exc.code)
            continue
        errors.append(ErrorCode.none)
        if group.dead:  # downgraded: the classic coordinator has the group now
            break
    return ErrorCode.none, errors


def validate_commit(member: ConsumerMember, generation: int) -> None:
    """OffsetCommit from a classic member: its generation is its member epoch."""
    if generation != member.member_epoch:
        raise KafkaError(ErrorCode.illegal_generation)
