"""ConsumerGroupLog: what ``__consumer_offsets`` holds for each consumer group, and its replay.

A consumer group is written as Kafka's consumer group records (``protocol/internal_records.py``):
one group metadata and one target assignment metadata record, and per member its metadata,
its target assignment and its current assignment. The log keeps, per group, the value last
written under each key, so a change appends only the records that differ (tombstones for
members gone), and a change that could not be written can be undone by rebuilding the group
from what the log holds.
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING

from kbroker.groups import assignors
from kbroker.groups.consumer_group import ConsumerGroup, ConsumerMember, MemberState, TopicMap
from kbroker.protocol import internal_records as records

if TYPE_CHECKING:
    from kbroker.groups.offset_store import OffsetStore

# Kafka's MemberState codes in ConsumerGroupCurrentMemberAssignmentValue.State
_STATE_CODES = {MemberState.STABLE: 0, MemberState.UNREVOKED_PARTITIONS: 1, MemberState.UNRELEASED_PARTITIONS: 2}
_STATES = {code: state for state, code in _STATE_CODES.items()}

Logged = list[tuple[bytes, bytes | None]]


def preferred_assignor(group: ConsumerGroup, default: str) -> str:
    """The server assignor most members ask for (Kafka's rule), else ``default``."""
    preferred = Counter(assignors.canonical_name(m.server_assignor) for m in group.members.values()
                        if m.server_assignor)
    preferred.pop(None, None)
    return (preferred.most_common(1)[0][0] if preferred else default) or default


def _records(group: ConsumerGroup) -> dict[bytes, bytes]:
    gid = group.group_id
    key = records.encode_consumer_group_key
    out = {key(records.CONSUMER_GROUP_METADATA, gid): records.encode_consumer_epoch(group.group_epoch),
           key(records.CONSUMER_TARGET_METADATA, gid): records.encode_consumer_epoch(group.assignment_epoch)}
    for mid, m in group.members.items():
        out[key(records.CONSUMER_MEMBER_METADATA, gid, mid)] = records.encode_consumer_member_metadata(
            records.ConsumerMemberMetadata(m.instance_id, m.rack_id, m.client_id, m.client_host,
                                           m.subscribed_topic_names, m.subscribed_topic_regex, m.rebalance_timeout_ms,
                                           m.server_assignor, m.classic))
        out[key(records.CONSUMER_TARGET_MEMBER, gid, mid)] = records.encode_consumer_target_member(
            group.target.get(mid, {}))
        out[key(records.CONSUMER_CURRENT_ASSIGNMENT, gid, mid)] = records.encode_consumer_member_assignment(
            records.ConsumerMemberAssignment(m.member_epoch, m.previous_member_epoch, _STATE_CODES[m.state],
                                             m.assigned, m.pending_revocation))
    return out


def _apply(group: ConsumerGroup, kind: int, member_id: str | None, value: bytes) -> None:
    if kind == records.CONSUMER_GROUP_METADATA:
        group.group_epoch = records.decode_consumer_epoch(value)
        return
    if kind == records.CONSUMER_TARGET_METADATA:
        group.assignment_epoch = records.decode_consumer_epoch(value)
        return
    if member_id is None:
        return
    member = group.members.get(member_id) or group.members.setdefault(member_id, ConsumerMember(member_id))
    if kind == records.CONSUMER_MEMBER_METADATA:
        meta = records.decode_consumer_member_metadata(value)
        (member.instance_id, member.rack_id, member.client_id, member.client_host, member.subscribed_topic_names,
         member.subscribed_topic_regex, member.rebalance_timeout_ms, member.server_assignor, member.classic) = (
            meta.instance_id, meta.rack_id, meta.client_id, meta.client_host, meta.subscribed_topic_names,
            meta.subscribed_topic_regex, meta.rebalance_timeout_ms, meta.server_assignor, meta.classic)
    elif kind == records.CONSUMER_TARGET_MEMBER:
        group.target[member_id] = records.decode_consumer_target_member(value)
    else:
        current = records.decode_consumer_member_assignment(value)
        member.member_epoch, member.previous_member_epoch = current.member_epoch, current.previous_member_epoch
        member.state = _STATES.get(current.state, MemberState.STABLE)
        member.assigned, member.pending_revocation = current.assigned, current.pending_revocation


class ConsumerGroupLog:
    def __init__(self, store: OffsetStore | None) -> None:
        self.store = store  # None: nothing is written (a coordinator tested on its own)
        # group id -> record key -> value last written for it (what the log holds for the group)
        self.written: dict[str, dict[bytes, bytes]] = {}

    def persist(self, group: ConsumerGroup) -> None:
        """Append the records that changed since the last write; raises OSError/KafkaError if
        they cannot be written (then the log still holds the previous state)."""
        if self.store is None:
            return
        wanted = _records(group)
        before = self.written.get(group.group_id, {})
        batch: Logged = [(k, v) for k, v in wanted.items() if before.get(k) != v]
        batch += [(k, None) for k in before if k not in wanted]
        if batch:
            self.store.write_records(group.group_id, batch)
            self.written[group.group_id] = wanted

    def delete(self, group_id: str) -> None:
        """Tombstones for every record of the group (raises if they cannot be written; then the
        log still holds the group)."""
        tombstones: Logged = [(key, None) for key in self.written.get(group_id, {})]
        if tombstones and self.store is not None:
            self.store.write_records(group_id, tombstones)
        self.written.pop(group_id, None)

    def forget(self, group_id: str) -> Logged:
        """Stop tracking a group (unloaded, or about to be rebuilt); returns what the log holds for it."""
        return list(self.written.pop(group_id, {}).items())

    def rebuild(self, logged: Logged, topics: TopicMap, default_assignor: str) -> list[ConsumerGroup]:
        """The groups replayed records describe (in log order; the last value of a key wins).
        Records of a member without its member metadata, or of a group without its group
        metadata, are of something removed: nothing is restored from them."""
        latest: dict[bytes, bytes | None] = dict(logged)
        groups: dict[str, ConsumerGroup] = {}
        for key, value in latest.items():
            decoded = records.decode_consumer_group_key(key)
            if value is None or decoded is None:
                continue
            kind, gid, mid = decoded
            self.written.setdefault(gid, {})[key] = value
            _apply(groups.get(gid) or groups.setdefault(gid, ConsumerGroup(gid)), kind, mid, value)
        rebuilt = []
        for gid, group in groups.items():
            written = self.written[gid]
            if records.encode_consumer_group_key(records.CONSUMER_GROUP_METADATA, gid) not in written:
                continue
            for mid in [mid for mid in group.members
                        if records.encode_consumer_group_key(records.CONSUMER_MEMBER_METADATA, gid, mid)
                        not in written]:
                del group.members[mid]
            for member in group.members.values():
                group.claim(member)
                if member.instance_id:
                    group.static_members[member.instance_id] = member.member_id
            group.subscription_metadata = group.compute_subscription_metadata(topics)
            group.assignor_name = preferred_assignor(group, default_assignor)
            rebuilt.append(group)
        return rebuilt
