"""Random garbage at a live broker: ``GARBAGE_CONNECTIONS`` connections send ``GARBAGE_FRAMES``
frames (random bytes, valid headers with random bodies, mutated valid requests, unframed junk),
one per connection, from ``random.Random(GARBAGE_SEED)``; afterwards data written before is
intact on disk and still served, and produce/consume still work. The volume is printed
(``-s``/``-rP``).
"""
from __future__ import annotations

import asyncio
import datetime
import random
import struct
import time
import uuid

from confluent_kafka import Consumer as KafkaConsumer
from confluent_kafka import KafkaError as ConfluentKafkaError
from confluent_kafka import TopicPartition
from kbroker.protocol.codec import is_flexible
from kbroker.protocol.record_builder import build_batch
from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.schema.fetch.v12 import request as fetch_v12
from kio.schema.list_offsets.v7 import request as list_offsets_v7
from kio.schema.metadata.v12 import request as metadata_v12
from kio.static.primitive import i8, i32, i64

from tests.broker_process import BrokerProcess
from tests.end_to_end.raw_kafka import (
    DEADLINE_S,
    RawClient,
    encode_request,
    metadata,
    produce,
    produce_v9_body,
    records,
    segment_bytes,
)

GARBAGE_SEED = 20240611
# One garbage frame per connection, then a well-formed sentinel request: the broker closes
# the connection at the first bad frame, so this way every garbage frame reaches a decoder.
# Only APIs that read or write records/metadata of existing topics; admin APIs that create or
# delete things are fuzzed at the decoder level (tests/protocol/test_codec_fuzz.py) instead.

GARBAGE_FRAMES = 2000
GARBAGE_UNFRAMED = 200  # extra connections that send unframed junk (random size prefixes)
GARBAGE_CONNECTIONS = GARBAGE_FRAMES + GARBAGE_UNFRAMED
GARBAGE_CONCURRENCY = 25
GARBAGE_API_KEYS = (0, 1, 2, 3, 10, 18, 22, 23, 32, 35, 60, 75)


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
