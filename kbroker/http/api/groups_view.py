"""Consumer groups coordinated by this broker: type, state, members, assignment, and lag.

Lag per partition is what kafka-consumer-groups --describe shows: the partition's end offset
(its high watermark, which is what a read_uncommitted consumer can reach: this broker's replica's,
else its leader's, asked as /metrics asks it, kbroker.metrics.end_offsets) minus the group's
committed offset. Each broker coordinates the groups whose ``__consumer_offsets`` partition it
leads; the list also names the groups the other live brokers coordinate, asked with ListGroups
over the inter-broker listener (``coordinator``: the broker that answered), without their
members and lag; a group's own page asks its coordinator for those (``remote_group``).
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from kio.schema.list_groups.v5 import request as list_groups_v5

from kbroker.groups.consumer_protocol import shown_assignment
from kbroker.http.api import remote_group
from kbroker.metrics.end_offsets import end_offsets
from kbroker.protocol.codec import build
from kbroker.replication.inter_broker_client import InterBrokerClient

if TYPE_CHECKING:
    from kbroker.node.broker import Broker

JSON = dict[str, Any]
LIST_GROUPS_KEY, LIST_GROUPS_VERSION = 16, 5
REMOTE_TIMEOUT_S = 5.0


def _group_ids(broker: Broker) -> set[str]:
    return (set(broker.group_coordinator.groups) | set(broker.consumer_coordinator.groups)
            | set(broker.offset_store.committed))


def _classic(broker: Broker, group_id: str) -> JSON | None:
    group = broker.group_coordinator.groups.get(group_id)
    if group is None:
        return None
    members = [{"member_id": member.member_id, "instance_id": member.group_instance_id,
                "client_id": member.client_id, "host": member.client_host,
                "assignment": shown_assignment(group.protocol_type, member.assignment)}
               for member in group.members.values()]
    return {"type": "classic", "state": group.state.value, "protocol_type": group.protocol_type,
            "protocol": group.protocol_name, "generation": group.generation_id, "members": members}


def _consumer(broker: Broker, group_id: str) -> JSON | None:
    group = broker.consumer_coordinator.groups.get(group_id)
    if group is None:
        return None
    names = {image.topic_id: name for name, image in broker.lifecycle.image.topics.items()} \
        if broker.lifecycle is not None else {}
    members = [{"member_id": m.member_id, "instance_id": m.instance_id, "client_id": m.client_id,
                "host": m.client_host, "member_epoch": m.member_epoch,
                "assignment": {names.get(tid, str(tid)): sorted(p) for tid, p in sorted(
                    m.assigned.items(), key=lambda item: names.get(item[0], str(item[0])))}}
               for m in group.members.values()]
    return {"type": "consumer", "state": group.state.value, "protocol_type": "consumer",
            "protocol": group.assignor_name, "generation": group.group_epoch, "members": members}


def _describe(broker: Broker, group_id: str) -> JSON:
    found = _consumer(broker, group_id) or _classic(broker, group_id)
    return found or {"type": "classic", "state": "Empty", "protocol_type": None, "protocol": None,
                     "generation": 0, "members": []}


async def _lag(broker: Broker, group_id: str) -> list[JSON]:
    return await _lag_rows(broker, {key: (committed.offset, committed.metadata)
                                    for key, committed in broker.offset_store.fetch(group_id).items()})


async def _lag_rows(broker: Broker, committed_offsets: dict[tuple[str, int], tuple[int, str]]) -> list[JSON]:
    """Per partition: the committed offset, the end offset and their difference."""
    ends = await end_offsets(broker, committed_offsets) if committed_offsets else {}
    rows = []
    for (topic, index), (committed, metadata) in sorted(committed_offsets.items()):
        end = ends.get((topic, index))
        rows.append({"topic": topic, "partition": index, "committed_offset": committed,
                     "end_offset": end, "lag": None if end is None else max(end - committed, 0),
                     "metadata": metadata})
    return rows


async def _listed_by(broker: Broker, broker_id: int) -> list[JSON] | str:
    """The groups broker ``broker_id`` coordinates (ListGroups v5), or why it could not say."""
    endpoint = broker.endpoint(broker_id)
    if endpoint is None:
        return "no inter-broker endpoint"
    client = InterBrokerClient(endpoint[0], endpoint[1], None, f"broker-{broker.node_id}-console",
                               broker.link_security)
    try:
        response = await client.request(LIST_GROUPS_KEY, LIST_GROUPS_VERSION,
                                        build(list_groups_v5.ListGroupsRequest), timeout_s=REMOTE_TIMEOUT_S)
    except (ConnectionError, TimeoutError, OSError) as exc:
        return str(exc)
    finally:
        client.close()
    return [{"group_id": g.group_id, "type": g.group_type, "state": g.group_state, "coordinator": broker_id}
            for g in response.groups]


async def groups(broker: Broker) -> JSON:
    out = []
    ids = sorted(_group_ids(broker))
    lags = await asyncio.gather(*(_lag(broker, group_id) for group_id in ids))
    for group_id, lag in zip(ids, lags, strict=True):
        described = _describe(broker, group_id)
        out.append({"group_id": group_id, "type": described["type"], "state": described["state"],
                    "members": len(described["members"]), "coordinator": broker.node_id,
                    "total_lag": sum(row["lag"] or 0 for row in lag)})
    others = [b for b, _h, _p, _r in broker.live_brokers() if b != broker.node_id]
    answers = await asyncio.gather(*(_listed_by(broker, b) for b in others))
    unreachable = {}
    for broker_id, answer in zip(others, answers, strict=True):
        if isinstance(answer, str):
            unreachable[broker_id] = answer
        else:
            out.extend({**g, "members": None, "total_lag": None} for g in answer)
    out.sort(key=lambda g: g["group_id"])
    return {"groups": out, "this_broker": broker.node_id, "unreachable": unreachable}


async def group(broker: Broker, group_id: str) -> JSON | None:
    """One group, from this broker if it coordinates it, else from its coordinator (KafkaError if
    that one cannot be asked); None for a group nobody knows."""
    where = {"coordinator_partition": broker.offset_store.partition_for(group_id), "this_broker": broker.node_id}
    if group_id in _group_ids(broker):
        return {"group_id": group_id, **_describe(broker, group_id), "lag": await _lag(broker, group_id),
                **where, "coordinator": broker.node_id}
    coordinator = remote_group.coordinator_of(broker, group_id)
    if coordinator < 0 or coordinator == broker.node_id:
        return None
    described, committed = await remote_group.describe(broker, coordinator, group_id)
    if described["state"] == "Dead" and not committed:
        return None
    return {"group_id": group_id, **described, "lag": await _lag_rows(broker, committed), **where,
            "coordinator": coordinator}
