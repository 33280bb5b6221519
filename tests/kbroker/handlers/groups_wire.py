"""Bare classic-group requests (JoinGroup, SyncGroup, Heartbeat, LeaveGroup, OffsetCommit,
OffsetFetch) for the group handler tests, built as kio entities and sent with ``wire.call``."""

from __future__ import annotations

import datetime
import importlib
import struct
from typing import Any

from kio.static.primitive import i32, i64

from .wire import call

SESSION = datetime.timedelta(seconds=6)
REBALANCE = datetime.timedelta(seconds=10)


def _req(api: str, version: int) -> Any:
    return importlib.import_module(f"kio.schema.{api}.v{version}.request")


def subscription(*topics: str) -> bytes:
    """ConsumerProtocolSubscription v0: the topics a consumer member subscribes to."""
    data = struct.pack(">hi", 0, len(topics))
    for topic in topics:
        data += struct.pack(">h", len(topic)) + topic.encode()
    return data + struct.pack(">i", -1)


def join(bootstrap: str, group: str, member_id: str = "", *, version: int = 9, instance: str | None = None,
         protocols: tuple[tuple[str, bytes], ...] = (("range", b"m"),), protocol_type: str = "consumer",
         session: datetime.timedelta = SESSION, timeout: float = 20.0) -> Any:
    m = _req("join_group", version)
    fields: dict[str, Any] = dict(
        group_id=group, session_timeout=session, rebalance_timeout=REBALANCE, member_id=member_id,
        protocol_type=protocol_type, protocols=tuple(m.JoinGroupRequestProtocol(name=n, metadata=d)
                                                     for n, d in protocols))
    if version >= 5:
        fields["group_instance_id"] = instance
    if version >= 8:
        fields["reason"] = None
    return call(bootstrap, m.JoinGroupRequest(**fields), version, timeout=timeout)


def join_known(bootstrap: str, group: str, **kwargs: Any) -> Any:
    """JoinGroup v4+ twice, as clients do: MEMBER_ID_REQUIRED, then with the id it gave."""
    first = join(bootstrap, group, **kwargs)
    assert first.error_code == 79, first
    return join(bootstrap, group, first.member_id, **kwargs)


def sync(bootstrap: str, group: str, generation: int, member_id: str, assignments: dict[str, bytes] | None = None,
         *, instance: str | None = None, protocol_name: str | None = "range", version: int = 5) -> Any:
    m = _req("sync_group", version)
    request = m.SyncGroupRequest(
        group_id=group, generation_id=i32(generation), member_id=member_id, group_instance_id=instance,
        protocol_type="consumer", protocol_name=protocol_name,
        assignments=tuple(m.SyncGroupRequestAssignment(member_id=k, assignment=v)
                          for k, v in (assignments or {}).items()))
    return call(bootstrap, request, version, timeout=20)


def heartbeat(bootstrap: str, group: str, generation: int, member_id: str, instance: str | None = None) -> int:
    m = _req("heartbeat", 4)
    return call(bootstrap, m.HeartbeatRequest(group_id=group, generation_id=i32(generation), member_id=member_id,
                                              group_instance_id=instance), 4).error_code


def leave(bootstrap: str, group: str, members: list[tuple[str, str | None]]) -> Any:
    m = _req("leave_group", 5)
    return call(bootstrap, m.LeaveGroupRequest(group_id=group, members=tuple(
        m.MemberIdentity(member_id=mid, group_instance_id=inst, reason=None) for mid, inst in members)), 5)


def commit(bootstrap: str, group: str, offsets: dict[tuple[str, int], int], *, generation: int = -1,
           member_id: str = "", instance: str | None = None, metadata: str = "meta", version: int = 9) -> list[int]:
    """Error codes, one per partition, in the order of ``offsets``."""
    m = _req("offset_commit", version)
    topics: dict[str, list[Any]] = {}
    for (topic, partition), offset in offsets.items():
        topics.setdefault(topic, []).append(m.OffsetCommitRequestPartition(
            partition_index=i32(partition), committed_offset=i64(offset), committed_leader_epoch=i32(-1),
            committed_metadata=metadata))
    request = m.OffsetCommitRequest(
        group_id=group, generation_id_or_member_epoch=i32(generation), member_id=member_id, group_instance_id=instance,
        topics=tuple(m.OffsetCommitRequestTopic(name=t, partitions=tuple(ps)) for t, ps in topics.items()))
    response = call(bootstrap, request, version)
    return [p.error_code for t in response.topics for p in t.partitions]


def fetch(bootstrap: str, group: str, tps: list[tuple[str, int]] | None, *, require_stable: bool = False
          ) -> dict[tuple[str, int], tuple[int, str, int]]:
    """OffsetFetch v7: (offset, metadata, error) per partition."""
    m = _req("offset_fetch", 7)
    topics = None
    if tps is not None:
        names = dict.fromkeys(t for t, _ in tps)
        topics = tuple(m.OffsetFetchRequestTopic(name=t, partition_indexes=tuple(i32(p) for tt, p in tps if tt == t))
                       for t in names)
    response = call(bootstrap, m.OffsetFetchRequest(group_id=group, topics=topics, require_stable=require_stable), 7)
    assert response.error_code == 0
    return {(t.name, p.partition_index): (p.committed_offset, p.metadata, p.error_code)
            for t in response.topics for p in t.partitions}
