"""Group metadata records next to offsets in ``__consumer_offsets`` (their layout is tested in
tests/protocol/test_internal_records.py), and ClassicGroup's rules: protocol selection across
members and the topics members subscribe to."""

from __future__ import annotations

import struct

from kbroker.protocol.internal_records import decode_group_metadata_key, encode_group_metadata_key

from kbroker.groups.classic_group import ClassicGroup, Member
from kbroker.groups.offset_store import decode, encode_key


def test_group_metadata_key_is_not_an_offset_key() -> None:
    key = encode_group_metadata_key("my-group")
    assert key == b"\x00\x02\x00\x08my-group"
    assert decode(key, None) is None  # the offsets decoder leaves group records alone
    assert decode_group_metadata_key(encode_key("my-group", "t", 0)) is None


def test_a_stored_group_record_keeps_what_the_classic_group_has() -> None:
    group = ClassicGroup("g", 5)
    group.protocol_type, group.protocol_name, group.generation_id, group.leader_id = "consumer", "range", 7, "a"
    group.members = {"a": _member("a", ("range", b"sub"))}
    group.members["a"].assignment = b"assign"
    record = group.to_record()
    assert (record.protocol_type, record.generation, record.protocol, record.leader, record.current_state_timestamp) \
        == ("consumer", 7, "range", "a", 5)
    assert [(m.member_id, m.subscription, m.assignment) for m in record.members] == [("a", b"sub", b"assign")]


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
