"""Group metadata records in Kafka's layout (GroupMetadataKey v2 / GroupMetadataValue v3), and
ClassicGroup's rules: protocol selection across members and the topics members subscribe to."""

from __future__ import annotations

import struct

from kbroker.groups.classic_group import ClassicGroup, Member
from kbroker.groups.group_metadata import (
    GroupRecord,
    MemberRecord,
    decode_group_key,
    decode_group_value,
    encode_group_key,
    encode_group_value,
)
from kbroker.groups.offset_store import decode, encode_key


def test_key_is_kafkas_group_metadata_key_v2_and_not_an_offset_key() -> None:
    key = encode_group_key("my-group")
    assert key == b"\x00\x02\x00\x08my-group"
    assert decode_group_key(key) == "my-group"
    assert decode(key, None) is None  # the offsets decoder leaves group records alone
    assert decode_group_key(encode_key("my-group", "t", 0)) is None


def test_value_v3_round_trips_and_matches_kafkas_field_order() -> None:
    record = GroupRecord("consumer", 7, "range", "m-1", 1_700_000_000_000, [
        MemberRecord("m-1", "static-1", "client", "/127.0.0.1", 30000, 6000, b"sub", b"assign"),
        MemberRecord("m-2", None, "client", "/127.0.0.2", 30000, 6000, b"", b""),
    ])
    value = encode_group_value(record)
    assert value[:2] == b"\x00\x03"
    assert value[2:14] == b"\x00\x08consumer" + struct.pack(">i", 7)[:2]  # protocol type, then generation
    assert decode_group_value(value) == record


def test_value_v0_is_read_with_the_session_timeout_as_rebalance_timeout() -> None:
    v0 = (struct.pack(">h", 0) + b"\x00\x08consumer" + struct.pack(">i", 3) + b"\x00\x05range" + b"\x00\x01m"
          + struct.pack(">i", 1) + b"\x00\x01m" + b"\x00\x01c" + b"\x00\x01h" + struct.pack(">i", 10000)
          + struct.pack(">i", 2) + b"ab" + struct.pack(">i", 1) + b"x")
    record = decode_group_value(v0)
    assert record is not None and record.current_state_timestamp == -1
    assert record.members == [MemberRecord("m", None, "c", "h", 10000, 10000, b"ab", b"x")]


def _member(member_id: str, *protocols: tuple[str, bytes]) -> Member:
    return Member(member_id, None, "c", "h", 1000, 1000, "consumer", list(protocols))


def test_protocol_selection_votes_among_protocols_every_member_supports() -> None:
    group = ClassicGroup("g", 0)
    group.protocol_type = "consumer"
    group.members = {
        "a": _member("a", ("range", b""), ("roundrobin", b"")),
        "b": _member("b", ("roundrobin", b""), ("range", b"")),
        "c": _member("c", ("sticky", b""), ("roundrobin", b""), ("range", b"")),
    }
    assert group.supported_protocols() == {"range", "roundrobin"}
    assert group.select_protocol() == "roundrobin"  # b and c prefer it (c's first choice is unsupported)
    assert group.supports("consumer", [("range", b"")]) and not group.supports("consumer", [("sticky", b"")])
    assert not group.supports("connect", [("range", b"")])


def test_subscribed_topics_come_from_consumer_protocol_subscriptions() -> None:
    def subscription(*topics: str) -> bytes:
        data = struct.pack(">hi", 1, len(topics))
        for topic in topics:
            data += struct.pack(">h", len(topic)) + topic.encode()
        return data + struct.pack(">i", -1)

    group = ClassicGroup("g", 0)
    group.protocol_type, group.protocol_name = "consumer", "range"
    group.members = {"a": _member("a", ("range", subscription("t1", "t2"))), "b": _member("b", ("range",
                                                                                              subscription("t3")))}
    assert group.subscribed_topics() == {"t1", "t2", "t3"}
    group.members["c"] = _member("c", ("range", b"\x00"))
    assert group.subscribed_topics() is None  # unreadable: every topic counts as subscribed
