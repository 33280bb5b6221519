"""The ConsumerProtocol a classic consumer embeds in JoinGroup and SyncGroup: its subscription
(topics, owned partitions, rack) and its assignment, by topic name.

The group coordinator reads them when classic members join a consumer group and when a classic
group is upgraded, and writes assignments for classic members of consumer groups.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from kbroker.groups.assignors import Assignment
from kbroker.groups.consumer_group import TopicMap


@dataclass(slots=True)
class Subscription:
    version: int
    topics: list[str]
    owned: dict[str, set[int]] | None  # None: v0, which does not report owned partitions
    rack_id: str | None = None


class _Buf:
    def __init__(self, data: bytes) -> None:
        self.data, self.pos = data, 0

    def num(self, fmt: str) -> int:
        (value,) = struct.unpack_from(fmt, self.data, self.pos)
        self.pos += struct.calcsize(fmt)
        return value

    def str(self) -> str | None:
        size = self.num(">h")
        if size < 0:
            return None
        if self.pos + size > len(self.data):
            raise ValueError("truncated string")
        text = self.data[self.pos : self.pos + size].decode()
        self.pos += size
        return text

    def skip_bytes(self) -> None:
        size = self.num(">i")
        self.pos += max(size, 0)

    def partitions(self) -> dict[str, set[int]]:
        out: dict[str, set[int]] = {}
        for _ in range(self.num(">i")):
            topic = self.str() or ""
            out.setdefault(topic, set()).update(self.num(">i") for _ in range(self.num(">i")))
        return out

    @property
    def left(self) -> int:
        return len(self.data) - self.pos


def decode_subscription(data: bytes) -> Subscription:
    """ConsumerProtocolSubscription v0-v3 (later versions read as v3); ValueError if malformed."""
    try:
        buf = _Buf(data)
        version = buf.num(">h")
        if version < 0:
            raise ValueError(f"bad version {version}")
        topics = [buf.str() or "" for _ in range(buf.num(">i"))]
        buf.skip_bytes()
        sub = Subscription(version, topics, None)
        if version >= 1:
            sub.owned = buf.partitions() if buf.left else {}
        if version >= 2 and buf.left >= 4:
            buf.num(">i")  # generation id
        if version >= 3 and buf.left >= 2:
            sub.rack_id = buf.str()
        return sub
    except (struct.error, UnicodeDecodeError) as exc:
        raise ValueError(str(exc)) from None


def decode_assignment(data: bytes) -> dict[str, set[int]]:
    """The partitions of a ConsumerProtocolAssignment (empty bytes: none)."""
    if not data:
        return {}
    try:
        buf = _Buf(data)
        buf.num(">h")
        return buf.partitions()
    except (struct.error, UnicodeDecodeError) as exc:
        raise ValueError(str(exc)) from None


def encode_assignment(version: int, partitions: dict[str, set[int]]) -> bytes:
    """ConsumerProtocolAssignment (same layout in v0-v3; the version is clamped there), null user data."""
    out = [struct.pack(">hi", min(max(version, 0), 3), len(partitions))]
    for topic, ps in sorted(partitions.items()):
        name = topic.encode()
        out.append(struct.pack(">h", len(name)) + name + struct.pack(f">i{len(ps)}i", len(ps), *sorted(ps)))
    out.append(struct.pack(">i", -1))
    return b"".join(out)


def protocol_version(protocols: list[tuple[str, bytes]]) -> int:
    """The ConsumerProtocol version of a classic member's preferred subscription (its
    assignment is answered in that version)."""
    data = protocols[0][1] if protocols else b""
    return struct.unpack_from(">h", data)[0] if len(data) >= 2 else 0


def by_name(topics: TopicMap, partitions: dict[str, set[int]]) -> Assignment:
    """Partitions by topic name (the ConsumerProtocol's) to partitions by topic id (the
    coordinator's); unknown topics are dropped."""
    return {topics[t][0]: set(ps) for t, ps in partitions.items() if t in topics and ps}


def by_id(topics: TopicMap, assignment: Assignment) -> dict[str, set[int]]:
    names = {topic_id: name for name, (topic_id, _) in topics.items()}
    return {names[t]: set(ps) for t, ps in assignment.items() if t in names and ps}
