"""ConsumerGroupDescribe (key 69), v0-1 (Kafka 4.3's range): KIP-848 consumer groups.

Each group's state (Empty, Assigning, Reconciling, Stable), group epoch, assignment epoch,
assignor, and members: member epoch, instance and rack ids, client id and host, subscribed
topic names and regex, current assignment and target assignment (topic ids with names).
v1 adds each member's type: 1 (consumer protocol), as every member here uses it.
An unknown group: GROUP_ID_NOT_FOUND "Group X not found."; a classic group:
GROUP_ID_NOT_FOUND "Group X is not a consumer group." (the admin client then falls back to
DescribeGroups, as with Kafka). Authorized operations (when asked): READ, DELETE, DESCRIBE,
as there is no authorizer. While ``group.version`` is finalized below 1 the KIP-848 protocol is
off, as in Kafka: every group is UNSUPPORTED_VERSION.
With an authorizer each group needs DESCRIBE (else GROUP_AUTHORIZATION_FAILED); authorized
operations come from its ACLs.
"""

from __future__ import annotations

from typing import Protocol

from kbroker.groups.assignors import Assignment
from kbroker.handlers.security import HasSecurity, allowed, authorized_operations
from kbroker.handlers.services import HasCatalogue, HasClassicGroups, HasCluster, HasConsumerGroups
from kbroker.network.context import RequestContext
from kbroker.protocol.acl import AclOperation, ResourceType
from kbroker.protocol.codec import NO_THROTTLE, build, response_module
from kbroker.protocol.errors import ErrorCode

API_KEY = 69
MIN_VERSION = 0
MAX_VERSION = 1
_OMITTED = -(2**31)
_GROUP_OPERATIONS = (1 << 3) | (1 << 6) | (1 << 8)  # READ, DELETE, DESCRIBE
_CLASSIC_MEMBER_TYPE, _CONSUMER_MEMBER_TYPE = 0, 1  # KIP-1099


class Services(HasCatalogue, HasClassicGroups, HasConsumerGroups, HasCluster, HasSecurity, Protocol): ...


def _assignment(m: object, assignment: Assignment, names: dict[object, str]) -> object:
    return build(m.Assignment, topic_partitions=tuple(
        build(m.TopicPartitions, topic_id=topic_id, topic_name=names.get(topic_id, ""), partitions=tuple(sorted(ps)))
        for topic_id, ps in sorted(assignment.items(), key=lambda item: names.get(item[0], "")) if ps))


async def handle(ctx: RequestContext[Services], request: object) -> object:
    m = response_module(API_KEY, ctx.api_version)
    services = ctx.services
    names = {info.topic_id: name for name, info in services.catalogue.topics.items()}
    described = []
    _epoch, features = services.cluster.finalized_features()
    switched_off = features.get("group.version", 0) < 1  # KIP-848 is switched on by group.version 1
    for group_id in request.group_ids:
        denied = not switched_off and not allowed(ctx, AclOperation.DESCRIBE, ResourceType.GROUP, group_id)
        operations = authorized_operations(ctx, ResourceType.GROUP, group_id, _GROUP_OPERATIONS) if (
            request.include_authorized_operations and not denied) else _OMITTED
        not_here = (ErrorCode.unsupported_version if switched_off else ErrorCode.group_authorization_failed
                    if denied else services.classic_groups.coordinator_error(group_id))
        if not_here:
            described.append(build(m.DescribedGroup, error_code=not_here, error_message=None, group_id=group_id,
                                   group_state="", group_epoch=0, assignment_epoch=0, assignor_name="", members=(),
                                   authorized_operations=operations))
            continue
        group = services.consumer_groups.group(group_id)
        if group is None:
            classic = services.classic_groups.groups.get(group_id)
            message = f"Group {group_id} is not a consumer group." if classic is not None else \
                f"Group {group_id} not found."
            described.append(build(m.DescribedGroup, error_code=ErrorCode.group_id_not_found, error_message=message,
                                   group_id=group_id, group_state="Dead", group_epoch=0, assignment_epoch=0,
                                   assignor_name="", members=(), authorized_operations=operations))
            continue
        members = tuple(
            build(m.Member, member_id=member.member_id, instance_id=member.instance_id, rack_id=member.rack_id,
                  member_epoch=member.member_epoch, client_id=member.client_id, client_host=member.client_host,
                  subscribed_topic_names=tuple(member.subscribed_topic_names),
                  subscribed_topic_regex=member.subscribed_topic_regex,
                  assignment=_assignment(m, member.assigned, names),
                  target_assignment=_assignment(m, group.target.get(member.member_id, {}), names),
                  member_type=_CLASSIC_MEMBER_TYPE if member.classic is not None else _CONSUMER_MEMBER_TYPE)
            for member in group.members.values())
        described.append(build(m.DescribedGroup, error_code=ErrorCode.none, error_message=None, group_id=group_id,
                               group_state=group.state.value, group_epoch=group.group_epoch,
                               assignment_epoch=group.assignment_epoch, assignor_name=group.assignor_name,
                               members=members, authorized_operations=operations))
    return build(m.ConsumerGroupDescribeResponse, throttle_time=NO_THROTTLE, groups=tuple(described))
