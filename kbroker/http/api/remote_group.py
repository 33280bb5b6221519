"""The console's view of a consumer group another broker coordinates: asked of its coordinator
over the Kafka protocol, as ``kafka-consumer-groups --describe`` asks it.

The coordinator is the leader of the group's ``__consumer_offsets`` partition.
ConsumerGroupDescribe (69, v0) describes a consumer-protocol group (KIP-848); a classic group,
which it answers GROUP_ID_NOT_FOUND, is described with DescribeGroups (15, v5), its members'
assignments decoded as groups_view decodes a local one (DescribeGroups carries no generation).
OffsetFetch (9, v8) gives the committed offsets, and the lag is worked out as for a local group.
A group the coordinator does not know (Dead, with no committed offsets) is None.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kio.schema.consumer_group_describe.v0 import request as consumer_group_describe_v0
from kio.schema.describe_groups.v5 import request as describe_groups_v5
from kio.schema.offset_fetch.v8 import request as offset_fetch_v8

from kbroker.groups.consumer_protocol import shown_assignment
from kbroker.groups.offset_store import CONSUMER_OFFSETS_TOPIC
from kbroker.http.api.remote_messages import NoLeader, leader_of
from kbroker.protocol.codec import build
from kbroker.protocol.errors import ErrorCode, KafkaError
from kbroker.replication.inter_broker_client import InterBrokerClient

if TYPE_CHECKING:
    from kbroker.node.broker import Broker

JSON = dict[str, Any]
CONSUMER_GROUP_DESCRIBE_KEY, CONSUMER_GROUP_DESCRIBE_VERSION = 69, 0
DESCRIBE_GROUPS_KEY, DESCRIBE_GROUPS_VERSION = 15, 5
OFFSET_FETCH_KEY, OFFSET_FETCH_VERSION = 9, 8
TIMEOUT_S = 5.0
Committed = dict[tuple[str, int], tuple[int, str]]  # (topic, partition) -> (offset, metadata)


def coordinator_of(broker: Broker, group_id: str) -> int:
    """The leader of the group's __consumer_offsets partition (-1: none, or no such topic yet)."""
    try:
        return leader_of(broker, CONSUMER_OFFSETS_TOPIC, broker.offset_store.partition_for(group_id))
    except NoLeader:
        return -1


async def describe(broker: Broker, coordinator: int, group_id: str) -> tuple[JSON, Committed]:
    """(what the coordinator says of the group, as groups_view describes one; its committed
    offsets). KafkaError if it cannot say."""
    endpoint = broker.endpoint(coordinator)
    if endpoint is None:
        raise KafkaError(ErrorCode.coordinator_not_available, f"broker {coordinator} has no inter-broker endpoint")
    client = InterBrokerClient(endpoint[0], endpoint[1], None, f"broker-{broker.node_id}-console",
                               broker.link_security)
    try:
        described = await _consumer_group(client, group_id) or await _classic_group(client, group_id)
        committed = await _committed(client, group_id)
    except (ConnectionError, TimeoutError, OSError) as exc:
        raise KafkaError(ErrorCode.coordinator_not_available, f"broker {coordinator}: {exc}") from None
    finally:
        client.close()
    return described, committed


async def _consumer_group(client: InterBrokerClient, group_id: str) -> JSON | None:
    m = consumer_group_describe_v0
    response = await client.request(CONSUMER_GROUP_DESCRIBE_KEY, CONSUMER_GROUP_DESCRIBE_VERSION, build(
        m.ConsumerGroupDescribeRequest, group_ids=(group_id,), include_authorized_operations=False),
        timeout_s=TIMEOUT_S)
    (group,) = response.groups
    if group.error_code == ErrorCode.group_id_not_found:
        return None  # unknown, or a classic group
    if group.error_code != ErrorCode.none:
        raise KafkaError(ErrorCode(group.error_code), group.error_message or "")
    members = [{"member_id": x.member_id, "instance_id": x.instance_id, "client_id": x.client_id,
                "host": x.client_host, "member_epoch": x.member_epoch,
                "assignment": {t.topic_name: sorted(t.partitions) for t in sorted(
                    x.assignment.topic_partitions, key=lambda t: t.topic_name)}}
               for x in group.members]
    return {"type": "consumer", "state": group.group_state, "protocol_type": "consumer",
            "protocol": group.assignor_name, "generation": group.group_epoch, "members": members}


async def _classic_group(client: InterBrokerClient, group_id: str) -> JSON:
    m = describe_groups_v5
    response = await client.request(DESCRIBE_GROUPS_KEY, DESCRIBE_GROUPS_VERSION, build(
        m.DescribeGroupsRequest, groups=(group_id,), include_authorized_operations=False), timeout_s=TIMEOUT_S)
    (group,) = response.groups
    if group.error_code != ErrorCode.none:
        raise KafkaError(ErrorCode(group.error_code), f"DescribeGroups {group_id}")
    members = [{"member_id": x.member_id, "instance_id": x.group_instance_id, "client_id": x.client_id,
                "host": x.client_host, "assignment": shown_assignment(group.protocol_type, x.member_assignment)}
               for x in group.members]
    return {"type": "classic", "state": group.group_state, "protocol_type": group.protocol_type or None,
            "protocol": group.protocol_data or None, "generation": None, "members": members}


async def _committed(client: InterBrokerClient, group_id: str) -> Committed:
    m = offset_fetch_v8
    response = await client.request(OFFSET_FETCH_KEY, OFFSET_FETCH_VERSION, build(
        m.OffsetFetchRequest, groups=(build(m.OffsetFetchRequestGroup, group_id=group_id, topics=None),),
        require_stable=False), timeout_s=TIMEOUT_S)
    (group,) = response.groups
    if group.error_code != ErrorCode.none:
        raise KafkaError(ErrorCode(group.error_code), f"OffsetFetch {group_id}")
    return {(t.name, p.partition_index): (p.committed_offset, p.metadata or "")
            for t in group.topics for p in t.partitions
            if p.error_code == ErrorCode.none and p.committed_offset >= 0}
