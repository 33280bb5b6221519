"""Bad input at a live broker: the Kafka error code, or a clean close of that one connection.

Raw sockets (requests encoded with kio's ``entity_writer``, batches with ``build_batch``) plus
confluent-kafka's admin client where it can say the same thing. Each case checks that the
broker process is still running, that another connection is unaffected, and — where the input
carried records — that the partition's segment files are byte-identical afterwards.

Random garbage at a live broker is tests/end_to_end/test_garbage_input.py.
"""

from __future__ import annotations

import datetime
import os
import struct

import pytest
from confluent_kafka import KafkaError as ConfluentKafkaError
from confluent_kafka.admin import AdminClient, NewTopic
from kbroker.protocol.record_builder import build_batch
from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.schema.create_topics.v7 import request as create_topics_v7
from kio.schema.find_coordinator.v4 import request as find_coordinator_v4
from kio.schema.metadata.v12 import request as metadata_v12
from kio.static.primitive import i8, i16, i32

from tests.broker_process import BrokerProcess
from tests.end_to_end.raw_kafka import (
    DEADLINE_S,
    ERR_COORDINATOR_NOT_AVAILABLE,
    ERR_CORRUPT_MESSAGE,
    ERR_INVALID_TOPIC,
    ERR_MESSAGE_TOO_LARGE,
    ERR_UNKNOWN_TOPIC_OR_PARTITION,
    ERR_UNSUPPORTED_VERSION,
    MAX_MESSAGE_BYTES,
    SOCKET_REQUEST_MAX_BYTES,
    RawClient,
    assert_alive,
    encode_request,
    metadata,
    produce,
    records,
    segment_bytes,
)


@pytest.fixture(scope="module")
def topic(broker: BrokerProcess) -> str:
    """A 1-partition topic (auto-created by Metadata) with 3 records in it."""
    name = "bad-input"
    client = RawClient(broker)
    try:
        response = metadata(client, [name])
        assert response.topics[0].error_code == 0
        result = produce(client, name, 0, build_batch(records(3, "seed")))
        assert result.error_code == 0 and result.base_offset == 0
    finally:
        client.close()
    return name


# --- framing ------------------------------------------------------------------------------


@pytest.mark.parametrize("size", [SOCKET_REQUEST_MAX_BYTES + 1, 0x7FFFFFFF, -1, -(2**31)])
def test_bad_size_prefix_closes_only_that_connection(broker: BrokerProcess, size: int) -> None:
    bystander = RawClient(broker)  # opened before the bad one
    bad = RawClient(broker)
    try:
        bystander.api_versions()
        bad.send(struct.pack(">i", size) + b"\x00" * 16)
        bad.assert_closed_by_broker()
        bystander.api_versions()
    finally:
        bystander.close()
        bad.close()
    assert_alive(broker)


def test_size_prefix_at_the_limit_is_read_not_refused(broker: BrokerProcess) -> None:
    """Exactly socket.request.max.bytes is allowed: the broker waits for the body (no close)."""
    client = RawClient(broker)
    try:
        client.send(struct.pack(">i", SOCKET_REQUEST_MAX_BYTES) + b"\x00" * 1000)
        client.sock.settimeout(0.3)
        with pytest.raises(TimeoutError):
            client.sock.recv(1)  # neither an answer nor a close: it is waiting for the rest
    finally:
        client.close()
    assert_alive(broker)


@pytest.mark.parametrize("sent", [0, 2, 3, 7, 50])
def test_truncated_frame_then_close(broker: BrokerProcess, sent: int) -> None:
    bystander = RawClient(broker)
    try:
        client = RawClient(broker)
        frame = encode_request(18, 3, ApiVersionsRequest(client_software_name="t", client_software_version="1"), 9)
        client.send(frame[: 4 + sent] if sent else frame[:2])  # a cut size prefix or a cut body
        client.close()
        bystander.api_versions()
    finally:
        bystander.close()
    assert_alive(broker)


@pytest.mark.parametrize("body", [b"", b"\x00", b"\x00" * 7], ids=["empty", "1-byte", "7-bytes"])
def test_frame_shorter_than_a_header_is_closed(broker: BrokerProcess, body: bytes) -> None:
    client = RawClient(broker)
    try:
        client.send(struct.pack(">i", len(body)) + body)
        client.assert_closed_by_broker()
    finally:
        client.close()
    assert_alive(broker)


def test_unknown_api_key_closes(broker: BrokerProcess) -> None:
    bystander = RawClient(broker)
    client = RawClient(broker)
    try:
        header = struct.pack(">hhih", 999, 0, 42, 1) + b"x"
        client.send(struct.pack(">i", len(header) + 4) + header + b"\x00" * 4)
        client.assert_closed_by_broker()
        bystander.api_versions()
    finally:
        client.close()
        bystander.close()
    assert_alive(broker)


def test_unsupported_version_of_another_api_closes(broker: BrokerProcess) -> None:
    client = RawClient(broker)
    try:
        header = struct.pack(">hhih", 3, 99, 43, 1) + b"x"  # Metadata v99
        client.send(struct.pack(">i", len(header) + 4) + header + b"\x00" * 4)
        client.assert_closed_by_broker()
    finally:
        client.close()
    assert_alive(broker)


def test_api_versions_v99_answers_unsupported_version_in_v0_framing(broker: BrokerProcess) -> None:
    client = RawClient(broker)
    try:
        header = struct.pack(">hhih", 18, 99, 4242, 4) + b"test" + b"\x00"
        client.send(struct.pack(">i", len(header) + 3) + header + b"\x01\x01\x00")
        frame = client.read_frame()
        assert frame is not None
        # v0 body after a v0 header: correlation id, error_code, [api_key, min, max] (no tags)
        correlation_id, error_code, count = struct.unpack_from(">ihi", frame, 0)
        assert (correlation_id, error_code, count) == (4242, ERR_UNSUPPORTED_VERSION, 1)
        assert struct.unpack_from(">hhh", frame, 10) == (18, 0, 4)
        assert len(frame) == 16
        # The connection stays usable: the client retries with a version it now knows.
        response = client.api_versions()
        assert any(k.api_key == 0 for k in response.api_keys)
    finally:
        client.close()


def test_huge_array_count_is_closed_not_fatal(broker: BrokerProcess) -> None:
    """Regression: kio's native reader preallocated 2**32-2 array slots (~34 GB) from a 5-byte
    compact-array count and the allocator aborted the broker process."""
    bystander = RawClient(broker)
    client = RawClient(broker)
    try:
        frame = bytearray(encode_request(3, 12, metadata_v12.MetadataRequest(
            topics=(), allow_auto_topic_creation=False, include_topic_authorized_operations=False,
        ), 77))
        # size prefix, header v2 (key, version, correlation id, client id, tags), then the
        # body's first field: the compact topics array.
        body_at = 4 + 8 + 2 + len("bad-input-test") + 1
        assert frame[body_at] == 0x01  # compact array of 0 items
        frame[body_at : body_at + 1] = b"\xff\xff\xff\xff\x0f"
        struct.pack_into(">i", frame, 0, len(frame) - 4)
        client.send(bytes(frame))
        client.assert_closed_by_broker()
        bystander.api_versions()
    finally:
        client.close()
        bystander.close()
    assert_alive(broker)


# --- produce errors -----------------------------------------------------------------------


def test_produce_with_wrong_crc_is_corrupt_message(broker: BrokerProcess, topic: str) -> None:
    client = RawClient(broker)
    try:
        good = produce(client, topic, 0, build_batch(records(2, "crc-before")))
        assert good.error_code == 0
        before = segment_bytes(broker, topic)
        batch = bytearray(build_batch(records(4, "crc-bad")))
        batch[-5] ^= 0x01  # a record byte: the stored CRC no longer matches
        bad = produce(client, topic, 0, bytes(batch))
        assert bad.error_code == ERR_CORRUPT_MESSAGE
        assert bad.base_offset == -1
        assert segment_bytes(broker, topic) == before
        after = produce(client, topic, 0, build_batch(records(1, "crc-after")))
        assert after.error_code == 0
        assert after.base_offset == good.base_offset + 2  # the log end offset did not move
    finally:
        client.close()


@pytest.mark.parametrize("keep", [-1, 61, 30], ids=["last-byte-cut", "header-only", "half-header"])
def test_produce_with_truncated_batch_is_corrupt_message(broker: BrokerProcess, topic: str, keep: int) -> None:
    client = RawClient(broker)
    try:
        before = segment_bytes(broker, topic)
        result = produce(client, topic, 0, build_batch(records(3, "cut"))[:keep])
        assert result.error_code == ERR_CORRUPT_MESSAGE
        assert segment_bytes(broker, topic) == before
    finally:
        client.close()


def test_batch_above_max_message_bytes_is_message_too_large(broker: BrokerProcess, topic: str) -> None:
    client = RawClient(broker)
    try:
        before = segment_bytes(broker, topic)
        big = build_batch([(None, b"x" * (MAX_MESSAGE_BYTES + 100))])
        assert len(big) > MAX_MESSAGE_BYTES
        result = produce(client, topic, 0, big)
        assert result.error_code == ERR_MESSAGE_TOO_LARGE
        assert segment_bytes(broker, topic) == before
        client.api_versions()  # same connection still fine
    finally:
        client.close()


@pytest.mark.parametrize(
    ("name", "partition"), [("bad-input", 1), ("bad-input", 999), ("bad-input", -1), ("no-such-topic", 0)]
)
def test_produce_to_unknown_topic_or_partition(broker: BrokerProcess, topic: str, name: str, partition: int) -> None:
    client = RawClient(broker)
    try:
        result = produce(client, name, partition, build_batch(records(1, "nowhere")))
        assert result.error_code == ERR_UNKNOWN_TOPIC_OR_PARTITION
        assert not os.path.exists(os.path.join(broker.data_dir, f"{name}-{partition}")) or name == topic
    finally:
        client.close()
    assert not os.path.exists(os.path.join(broker.data_dir, "no-such-topic-0")), "produce must not auto-create"


# --- invalid topic names ------------------------------------------------------------------

INVALID_NAMES = ["", ".", "..", "bad name", "bad/name", "ü-topic", "x" * 250, "tab\tname"]


def test_create_topics_with_invalid_names_is_invalid_topic(broker: BrokerProcess) -> None:
    dirs_before = set(os.listdir(broker.data_dir))
    client = RawClient(broker)
    try:
        response = client.request(19, 7, create_topics_v7.CreateTopicsRequest(
            topics=tuple(
                create_topics_v7.CreatableTopic(
                    name=name, num_partitions=i32(1), replication_factor=i16(1), assignments=(), configs=(),
                )
                for name in INVALID_NAMES
            ),
            timeout=datetime.timedelta(seconds=10), validate_only=False,
        ))
        assert {t.name: t.error_code for t in response.topics} == dict.fromkeys(INVALID_NAMES, ERR_INVALID_TOPIC)
    finally:
        client.close()
    assert set(os.listdir(broker.data_dir)) == dirs_before


def test_admin_client_invalid_topic_name(broker: BrokerProcess) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    futures = admin.create_topics([NewTopic("no spaces allowed", 1, 1)], operation_timeout=10)
    with pytest.raises(Exception) as info:
        futures["no spaces allowed"].result(timeout=DEADLINE_S)
    assert info.value.args[0].code() == ConfluentKafkaError.TOPIC_EXCEPTION


def test_metadata_with_invalid_topic_name_is_invalid_topic(broker: BrokerProcess) -> None:
    client = RawClient(broker)
    try:
        response = metadata(client, ["bad name!", "valid-but-absent"], auto_create=False)
        errors = {t.name: t.error_code for t in response.topics}
        assert errors["bad name!"] in (ERR_INVALID_TOPIC, ERR_UNKNOWN_TOPIC_OR_PARTITION)
        assert errors["valid-but-absent"] == ERR_UNKNOWN_TOPIC_OR_PARTITION
        response = metadata(client, ["bad name!"], auto_create=True)
        assert response.topics[0].error_code == ERR_INVALID_TOPIC
    finally:
        client.close()


# --- random garbage at a live broker ------------------------------------------------------


def test_find_coordinator_for_an_impossible_offsets_topic_does_not_flood_the_log(tmp_path) -> None:
    """offsets.topic.replication.factor=3 on one broker: every FindCoordinator is answered
    COORDINATOR_NOT_AVAILABLE (as Kafka) and the reason is logged a few times, not once per request."""
    node = BrokerProcess(str(tmp_path / "data"), {"offsets.topic.replication.factor": "3"})
    node.start()
    try:
        client = RawClient(node)
        request = find_coordinator_v4.FindCoordinatorRequest(key_type=i8(0), coordinator_keys=("group",))
        answers = {client.request(10, 4, request).coordinators[0].error_code for _ in range(50)}
        client.close()
        assert answers == {ERR_COORDINATOR_NOT_AVAILABLE}
        assert 1 <= node.read_log().count("cannot create __consumer_offsets yet") <= 5
    finally:
        node.stop()
