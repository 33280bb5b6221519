"""Online migration between the two group protocols: the conversions of a group from one type
into the other, and the policy that allows them.

As Kafka 4's group coordinator (KIP-848 "upgrade/downgrade", ``group.consumer.migration.policy``
= bidirectional, upgrade, downgrade or disabled):

- **Upgrade**: a ConsumerGroupHeartbeat joining a classic group with members converts it into a
  consumer group when the policy allows the upgrade, every member uses the ``consumer``
  protocol type with a parseable embedded ConsumerProtocol subscription, and the group fits
  ``group.consumer.max.size``. The classic members become *classic members* of the consumer
  group: epoch = the classic generation, assigned = target = their last classic assignment.
- **Downgrade**: when the last consumer-protocol member leaves (or is fenced) and the remaining
  members are all classic members, the policy allows it and they fit ``group.max.size``, the
  group becomes a classic group again (generation = group epoch, each member's assignment =
  its target) and a rebalance is prepared.

Only the conversions live here; the consumer coordinator decides when to convert and does the
writes, the timers and the registry update.
"""

from __future__ import annotations

from kbroker.groups.classic_group import CONSUMER_PROTOCOL_TYPE, ClassicGroup, GroupState, Member
from kbroker.groups.consumer_group import ConsumerGroup, ConsumerMember, TopicMap
from kbroker.groups.consumer_protocol import (
    by_id,
    by_name,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    protocol_version,
)

POLICIES = ("bidirectional", "upgrade", "downgrade", "disabled")


def allows_upgrade(policy: str) -> bool:
    return policy in ("bidirectional", "upgrade")


def allows_downgrade(policy: str) -> bool:
    return policy in ("bidirectional", "downgrade")


def to_consumer_group(classic: ClassicGroup, topics: TopicMap) -> ConsumerGroup:
    """The consumer group a classic group with members becomes (ValueError: a member's
    ConsumerProtocol subscription or assignment is malformed, so it cannot be upgraded)."""
    group = ConsumerGroup(classic.group_id)
    group.group_epoch = group.assignment_epoch = classic.generation_id
    for m in classic.members.values():
        sub = decode_subscription(m.metadata(classic.protocol_name))
        assigned = by_name(topics, decode_assignment(m.assignment))
        group.members[m.member_id] = ConsumerMember(
            m.member_id, instance_id=m.group_instance_id, rack_id=sub.rack_id, client_id=m.client_id,
            client_host=m.client_host, rebalance_timeout_ms=m.rebalance_timeout_ms,
            subscribed_topic_names=list(sub.topics), member_epoch=classic.generation_id,
            previous_member_epoch=classic.generation_id, assigned=assigned,
            classic=(m.session_timeout_ms, list(m.protocols)))
        group.target[m.member_id] = {t: set(ps) for t, ps in assigned.items()}
        if m.group_instance_id:
            group.static_members[m.group_instance_id] = m.member_id
    group.subscription_metadata = group.compute_subscription_metadata(topics)
    return group


def to_classic_group(group: ConsumerGroup, members: list[ConsumerMember], topics: TopicMap,
                     default_session_ms: int, now_ms: int) -> ClassicGroup:
    """The classic group the classic ``members`` of a consumer group become, Stable at
    generation = group epoch, each member assigned its target."""
    classic = ClassicGroup(group.group_id, now_ms)
    classic.generation_id, classic.protocol_type = group.group_epoch, CONSUMER_PROTOCOL_TYPE
    for m in members:
        session_ms, protocols = m.classic or (default_session_ms, [])
        member = Member(m.member_id, m.instance_id, m.client_id, m.client_host, m.rebalance_timeout_ms,
                        session_ms, CONSUMER_PROTOCOL_TYPE, list(protocols), is_new=False)
        member.assignment = encode_assignment(protocol_version(protocols),
                                              by_id(topics, group.target.get(m.member_id, {})))
        classic.members[m.member_id] = member
        if m.instance_id:
            classic.static_members[m.instance_id] = m.member_id
    classic.protocol_name = classic.select_protocol()
    classic.leader_id = next(iter(classic.members))
    classic.transition(GroupState.STABLE, now_ms)
    return classic
