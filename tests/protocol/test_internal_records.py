"""Internal record formats (protocol/internal_records.py): round trips, and the exact bytes of
each format, which are Kafka's (the expected bytes were produced by kbroker's earlier codecs,
whose logs the compat suite reads with Apache Kafka)."""

from __future__ import annotations

import uuid

import pytest
from kbroker.protocol import internal_records as ir

T = uuid.UUID(int=7)
U = uuid.UUID(int=9)


def test_offset_commit_key_and_value_layout() -> None:
    key = ir.OffsetCommitKey("g", "t", 1)
    assert ir.encode_offset_commit_key(key).hex() == "0001" "00016" "7" "000174" "00000001"
    assert ir.decode_offset_commit_key(ir.encode_offset_commit_key(key)) == key
    value = ir.OffsetCommitValue(5, 2, "m", 7)
    encoded = ir.encode_offset_commit_value(value)
    # v4 as Kafka 4.3.1 writes it: compact metadata, no tagged field without a topic id
    assert encoded.hex() == "0004" "0000000000000005" "00000002" "026d" "0000000000000007" "00"
    assert ir.decode_offset_commit_value(encoded) == value
    # a v0 key has the same layout; a group metadata key (version 2) is not an offset commit
    assert ir.decode_offset_commit_key(bytes.fromhex("0000000167000174" "00000003")) == ir.OffsetCommitKey("g", "t", 3)
    assert ir.decode_offset_commit_key(ir.encode_group_metadata_key("g")) is None


def test_offset_commit_value_v4_carries_the_topic_id_as_tag_0() -> None:
    value = ir.OffsetCommitValue(5, -1, "", 7, T)
    encoded = ir.encode_offset_commit_value(value)
    assert encoded.hex() == "0004" "0000000000000005" "ffffffff" "01" "0000000000000007" "01" "00" "10" + T.bytes.hex()
    assert ir.decode_offset_commit_value(encoded) == value
    # a zero id is left out, as Kafka leaves out Uuid.ZERO_UUID
    assert ir.encode_offset_commit_value(ir.OffsetCommitValue(5, -1, "", 7, uuid.UUID(int=0))).hex().endswith("00")


def test_offset_commit_values_of_every_older_version_are_read() -> None:
    v0 = "0000" "0000000000000005" "00016d" "0000000000000007"
    v1 = "0001" "0000000000000005" "00016d" "0000000000000007" "0000000000000009"  # + expire timestamp
    v2 = "0002" "0000000000000005" "00016d" "0000000000000007"
    v3 = "0003" "0000000000000005" "00000002" "00016d" "0000000000000007"
    for raw, epoch in ((v0, -1), (v1, -1), (v2, -1), (v3, 2)):
        assert ir.decode_offset_commit_value(bytes.fromhex(raw)) == ir.OffsetCommitValue(5, epoch, "m", 7)


GROUP_VALUE_HEX = (
    "0003" "0008636f6e73756d6572" "00000003" "000572616e6765" "00026d31" "00000000000004d2" "00000002"
    "00026d31" "00026931" "000163" "000168" "0000012c" "00000064" "00000003737562" "00000003617367"
    "00026d32" "ffff" "00026332" "00026832" "00000190" "000000c8" "00000000" "00000000")


def test_group_metadata_key_and_value_layout() -> None:
    assert ir.encode_group_metadata_key("g").hex() == "0002" "000167"
    assert ir.decode_group_metadata_key(ir.encode_group_metadata_key("g")) == "g"
    assert ir.decode_group_metadata_key(ir.encode_offset_commit_key(ir.OffsetCommitKey("g", "t", 0))) is None
    value = ir.GroupMetadataValue("consumer", 3, "range", "m1", 1234, [
        ir.GroupMemberValue("m1", "i1", "c", "h", 300, 100, b"sub", b"asg"),
        ir.GroupMemberValue("m2", None, "c2", "h2", 400, 200, b"", b"")])
    encoded = ir.encode_group_metadata_value(value)
    assert encoded.hex() == GROUP_VALUE_HEX
    assert ir.decode_group_metadata_value(encoded) == value


def test_group_metadata_value_v0_takes_the_session_timeout_as_rebalance_timeout() -> None:
    v0 = bytes.fromhex("0000" "0008636f6e73756d6572" "00000001" "000572616e6765" "00026d31" "00000001"
                       "00026d31" "000163" "000168" "00000064" "00000000" "ffffffff")
    decoded = ir.decode_group_metadata_value(v0)
    assert decoded is not None
    assert decoded.current_state_timestamp == -1
    assert decoded.members == [ir.GroupMemberValue("m1", None, "c", "h", 100, 100, b"", b"")]
    assert ir.decode_group_metadata_value(bytes.fromhex("0004")) is None  # flexible v4: not read


def test_consumer_group_keys_and_epochs() -> None:
    assert ir.encode_consumer_group_key(ir.CONSUMER_GROUP_METADATA, "g").hex() == "0003" "000167"
    member_key = ir.encode_consumer_group_key(ir.CONSUMER_MEMBER_METADATA, "g", "m")
    assert member_key.hex() == "0005" "000167" "00016d"
    assert ir.decode_consumer_group_key(member_key) == (ir.CONSUMER_MEMBER_METADATA, "g", "m")
    assert ir.decode_consumer_group_key(ir.encode_consumer_group_key(ir.CONSUMER_TARGET_METADATA, "g")) == (
        ir.CONSUMER_TARGET_METADATA, "g", None)
    assert ir.decode_consumer_group_key(bytes.fromhex("0004000167")) is None  # partition metadata: skipped
    assert ir.decode_consumer_group_key(ir.encode_group_metadata_key("g")) is None
    assert ir.encode_consumer_epoch(5).hex() == "0000" "00000005" "00"
    assert ir.decode_consumer_epoch(ir.encode_consumer_epoch(5)) == 5


def test_consumer_member_metadata_layout_with_and_without_a_classic_member() -> None:
    plain = ir.ConsumerMemberMetadata(None, None, "c", "h", [], None, 5000, None)
    assert ir.encode_consumer_member_metadata(plain).hex() == (
        "0000" "00" "00" "0263" "0268" "01" "00" "00001388" "00" "00")
    assert ir.decode_consumer_member_metadata(ir.encode_consumer_member_metadata(plain)) == plain
    classic = ir.ConsumerMemberMetadata("i", "r", "c", "h", ["t", "u"], "re.*", 5000, "uniform",
                                        (6000, [("range", b"\x00\x01"), ("rr", b"")]))
    encoded = ir.encode_consumer_member_metadata(classic)
    assert encoded.hex() == (
        "0000" "0269" "0272" "0263" "0268" "03" "0274" "0275" "0572652e2a" "00001388" "08756e69666f726d"
        "01" "00" "15" "00001770" "03" "0672616e6765" "030001" "00" "037272" "01" "00" "00")  # tag 0, 21 bytes
    assert ir.decode_consumer_member_metadata(encoded) == classic


def test_unknown_tagged_fields_are_skipped() -> None:
    plain = ir.encode_consumer_member_metadata(ir.ConsumerMemberMetadata(None, None, "c", "h", [], None, 5000, None))
    with_tag_9 = plain[:-1] + bytes.fromhex("01" "09" "02" "abcd")
    assert ir.decode_consumer_member_metadata(with_tag_9).classic is None


def test_consumer_assignments_layout() -> None:
    assignment = {T: {1, 0}, U: {2}}
    encoded = ir.encode_consumer_target_member(assignment)
    assert encoded.hex() == ("0000" "03" + T.hex + "03" "00000000" "00000001" "00" + U.hex + "02" "00000002" "00"
                             "00")
    assert ir.decode_consumer_target_member(encoded) == assignment
    current = ir.ConsumerMemberAssignment(4, 3, 1, {T: {0}}, {U: {2}})
    encoded = ir.encode_consumer_member_assignment(current)
    assert encoded.hex() == ("0000" "00000004" "00000003" "01" "02" + T.hex + "02" "00000000" "00"
                             "02" + U.hex + "02" "00000002" "00" "00")
    assert ir.decode_consumer_member_assignment(encoded) == current
    assert ir.encode_consumer_target_member({T: set()}).hex() == "0000" "01" "00"  # empty topics left out


def test_transaction_log_key_v0_and_value_v1_layout_and_v0_still_read() -> None:
    assert ir.encode_transaction_key("tx").hex() == "0000" "00027478"
    assert ir.decode_transaction_key(ir.encode_transaction_key("tx")) == "tx"
    value = ir.TransactionLogValue(1000, 3, 60000, 1, {("t", 0), ("t", 1), ("u", 2)}, 111, 99)
    encoded = ir.encode_transaction_value(value)
    # v1 even for a transaction version 0/1 client, as Kafka 4.3.1 writes it: no tags at the defaults
    assert encoded.hex() == (
        "0001" "00000000000003e8" "0003" "0000ea60" "01" "03" "0274" "03" "00000000" "00000001" "00"
        "0275" "02" "00000002" "00" "000000000000006f" "0000000000000063" "00")
    assert ir.decode_transaction_value(encoded) == value
    v0 = bytes.fromhex(
        "0000" "00000000000003e8" "0003" "0000ea60" "01" "00000002" "000174" "00000002" "00000000" "00000001"
        "000175" "00000001" "00000002" "000000000000006f" "0000000000000063")
    assert ir.decode_transaction_value(v0) == value
    # an Empty state's partitions: a null array, as Kafka writes it (read back as none)
    empty = ir.TransactionLogValue(1000, 3, 60000, 0, set(), 111, -1)
    assert ir.encode_transaction_value(empty).hex() == (
        "0001" "00000000000003e8" "0003" "0000ea60" "00" "00" "000000000000006f" "ffffffffffffffff" "00")
    assert ir.decode_transaction_value(ir.encode_transaction_value(empty)) == empty


def test_transaction_log_value_v1_carries_the_transaction_version_2_fields_as_tags() -> None:
    value = ir.TransactionLogValue(1000, 3, 60000, 1, {("t", 0), ("t", 1), ("u", 2)}, 111, 99,
                                   previous_producer_id=7, client_transaction_version=2)
    encoded = ir.encode_transaction_value(value)
    assert encoded.hex() == (
        "0001" "00000000000003e8" "0003" "0000ea60" "01" "03" "0274" "03" "00000000" "00000001" "00"
        "0275" "02" "00000002" "00" "000000000000006f" "0000000000000063"
        "02" "00" "08" "0000000000000007" "02" "02" "0002")  # tags 0 and 2; tag 1 (-1) left out
    assert ir.decode_transaction_value(encoded) == value
    value.next_producer_id = 8
    assert ir.decode_transaction_value(ir.encode_transaction_value(value)) == value


def test_truncated_records_raise_value_error() -> None:
    encoded = ir.encode_group_metadata_value(ir.GroupMetadataValue("consumer", 1, "range", "m", 5, [
        ir.GroupMemberValue("m", None, "c", "h", 1, 1, b"abc", b"")]))
    for cut in (1, 10, len(encoded) - 2):
        with pytest.raises(ValueError):
            ir.decode_group_metadata_value(encoded[:cut])
    with pytest.raises(ValueError):
        ir.decode_consumer_member_metadata(bytes.fromhex("0000" "ff"))  # a varint that never ends


def test_reader_and_writer_primitives_round_trip() -> None:
    w = (ir.Writer().fixed(">b", -1).int16(-2).int32(-3).int64(-4).uvarint(300).string(None).string("é")
         .blob(b"xy").compact_string(None).compact_string("s").compact_blob(b"z").compact_count(2)
         .tagged_fields([(1, b"\x07")]))
    r = ir.Reader(bytes(w))
    assert (r.int8(), r.int16(), r.int32(), r.int64(), r.uvarint()) == (-1, -2, -3, -4, 300)
    assert (r.string(), r.string(), r.blob(), r.compact_string(), r.compact_string()) == (None, "é", b"xy", None, "s")
    assert (r.compact_blob(), r.compact_count()) == (b"z", 2)
    assert r.tagged_fields()[1].int8() == 7
    assert r.remaining == 0
