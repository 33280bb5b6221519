"""Bad input at a live broker: the Kafka error code, or a clean close of that one connection.

Raw sockets (requests encoded with kio's ``entity_writer``, batches with ``build_batch``) plus
confluent-kafka's admin client where it can say the same thing. Each case checks that the
broker process is still running, that another connection is unaffected, and — where the input
carried records — that the partition's segment files are byte-identical afterwards.

``test_random_garbage_at_a_live_broker`` opens ``GARBAGE_CONNECTIONS`` connections and sends
``GARBAGE_FRAMES`` frames (random bytes, valid headers with random bodies, mutated valid
requests, unframed junk), one per connection, from ``random.Random(GARBAGE_SEED)``, then checks that data written
before is intact on disk and still served, and that produce/consume still work. The volume is
printed (``-s``/``-rP``).
"""

from __future__ import annotations

import asyncio
import datetime
import glob
import io
import os
import random
import socket
import struct
import time
import uuid
from typing import Any

import pytest
from confluent_kafka import Consumer as KafkaConsumer
from confluent_kafka import KafkaError as ConfluentKafkaError
from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kbroker.protocol.codec import is_flexible, response_schema
from kbroker.protocol.record_builder import build_batch
from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.schema.create_topics.v7 import request as create_topics_v7
from kio.schema.fetch.v12 import request as fetch_v12
from kio.schema.list_offsets.v7 import request as list_offsets_v7
from kio.schema.metadata.v12 import request as metadata_v12
from kio.schema.produce.v9 import request as produce_v9
from kio.schema.request_header.v1.header import RequestHeader as RequestHeaderV1
from kio.schema.request_header.v2.header import RequestHeader as RequestHeaderV2
from kio.serial import entity_reader, entity_writer
from kio.static.primitive import i8, i16, i32, i64

from tests.broker_process import BrokerProcess

DEADLINE_S = 10.0
SOCKET_REQUEST_MAX_BYTES = 104_857_600  # the broker's default socket.request.max.bytes
MAX_MESSAGE_BYTES = 1_048_588  # default message.max.bytes -> topic max.message.bytes

ERR_CORRUPT_MESSAGE = 2
ERR_UNKNOWN_TOPIC_OR_PARTITION = 3
ERR_MESSAGE_TOO_LARGE = 10
ERR_INVALID_TOPIC = 17
ERR_UNSUPPORTED_VERSION = 35

GARBAGE_SEED = 20240611
# One garbage frame per connection, then a well-formed sentinel request: the broker closes
# the connection at the first bad frame, so this way every garbage frame reaches a decoder.
GARBAGE_FRAMES = 2000
GARBAGE_UNFRAMED = 200  # extra connections that send unframed junk (random size prefixes)
GARBAGE_CONNECTIONS = GARBAGE_FRAMES + GARBAGE_UNFRAMED
GARBAGE_CONCURRENCY = 25
# Only APIs that read or write records/metadata of existing topics; admin APIs that create or
# delete things are fuzzed at the decoder level (tests/protocol/test_codec_fuzz.py) instead.
GARBAGE_API_KEYS = (0, 1, 2, 3, 10, 18, 22, 23, 32, 35, 60, 75)

_correlation = iter(range(1, 1 << 30))


# --- raw protocol client ----------------------------------------------------------------------


def encode_request(api_key: int, version: int, body: Any, correlation_id: int) -> bytes:
    """A whole request frame: size prefix, header v1/v2, body."""
    buf = io.BytesIO()
    header_cls = RequestHeaderV2 if type(body).__flexible__ else RequestHeaderV1
    entity_writer(header_cls)(buf, header_cls(
        request_api_key=i16(api_key), request_api_version=i16(version),
        correlation_id=i32(correlation_id), client_id="bad-input-test",
    ))
    entity_writer(type(body))(buf, body)
    data = buf.getvalue()
    return struct.pack(">i", len(data)) + data


class RawClient:
    def __init__(self, broker: BrokerProcess) -> None:
        self.sock = socket.create_connection(("127.0.0.1", broker.port), timeout=DEADLINE_S)

    def close(self) -> None:
        self.sock.close()

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def read_frame(self) -> bytes | None:
        """One response frame (without size prefix); None when the broker closed the socket."""
        head = self._read_exact(4)
        if head is None:
            return None
        (size,) = struct.unpack(">i", head)
        return self._read_exact(size)

    def _read_exact(self, n: int) -> bytes | None:
        out = bytearray()
        while len(out) < n:
            try:
                chunk = self.sock.recv(n - len(out))
            except ConnectionResetError:
                return None
            if not chunk:
                return None
            out += chunk
        return bytes(out)

    def assert_closed_by_broker(self) -> None:
        """The broker closes this connection (EOF or reset) well within the deadline."""
        assert self.read_frame() is None, "the broker answered instead of closing the connection"

    def request(self, api_key: int, version: int, body: Any) -> Any:
        """Send a kio request, return the decoded kio response (asserting correlation)."""
        correlation_id = next(_correlation)
        self.send(encode_request(api_key, version, body, correlation_id))
        frame = self.read_frame()
        assert frame is not None, f"connection closed on api {api_key} v{version}"
        (got,) = struct.unpack_from(">i", frame, 0)
        assert got == correlation_id
        schema = response_schema(api_key, version)
        offset = 5 if schema.__flexible__ and api_key != 18 else 4  # response header v1: tags
        value, _size = entity_reader(schema)(frame, offset)
        return value

    def api_versions(self) -> Any:
        response = self.request(18, 3, ApiVersionsRequest(client_software_name="t", client_software_version="1"))
        assert response.error_code == 0
        return response


def produce_v9_body(topic: str, partition: int, records: bytes, acks: int = -1) -> produce_v9.ProduceRequest:
    return produce_v9.ProduceRequest(
        transactional_id=None, acks=i16(acks), timeout=datetime.timedelta(seconds=10),
        topic_data=(produce_v9.TopicProduceData(name=topic, partition_data=(
            produce_v9.PartitionProduceData(index=i32(partition), records=records),
        )),),
    )


def produce(client: RawClient, topic: str, partition: int, records: bytes) -> Any:
    """Produce v9; returns the one partition response."""
    response = client.request(0, 9, produce_v9_body(topic, partition, records))
    [topic_response] = response.responses
    [partition_response] = topic_response.partition_responses
    return partition_response


def metadata(client: RawClient, topics: list[str], auto_create: bool = True) -> Any:
    return client.request(3, 12, metadata_v12.MetadataRequest(
        topics=tuple(metadata_v12.MetadataRequestTopic(topic_id=None, name=t) for t in topics),
        allow_auto_topic_creation=auto_create, include_topic_authorized_operations=False,
    ))


def segment_bytes(broker: BrokerProcess, topic: str, partition: int = 0) -> dict[str, bytes]:
    """The exact content of every segment file of a partition (to prove nothing changed)."""
    out = {}
    for path in sorted(glob.glob(os.path.join(broker.data_dir, f"{topic}-{partition}", "*.log"))):
        with open(path, "rb") as fh:
            out[os.path.basename(path)] = fh.read()
    return out


def records(n: int, tag: str, size: int = 20) -> list[tuple[bytes | None, bytes | None]]:
    return [(f"{tag}-k{i}".encode(), f"{tag}-v{i}-".encode().ljust(size, b".")) for i in range(n)]


def assert_alive(broker: BrokerProcess) -> None:
    assert broker.proc is not None and broker.proc.poll() is None, "the broker process died"
    client = RawClient(broker)
    try:
        client.api_versions()
    finally:
        client.close()


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


def _consume_all(bootstrap: str, topic: str) -> list[tuple[int, bytes | None, bytes | None]]:
    consumer = KafkaConsumer({
        "bootstrap.servers": bootstrap, "group.id": "bad-input-reader", "enable.auto.commit": False,
        "enable.partition.eof": True, "fetch.wait.max.ms": 50,
    })
    out = []
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        deadline = time.monotonic() + DEADLINE_S
        while True:
            assert time.monotonic() < deadline, "consume timed out"
            msg = consumer.poll(0.2)
            if msg is None:
                continue
            if msg.error():
                if msg.error().code() == ConfluentKafkaError._PARTITION_EOF:
                    return out
                raise AssertionError(str(msg.error()))
            out.append((msg.offset(), msg.key(), msg.value()))
    finally:
        consumer.close()


def _seed_frames(fuzz_topic: str) -> list[bytes]:
    """Valid requests to mutate. Fetches name a topic that does not exist, so a mutated
    max_wait cannot turn one into a legitimate long poll."""
    return [
        encode_request(0, 9, produce_v9_body(fuzz_topic, 0, build_batch(records(3, "fz"))), 1)[4:],
        encode_request(0, 9, produce_v9_body(fuzz_topic, 0, build_batch(records(1, "fz")), acks=0), 1)[4:],
        encode_request(3, 12, metadata_v12.MetadataRequest(
            topics=(metadata_v12.MetadataRequestTopic(topic_id=None, name=fuzz_topic),
                    metadata_v12.MetadataRequestTopic(topic_id=uuid.uuid4(), name=None)),
            allow_auto_topic_creation=False, include_topic_authorized_operations=True,
        ), 1)[4:],
        encode_request(1, 12, fetch_v12.FetchRequest(
            cluster_id=None, replica_id=i32(-1), max_wait=datetime.timedelta(0), min_bytes=i32(1),
            max_bytes=i32(1 << 20), isolation_level=i8(0), session_id=i32(0), session_epoch=i32(-1),
            topics=(fetch_v12.FetchTopic(topic="absent-fetch-target", partitions=(fetch_v12.FetchPartition(
                partition=i32(0), current_leader_epoch=i32(-1), fetch_offset=i64(0),
                last_fetched_epoch=i32(-1), log_start_offset=i64(-1), partition_max_bytes=i32(1 << 20),
            ),)),),
            forgotten_topics_data=(), rack_id="",
        ), 1)[4:],
        encode_request(2, 7, list_offsets_v7.ListOffsetsRequest(
            replica_id=i32(-1), isolation_level=i8(0),
            topics=(list_offsets_v7.ListOffsetsTopic(name=fuzz_topic, partitions=(
                list_offsets_v7.ListOffsetsPartition(
                    partition_index=i32(0), current_leader_epoch=i32(-1), timestamp=i64(-2),
                ),
            )),),
        ), 1)[4:],
        encode_request(18, 3, ApiVersionsRequest(client_software_name="fz", client_software_version="1"), 1)[4:],
    ]


def _garbage_frame(rng: random.Random, seeds: list[bytes], advertised: list[tuple[int, int]]) -> bytes:
    kind = rng.random()
    if kind < 0.25:  # random bytes
        return rng.randbytes(rng.randint(0, 200))
    if kind < 0.55:  # a valid header for a known API/version, then a random body
        key, version = rng.choice(advertised)
        header = struct.pack(">hhih", key, version, rng.randint(0, 1 << 30), 2) + b"fz"
        if is_flexible(key, version):
            header += b"\x00"
        return header + rng.randbytes(rng.randint(0, 120))
    frame = bytearray(rng.choice(seeds))  # a mutated valid request
    for _ in range(rng.randint(1, 4)):
        if not frame:
            break
        pos = rng.randrange(len(frame))
        op = rng.randrange(4)
        if op == 0:
            frame[pos] ^= 1 << rng.randrange(8)
        elif op == 1:
            frame[pos] = rng.choice([0x00, 0x7F, 0x80, 0xFF])
        elif op == 2:
            del frame[pos:]
        else:
            frame[pos:pos] = rng.randbytes(rng.randint(1, 8))
    if len(frame) >= 2 and rng.random() < 0.1:  # the body of one API under another's key
        struct.pack_into(">h", frame, 0, rng.choice(GARBAGE_API_KEYS))
    return bytes(frame)


async def _garbage_connection(
    port: int, frames: list[bytes], unframed: bytes | None, sentinel_id: int, stats: dict[str, int]
) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        if unframed is not None:
            writer.write(unframed)
            stats["bytes"] += len(unframed)
            await writer.drain()
            return
        for frame in frames:
            writer.write(struct.pack(">i", len(frame)) + frame)
            stats["bytes"] += 4 + len(frame)
        # A final well-formed ApiVersions: either it is answered (the connection survived all
        # of the garbage) or the broker closed the connection at some bad frame. A connection
        # that does neither within the deadline is wedged: a failure.
        sentinel = encode_request(
            18, 3, ApiVersionsRequest(client_software_name="t", client_software_version="1"), sentinel_id
        )
        writer.write(sentinel)
        await writer.drain()
        while True:
            try:
                head = await reader.readexactly(4)
                body = await reader.readexactly(struct.unpack(">i", head)[0])
            except (asyncio.IncompleteReadError, ConnectionResetError):
                stats["closed by broker"] += 1
                return
            if struct.unpack_from(">i", body, 0)[0] == sentinel_id:
                stats["survived"] += 1
                return
            stats["responses"] += 1
    finally:
        writer.close()
        try:
            await writer.wait_closed()
        except (ConnectionResetError, BrokenPipeError):
            pass


async def _send_garbage(port: int, plan: list[tuple[list[bytes], bytes | None]], stats: dict[str, int]) -> None:
    gate = asyncio.Semaphore(GARBAGE_CONCURRENCY)

    async def one(i: int, frames: list[bytes], unframed: bytes | None) -> None:
        async with gate:
            await asyncio.wait_for(
                _garbage_connection(port, frames, unframed, 1_000_000_000 + i, stats), DEADLINE_S
            )

    await asyncio.gather(*(one(i, f, u) for i, (f, u) in enumerate(plan)))


def test_random_garbage_at_a_live_broker(broker: BrokerProcess) -> None:
    from kbroker.handlers import HANDLERS

    precious, fuzz_topic = "precious-data", "fz"
    client = RawClient(broker)
    try:
        for name in (precious, fuzz_topic):
            assert metadata(client, [name]).topics[0].error_code == 0
        written = []
        for i in range(5):
            batch_records = records(20, f"precious{i}", size=50)
            result = produce(client, precious, 0, build_batch(batch_records))
            assert (result.error_code, result.base_offset) == (0, 20 * i)
            written += batch_records
    finally:
        client.close()
    on_disk = segment_bytes(broker, precious)
    log_start = len(broker.read_log())

    rng = random.Random(GARBAGE_SEED)
    seeds = _seed_frames(fuzz_topic)
    advertised = [
        (key, v) for key in GARBAGE_API_KEYS if key in HANDLERS
        for v in range(HANDLERS[key].MIN_VERSION, HANDLERS[key].MAX_VERSION + 1)
    ]
    plan: list[tuple[list[bytes], bytes | None]] = []
    for _ in range(GARBAGE_UNFRAMED):
        plan.append(([], rng.randbytes(rng.randint(1, 4096))))
    for _ in range(GARBAGE_FRAMES):
        plan.append(([_garbage_frame(rng, seeds, advertised)], None))
    rng.shuffle(plan)

    stats: dict[str, int] = {"bytes": 0, "closed by broker": 0, "survived": 0, "responses": 0}
    started = time.monotonic()
    asyncio.run(_send_garbage(broker.port, plan, stats))
    elapsed = time.monotonic() - started
    print(
        f"\nGARBAGE VOLUME (seed {GARBAGE_SEED}): {GARBAGE_CONNECTIONS} connections, {GARBAGE_FRAMES} "
        f"garbage frames + {GARBAGE_UNFRAMED} unframed junk sends, {stats['bytes']} bytes in {elapsed:.1f}s; "
        f"{stats['closed by broker']} connections closed by the broker, {stats['survived']} survived "
        f"(answered {stats['responses']} garbage frames, then the sentinel)"
    )
    assert stats["closed by broker"] + stats["survived"] == GARBAGE_FRAMES

    assert broker.proc is not None and broker.proc.poll() is None, "the broker process died"
    new_log = broker.read_log()[log_start:]
    assert "Traceback" not in new_log, f"a handler failed unexpectedly on garbage:\n{new_log[-5000:]}"
    assert segment_bytes(broker, precious) == on_disk, "garbage changed the precious topic on disk"

    client = RawClient(broker)
    try:
        more = records(5, "after-garbage")
        result = produce(client, precious, 0, build_batch(more))
        assert (result.error_code, result.base_offset) == (0, len(written))
    finally:
        client.close()
    stored = _consume_all(broker.bootstrap, precious)
    assert stored == [(i, k, v) for i, (k, v) in enumerate(written + more)]
