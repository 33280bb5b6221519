"""Classic members of consumer groups: JoinGroup, SyncGroup, Heartbeat and LeaveGroup from
members using the classic protocol in a group the consumer coordinator drives.

As Kafka 4's group coordinator: after an online upgrade (migration.py), or when a classic
consumer joins a consumer group, classic members keep using JoinGroup / SyncGroup / Heartbeat /
LeaveGroup / OffsetCommit. A JoinGroup updates the member (subscription from its
ConsumerProtocol metadata), bumps the group epoch if that changed, reconciles it against its
target with the partitions its subscription says it owns, and is answered at once with
generation = member epoch (no leader, no member list). SyncGroup returns the member's assigned
partitions in the ConsumerProtocol assignment encoding; REBALANCE_IN_PROGRESS if the group epoch
moved past the member's and it has nothing to revoke. Heartbeat returns REBALANCE_IN_PROGRESS
when the group epoch is ahead of the member's, it must revoke, or partitions it waits for are
free. The group service (coordinator.py) routes these requests here for a consumer group.

Deviation: Kafka's classic-member join and sync timeouts are not armed; the session timeout
(the classic one, from JoinGroup) removes a classic member that stops heartbeating.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING

from kbroker.groups.classic_group import CONSUMER_PROTOCOL_TYPE, JoinResult, SyncResult, leaving_member
from kbroker.groups.consumer_group import ConsumerGroup, ConsumerMember, MemberState
from kbroker.groups.consumer_protocol import by_id, by_name, decode_subscription, encode_assignment, protocol_version
from kbroker.protocol.errors import ErrorCode, KafkaError

if TYPE_CHECKING:
    from kbroker.groups.consumer_coordinator import ConsumerGroupCoordinator


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


def _version(member: ConsumerMember) -> int:
    return protocol_version(member.classic[1] if member.classic else [])


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
            member = cc.replace_static(group, group.members[holder_id], member_id)
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
    topics = cc.topics()
    metadata = group.compute_subscription_metadata(topics)
    if bump or metadata != group.subscription_metadata:
        group.subscription_metadata = metadata
        cc.bump(group, topics, f"classic member {member_id} joined or changed its subscription")
    owned = by_name(cc.topics(), sub.owned or {})
    if member.member_epoch != group.assignment_epoch or member.state is not MemberState.STABLE:
        if group.reconcile(member, owned) and member.state is MemberState.UNREVOKED_PARTITIONS:
            cc.schedule_rebalance_timeout(group, member)
    if member.state is not MemberState.UNREVOKED_PARTITIONS and member.rebalance_timer is not None:
        member.rebalance_timer.cancel()
        member.rebalance_timer = None
    cc.schedule_session(group, member)
    try:
        cc.persist(group)
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
    cc.schedule_session(group, member)
    return SyncResult(ErrorCode.none, CONSUMER_PROTOCOL_TYPE, name,
                      encode_assignment(_version(member), by_id(cc.topics(), member.assigned)))


def heartbeat(cc: ConsumerGroupCoordinator, group: ConsumerGroup, generation: int, member_id: str,
              instance_id: str | None) -> ErrorCode:
    try:
        member = _member(group, member_id, instance_id)
    except KafkaError as exc:
        return exc.code
    if generation != member.member_epoch:
        return ErrorCode.illegal_generation
    cc.schedule_session(group, member)
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
