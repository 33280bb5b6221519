"""ConsumerGroupHeartbeat (68) and ConsumerGroupDescribe (69) on the wire: both versions, the
error codes and messages Kafka gives, OffsetCommit / OffsetFetch v9+ member-epoch checks for
consumer groups, and DescribeGroups v6 refusing a consumer group as Kafka does."""

from __future__ import annotations

import datetime
import uuid

from confluent_kafka.admin import NewTopic
from kbroker.protocol.errors import ErrorCode
from kio.schema.consumer_group_describe.v1 import request as describe_v1
from kio.schema.consumer_group_heartbeat.v0 import request as hb_v0
from kio.schema.consumer_group_heartbeat.v1 import request as hb_v1
from kio.schema.describe_groups.v6 import request as describe_groups_v6
from kio.schema.offset_commit.v9 import request as commit_v9
from kio.schema.offset_fetch.v9 import request as fetch_v9

from tests.kbroker.handlers.wire import call

REBALANCE = datetime.timedelta(seconds=30)
UNCHANGED = datetime.timedelta(milliseconds=-1)


def join(bootstrap: str, group: str, member: str, topics: tuple[str, ...], version: int = 1, **kw: object) -> object:
    module = hb_v1 if version == 1 else hb_v0
    return call(bootstrap, module.ConsumerGroupHeartbeatRequest(
        group_id=group, member_id=member, member_epoch=kw.pop("epoch", 0), rebalance_timeout=REBALANCE,
        subscribed_topic_names=topics, topic_partitions=(), **kw), version)


def test_join_heartbeat_describe_and_leave(broker, cadmin) -> None:
    for future in cadmin.create_topics([NewTopic("cgh", 4, 1)]).values():
        future.result(timeout=15)
    member = str(uuid.uuid4())
    joined = join(broker.bootstrap, "wire-g", member, ("cgh",))
    assert (joined.error_code, joined.member_id, joined.member_epoch) == (ErrorCode.none, member, 2)
    assert joined.heartbeat_interval == datetime.timedelta(seconds=5)  # group.consumer.heartbeat.interval.ms
    [assigned] = joined.assignment.topic_partitions
    assert sorted(assigned.partitions) == [0, 1, 2, 3]

    described = call(broker.bootstrap, describe_v1.ConsumerGroupDescribeRequest(
        group_ids=("wire-g", "nope"), include_authorized_operations=False), 1).groups
    assert (described[0].error_code, described[0].group_state, described[0].group_epoch,
            described[0].assignment_epoch, described[0].assignor_name) == (ErrorCode.none, "Stable", 2, 2, "uniform")
    [m] = described[0].members
    assert (m.member_id, m.member_epoch, m.subscribed_topic_names, m.member_type) == (member, 2, ("cgh",), 1)
    assert [(t.topic_name, sorted(t.partitions)) for t in m.assignment.topic_partitions] == [("cgh", [0, 1, 2, 3])]
    assert (described[1].error_code, described[1].error_message) == (ErrorCode.group_id_not_found,
                                                                      "Group nope not found.")

    # OffsetCommit v9 at the member's epoch, then at a stale one; OffsetFetch v9 likewise.
    def commit(epoch: int) -> int:
        response = call(broker.bootstrap, commit_v9.OffsetCommitRequest(
            group_id="wire-g", generation_id_or_member_epoch=epoch, member_id=member, group_instance_id=None,
            topics=(commit_v9.OffsetCommitRequestTopic(name="cgh", partitions=(
                commit_v9.OffsetCommitRequestPartition(partition_index=0, committed_offset=3,
                                                       committed_leader_epoch=-1, committed_metadata=""),)),)), 9)
        return response.topics[0].partitions[0].error_code

    assert commit(2) == ErrorCode.none  # a new group's first epoch is 2, as Kafka 4.3's
    assert commit(0) == ErrorCode.stale_member_epoch

    def fetch(epoch: int) -> int:
        response = call(broker.bootstrap, fetch_v9.OffsetFetchRequest(groups=(fetch_v9.OffsetFetchRequestGroup(
            group_id="wire-g", member_id=member, member_epoch=epoch, topics=None),), require_stable=False), 9)
        return response.groups[0].error_code

    assert fetch(2) == ErrorCode.none
    assert fetch(7) == ErrorCode.stale_member_epoch

    # The classic DescribeGroups does not describe consumer groups, as Kafka's.
    classic = call(broker.bootstrap, describe_groups_v6.DescribeGroupsRequest(
        groups=("wire-g",), include_authorized_operations=False), 6).groups[0]
    assert (classic.error_code, classic.error_message, classic.group_state) == (
        ErrorCode.group_id_not_found, "Group wire-g is not a classic group.", "Dead")

    left = call(broker.bootstrap, hb_v1.ConsumerGroupHeartbeatRequest(
        group_id="wire-g", member_id=member, member_epoch=-1, rebalance_timeout=UNCHANGED, topic_partitions=None), 1)
    assert (left.error_code, left.member_epoch) == (ErrorCode.none, -1)
    described = call(broker.bootstrap, describe_v1.ConsumerGroupDescribeRequest(
        group_ids=("wire-g",), include_authorized_operations=False), 1).groups
    assert (described[0].group_state, described[0].group_epoch, described[0].members) == ("Empty", 3, ())


def test_errors(broker) -> None:
    b = broker.bootstrap
    empty_id = join(b, "wire-e", "", ("cgh",))
    assert (empty_id.error_code, empty_id.error_message) == (ErrorCode.invalid_request, "MemberId can't be empty.")
    v0 = join(b, "wire-e", "", ("cgh",), version=0)  # v0: the coordinator picks the member id
    assert v0.error_code == ErrorCode.none and v0.member_id
    assert join(b, "wire-e", "m", ("cgh",), server_assignor="sticky").error_code == ErrorCode.unsupported_assignor
    assert join(b, "wire-e", "m", (), subscribed_topic_regex="(?<=a)b").error_code == \
        ErrorCode.invalid_regular_expression
    unknown = call(b, hb_v1.ConsumerGroupHeartbeatRequest(
        group_id="wire-e", member_id="ghost", member_epoch=3, rebalance_timeout=UNCHANGED, topic_partitions=None), 1)
    assert unknown.error_code == ErrorCode.unknown_member_id
    fenced = call(b, hb_v1.ConsumerGroupHeartbeatRequest(
        group_id="wire-e", member_id=v0.member_id, member_epoch=v0.member_epoch + 5, rebalance_timeout=UNCHANGED,
        topic_partitions=None), 1)
    assert fenced.error_code == ErrorCode.fenced_member_epoch
    assert join(b, "wire-s", "s1", ("cgh",), instance_id="i").error_code == ErrorCode.none
    assert join(b, "wire-s", "s2", ("cgh",), instance_id="i").error_code == ErrorCode.unreleased_instance_id
