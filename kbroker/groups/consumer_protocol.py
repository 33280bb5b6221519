"""The ConsumerProtocol a classic consumer embeds in JoinGroup and SyncGroup: its subscription
(topics, owned partitions, rack) and its assignment, by topic name.

The group coordinator reads them when classic members join a consumer group and when a classic
group is upgraded, and writes assignments for classic members of consumer groups. The bytes are
Kafka's non-flexible types, read and written with protocol/internal_records.py's Reader and Writer.
"""

from __future__ import annotations

from dataclasses import dataclass

from kbroker.groups.assignors import Assignment
from kbroker.groups.consumer_group import TopicMap
from kbroker.protocol.internal_records import Reader, Writer


@dataclass(slots=True)
class Subscription:
    version: int
    topics: list[str]
    owned: dict[str, set[int]] | None  # None: v0, which does not report owned partitions
    rack_id: str | None = None


def _partitions(r: Reader) -> dict[str, set[int]]:
    out: dict[str, set[int]] = {}
    for _ in range(r.int32()):
        topic = r.string() or ""
        out.setdefault(topic, set()).update(r.int32() for _ in range(r.int32()))
    return out


def decode_subscription(data: bytes) -> Subscription:
    """ConsumerProtocolSubscription v0-v3 (later versions read as v3); ValueError if malformed."""
    r = Reader(data)
    version = r.int16()
    if version < 0:
        raise ValueError(f"bad version {version}")
    topics = [r.string() or "" for _ in range(r.int32())]
    r.blob()  # user data
    sub = Subscription(version, topics, None)
    if version >= 1:
        sub.owned = _partitions(r) if r.remaining else {}
    if version >= 2 and r.remaining >= 4:
        r.int32()  # generation id
    if version >= 3 and r.remaining >= 2:
        sub.rack_id = r.string()
    return sub


def decode_assignment(data: bytes) -> dict[str, set[int]]:
    """The partitions of a ConsumerProtocolAssignment (empty bytes: none); ValueError if malformed."""
    if not data:
        return {}
    r = Reader(data)
    r.int16()
    return _partitions(r)


def shown_assignment(protocol_type: str | None, data: bytes | None) -> dict[str, list[int]]:
    """A classic member's assignment as topic -> sorted partitions, for display: decoded when its
    group uses the consumer protocol, else (or if the bytes are a client's own format) empty."""
    if protocol_type != "consumer" or not data:
        return {}
    try:
        assignment = decode_assignment(data)
    except Exception:  # a client's own assignment format: shown as unknown, not a failure
        return {}
    return {topic: sorted(partitions) for topic, partitions in sorted(assignment.items())}


def encode_assignment(version: int, partitions: dict[str, set[int]]) -> bytes:
    """ConsumerProtocolAssignment (same layout in v0-v3; the version is clamped there), null user data."""
    w = Writer().int16(min(max(version, 0), 3)).int32(len(partitions))
    for topic, ps in sorted(partitions.items()):
        w.string(topic).int32(len(ps))
        for p in sorted(ps):
            w.int32(p)
    return bytes(w.int32(-1))


def protocol_version(protocols: list[tuple[str, bytes]]) -> int:
    """The ConsumerProtocol version of a classic member's preferred subscription (its
    assignment is answered in that version)."""
    data = protocols[0][1] if protocols else b""
    return Reader(data).int16() if len(data) >= 2 else 0


def by_name(topics: TopicMap, partitions: dict[str, set[int]]) -> Assignment:
    """Partitions by topic name (the ConsumerProtocol's) to partitions by topic id (the
    coordinator's); unknown topics are dropped."""
    return {topics[t][0]: set(ps) for t, ps in partitions.items() if t in topics and ps}


def by_id(topics: TopicMap, assignment: Assignment) -> dict[str, set[int]]:
    names = {topic_id: name for name, (topic_id, _) in topics.items()}
    return {names[t]: set(ps) for t, ps in assignment.items() if t in names and ps}
