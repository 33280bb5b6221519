"""Consumer groups coordinated by this broker: type, state, members, assignment, and lag.

Lag per partition is what kafka-consumer-groups --describe shows: the partition's end offset
(its high watermark, which is what a read_uncommitted consumer can reach) minus the group's
committed offset. Each broker coordinates the groups whose ``__consumer_offsets`` partition it
leads, so a group appears in the console of its coordinator (``coordinator`` says which
partition of ``__consumer_offsets`` that is).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kbroker.groups.consumer_protocol import decode_assignment

if TYPE_CHECKING:
    from kbroker.node.broker import Broker

JSON = dict[str, Any]


def _group_ids(broker: Broker) -> set[str]:
    return (set(broker.group_coordinator.groups) | set(broker.consumer_coordinator.groups)
            | set(broker.offset_store.committed))


def _classic(broker: Broker, group_id: str) -> JSON | None:
    group = broker.group_coordinator.groups.get(group_id)
    if group is None:
        return None
    members = []
    for member in group.members.values():
        assignment: dict[str, set[int]] = {}
        if group.protocol_type == "consumer" and member.assignment:
            try:
                assignment = decode_assignment(member.assignment)
            except Exception:  # a client's own assignment format: shown as unknown, not a failure
                assignment = {}
        members.append({"member_id": member.member_id, "instance_id": member.group_instance_id,
                        "client_id": member.client_id, "host": member.client_host,
                        "assignment": {t: sorted(p) for t, p in sorted(assignment.items())}})
    return {"type": "classic", "state": group.state.name, "protocol_type": group.protocol_type,
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
    return {"type": "consumer", "state": group.state.name, "protocol_type": "consumer",
            "protocol": group.assignor_name, "generation": group.group_epoch, "members": members}


def _describe(broker: Broker, group_id: str) -> JSON:
    found = _consumer(broker, group_id) or _classic(broker, group_id)
    return found or {"type": "classic", "state": "EMPTY", "protocol_type": None, "protocol": None,
                     "generation": 0, "members": []}


def _lag(broker: Broker, group_id: str) -> list[JSON]:
    rows = []
    for (topic, index), committed in sorted(broker.offset_store.fetch(group_id).items()):
        partition = broker.replica_manager.partitions.get((topic, index))
        end = partition.high_watermark if partition is not None else None
        rows.append({"topic": topic, "partition": index, "committed_offset": committed.offset,
                     "end_offset": end, "lag": None if end is None else max(end - committed.offset, 0),
                     "metadata": committed.metadata})
    return rows


def groups(broker: Broker) -> JSON:
    out = []
    for group_id in sorted(_group_ids(broker)):
        described = _describe(broker, group_id)
        lag = _lag(broker, group_id)
        out.append({"group_id": group_id, "type": described["type"], "state": described["state"],
                    "members": len(described["members"]),
                    "total_lag": sum(row["lag"] or 0 for row in lag)})
    return {"groups": out, "this_broker": broker.node_id}


def group(broker: Broker, group_id: str) -> JSON | None:
    if group_id not in _group_ids(broker):
        return None
    return {"group_id": group_id, **_describe(broker, group_id), "lag": _lag(broker, group_id),
            "coordinator_partition": broker.offset_store.partition_for(group_id),
            "this_broker": broker.node_id}
