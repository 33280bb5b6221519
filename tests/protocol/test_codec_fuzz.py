"""Fuzzing the request decoders, and round trips of record batches.

The broker's contract for a frame it cannot read is ``MalformedRequest`` (the dispatcher then
closes that one connection). Any other exception type escaping a decoder would surface as an
"unexpected error" in a handler path, and a decoder that never returns would wedge the
connection's task; both are failures here. Inputs are random bytes, valid frames built with
kio's ``entity_writer`` and then mutated (bit flips, byte overwrites, truncation, insertion,
deletion, length-field stretching), and frames with a valid header for every advertised API and
a random body. Every generated frame is fed to ``parse_request_header`` +
``decode_request_body`` (at its own version and the neighbouring ones) and, for Produce, to
``kbroker.handlers.produce.decode_request``. ``FUZZ_COUNTS`` tallies frames and decoder
calls; ``test_fuzz_volume`` prints the totals (run with ``-s`` or ``-rP`` to see them).

Record batches: ``record_builder.build_batch`` -> ``records.split_batches`` /
``iter_records`` round trips (plain, with headers, compressed with every codec, several
batches back to back), single-bit corruption always detected by the CRC, and CRC-valid
batches with junk record sections (what a client could send to a compacted topic) raising
only ``KafkaError``.
"""

from __future__ import annotations

import datetime
import io
import signal
import struct
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import cramjam
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kbroker.protocol.codec import (
    MalformedRequest,
    decode_request_body,
    is_flexible,
    parse_request_header,
    request_schema,
)
from kbroker.protocol.errors import ErrorCode, KafkaError
from kbroker.protocol.record_builder import build_batch, encode_record
from kbroker.protocol.records import (
    CRC_OFFSET,
    HEADER_SIZE,
    crc_is_valid,
    iter_records,
    read_header,
    set_log_append_time,
    split_batches,
)
from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.schema.create_topics.v7 import request as create_topics_v7
from kio.schema.fetch.v4 import request as fetch_v4
from kio.schema.fetch.v12 import request as fetch_v12
from kio.schema.list_offsets.v7 import request as list_offsets_v7
from kio.schema.metadata.v1 import request as metadata_v1
from kio.schema.metadata.v12 import request as metadata_v12
from kio.schema.produce.v3 import request as produce_v3
from kio.schema.produce.v9 import request as produce_v9
from kio.schema.request_header.v1.header import RequestHeader as RequestHeaderV1
from kio.schema.request_header.v2.header import RequestHeader as RequestHeaderV2
from kio.serial import entity_writer
from kio.static.primitive import Records, i8, i16, i32, i64, i64Timedelta

from kbroker.handlers import HANDLERS
from kbroker.handlers import produce as produce_handler

# Hypothesis examples per fuzz test; each example feeds one frame to several decoders.
FUZZ_EXAMPLES = 1200
# Well-formed requests generated from kio's schemas (slow to generate: ~7 ms each).
GENERATED_EXAMPLES = 500
# A decoder call taking longer than this is treated as a hang.
HANG_SECONDS = 2.0

FUZZ_COUNTS: Counter[str] = Counter()

PRODUCE_KEY = 0


# --- valid frames built with kio ----------------------------------------------------------


def encode_request(api_key: int, version: int, body: Any, correlation_id: int = 1) -> bytes:
    """Header + body (no size prefix), the way a client frames it."""
    buf = io.BytesIO()
    header_cls = RequestHeaderV2 if type(body).__flexible__ else RequestHeaderV1
    entity_writer(header_cls)(buf, header_cls(
        request_api_key=i16(api_key), request_api_version=i16(version),
        correlation_id=i32(correlation_id), client_id="fuzz-client",
    ))
    entity_writer(type(body))(buf, body)
    return buf.getvalue()


def _batch() -> bytes:
    return build_batch([(b"k1", b"value-1"), (None, b"value-2"), (b"k3", None)], base_timestamp=1_700_000_000_000)


def valid_frames() -> list[bytes]:
    batch = _batch()
    timeout = datetime.timedelta(seconds=30)
    return [
        encode_request(18, 3, ApiVersionsRequest(client_software_name="fuzz", client_software_version="1.0")),
        encode_request(3, 1, metadata_v1.MetadataRequest(topics=(metadata_v1.MetadataRequestTopic(name="topic-a"),))),
        encode_request(3, 12, metadata_v12.MetadataRequest(
            topics=(metadata_v12.MetadataRequestTopic(topic_id=None, name="topic-a"),
                    metadata_v12.MetadataRequestTopic(topic_id=uuid.uuid4(), name=None)),
            allow_auto_topic_creation=True, include_topic_authorized_operations=False,
        )),
        encode_request(PRODUCE_KEY, 3, produce_v3.ProduceRequest(
            transactional_id=None, acks=i16(-1), timeout=timeout,
            topic_data=(produce_v3.TopicProduceData(name="topic-a", partition_data=(
                produce_v3.PartitionProduceData(index=i32(0), records=batch),
                produce_v3.PartitionProduceData(index=i32(1), records=None),
            )),),
        )),
        encode_request(PRODUCE_KEY, 9, produce_v9.ProduceRequest(
            transactional_id="tx", acks=i16(1), timeout=timeout,
            topic_data=(produce_v9.TopicProduceData(name="topic-a", partition_data=(
                produce_v9.PartitionProduceData(index=i32(0), records=batch + batch),
            )), produce_v9.TopicProduceData(name="topic-b", partition_data=())),
        )),
        encode_request(1, 4, fetch_v4.FetchRequest(
            replica_id=i32(-1), max_wait=datetime.timedelta(milliseconds=500), min_bytes=i32(1),
            max_bytes=i32(1 << 20), isolation_level=i8(0),
            topics=(fetch_v4.FetchTopic(topic="topic-a", partitions=(
                fetch_v4.FetchPartition(partition=i32(0), fetch_offset=i64(0), partition_max_bytes=i32(1 << 20)),
            )),),
        )),
        encode_request(1, 12, fetch_v12.FetchRequest(
            cluster_id=None, replica_id=i32(-1), max_wait=datetime.timedelta(milliseconds=500),
            min_bytes=i32(1), max_bytes=i32(1 << 20), isolation_level=i8(1), session_id=i32(0),
            session_epoch=i32(-1),
            topics=(fetch_v12.FetchTopic(topic="topic-a", partitions=(
                fetch_v12.FetchPartition(
                    partition=i32(0), current_leader_epoch=i32(-1), fetch_offset=i64(5),
                    last_fetched_epoch=i32(-1), log_start_offset=i64(-1), partition_max_bytes=i32(1 << 20),
                ),
            )),),
            forgotten_topics_data=(fetch_v12.ForgottenTopic(topic="old", partitions=(i32(0), i32(3))),),
            rack_id="",
        )),
        encode_request(2, 7, list_offsets_v7.ListOffsetsRequest(
            replica_id=i32(-1), isolation_level=i8(0),
            topics=(list_offsets_v7.ListOffsetsTopic(name="topic-a", partitions=(
                list_offsets_v7.ListOffsetsPartition(
                    partition_index=i32(0), current_leader_epoch=i32(-1), timestamp=i64(-1),
                ),
            )),),
        )),
        encode_request(19, 7, create_topics_v7.CreateTopicsRequest(
            topics=(create_topics_v7.CreatableTopic(
                name="new-topic", num_partitions=i32(3), replication_factor=i16(1), assignments=(),
                configs=(create_topics_v7.CreatableTopicConfig(name="cleanup.policy", value="compact"),),
            ),),
            timeout=timeout, validate_only=False,
        )),
    ]


VALID_FRAMES = valid_frames()

# Every (api key, version) kbroker advertises, with kio's request class for it.
ADVERTISED = sorted(
    (key, version, request_schema(key, version))
    for key, handler in HANDLERS.items()
    for version in range(handler.MIN_VERSION, handler.MAX_VERSION + 1)
)
st.register_type_strategy(Records, st.builds(lambda n: Records(_batch() * n), st.integers(0, 2)))
# int64 durations (OffsetCommit v2-4's retention_time): kio writes one near datetime's limits
# (-999999999 days, which its strategy draws) but cannot read it back into a timedelta; no client
# sends that (Kafka's are retentions in ms, -1 for the default), so drawn ones stay within
# +-10**13 ms (about 300 years).
st.register_type_strategy(i64Timedelta, st.builds(
    lambda ms: i64Timedelta.parse(datetime.timedelta(milliseconds=ms)), st.integers(-(10**13), 10**13)))


# Filled by test_generated_requests_decode; mutation seeds for test_mutated_valid_frames.
GENERATED_CORPUS: list[bytes] = []


@st.composite
def generated_requests(draw: st.DrawFn) -> tuple[Any, bytes]:
    """A random but well-formed request of any advertised API and version (kio strategies)."""
    key, version, schema = draw(st.sampled_from(ADVERTISED))
    entity = draw(st.from_type(schema))
    return entity, encode_request(key, version, entity, draw(st.integers(0, 2**31 - 1)))


# --- the fuzz target ----------------------------------------------------------------------


class Hang(Exception):
    pass


@contextmanager
def hang_guard() -> Iterator[None]:
    """Turn a decoder that does not return within HANG_SECONDS into a test failure."""

    def on_alarm(_signum: int, _frame: object) -> None:
        raise Hang(f"decoder did not return within {HANG_SECONDS}s")

    previous = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, HANG_SECONDS)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def _only_malformed(call: Callable[[], object]) -> None:
    FUZZ_COUNTS["decoder calls"] += 1
    try:
        call()
    except MalformedRequest:
        FUZZ_COUNTS["MalformedRequest"] += 1
    else:
        FUZZ_COUNTS["decoded"] += 1


def feed(frame: bytes) -> None:
    """Feed one frame (without size prefix) to every decoder that would see it."""
    FUZZ_COUNTS["frames"] += 1
    FUZZ_COUNTS["bytes"] += len(frame)
    # The dispatcher hands decoders a writable view of a bytearray; do the same.
    view = memoryview(bytearray(frame))
    with hang_guard():
        if len(view) < 4:
            _only_malformed(lambda: parse_request_header(view, None))
            return
        api_key, version = struct.unpack_from(">hh", view, 0)
        versions = {version}
        handler = HANDLERS.get(api_key)
        if handler is not None:
            # Neighbouring versions too: a body read with the wrong schema is junk to it.
            versions |= {v for v in (version - 1, version + 1) if handler.MIN_VERSION <= v <= handler.MAX_VERSION}
        for v in sorted(versions):
            flexible = is_flexible(api_key, v)

            def header_and_body(v: int = v, flexible: bool | None = flexible) -> None:
                _header, offset = parse_request_header(view, flexible)
                schema = request_schema(api_key, v)
                if schema is not None:
                    decode_request_body(schema, view, offset)

            _only_malformed(header_and_body)
            if api_key == PRODUCE_KEY and produce_handler.MIN_VERSION <= v <= produce_handler.MAX_VERSION:

                def produce_body(v: int = v, flexible: bool | None = flexible) -> None:
                    _header, offset = parse_request_header(view, flexible)
                    produce_handler.decode_request(view, offset, v)

                _only_malformed(produce_body)


# --- strategies ---------------------------------------------------------------------------


@st.composite
def mutated_frames(draw: st.DrawFn) -> bytes:
    """A valid frame (hand-built, or generated for any advertised API by
    ``test_generated_requests_decode``, which runs first) with 1-4 mutations."""
    seeds = VALID_FRAMES + GENERATED_CORPUS
    frame = bytearray(seeds[draw(st.integers(0, len(seeds) - 1))])
    for _ in range(draw(st.integers(1, 4))):
        op = draw(st.sampled_from(["flip", "set", "truncate", "insert", "delete", "stretch"]))
        if not frame:
            frame += draw(st.binary(min_size=1, max_size=8))
            continue
        pos = draw(st.integers(0, len(frame) - 1))
        if op == "flip":
            frame[pos] ^= 1 << draw(st.integers(0, 7))
        elif op == "set":
            frame[pos] = draw(st.sampled_from([0x00, 0x01, 0x7F, 0x80, 0xFE, 0xFF]))
        elif op == "truncate":
            del frame[pos:]
        elif op == "insert":
            frame[pos:pos] = draw(st.binary(min_size=1, max_size=16))
        elif op == "delete":
            del frame[pos : pos + draw(st.integers(1, 16))]
        else:  # a length/count field blown up: int16/int32/varint-looking huge or negative values
            width = draw(st.sampled_from([2, 4]))
            value = draw(st.sampled_from([-2, -1, 0x7FFF, 0x7FFFFFFF, -(2**31)]))
            if pos + width <= len(frame):
                fmt = ">h" if width == 2 else ">i"
                struct.pack_into(fmt, frame, pos, max(min(value, 0x7FFF), -0x8000) if width == 2 else value)
    return bytes(frame)


@st.composite
def header_then_junk(draw: st.DrawFn) -> bytes:
    """A well-formed header for an advertised API/version, then a random body."""
    api_key = draw(st.sampled_from(sorted(HANDLERS)))
    handler = HANDLERS[api_key]
    version = draw(st.integers(handler.MIN_VERSION, handler.MAX_VERSION))
    header = struct.pack(">hhi", api_key, version, draw(st.integers(-(2**31), 2**31 - 1)))
    header += struct.pack(">h", 4) + b"fuzz"
    if is_flexible(api_key, version):
        header += b"\x00"
    return header + draw(st.binary(max_size=200))


FUZZ_SETTINGS = settings(
    max_examples=FUZZ_EXAMPLES,
    deadline=None,  # the hang guard bounds each call instead (timing noise must not fail us)
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def test_valid_frames_decode() -> None:
    """The seeds of the mutations are themselves valid: every decoder accepts them."""
    for frame in VALID_FRAMES:
        view = memoryview(bytearray(frame))
        api_key, version = struct.unpack_from(">hh", view, 0)
        header, offset = parse_request_header(view, is_flexible(api_key, version))
        assert header.client_id == "fuzz-client"
        schema = request_schema(api_key, version)
        assert schema is not None
        decode_request_body(schema, view, offset)
        if api_key == PRODUCE_KEY:
            request = produce_handler.decode_request(view, offset, version)
            records = request.topics[0][2][0][1]
            assert bytes(records).startswith(_batch())


@settings(max_examples=GENERATED_EXAMPLES, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(generated_requests())
def test_generated_requests_decode(request: tuple[Any, bytes]) -> None:
    """Well-formed requests of every advertised API/version decode to what was encoded: the
    array-count guard in front of kio's native reader never rejects a valid request."""
    entity, frame = request
    FUZZ_COUNTS["generated valid frames"] += 1
    GENERATED_CORPUS.append(frame)
    view = memoryview(bytearray(frame))
    api_key, version = struct.unpack_from(">hh", view, 0)
    _header, offset = parse_request_header(view, is_flexible(api_key, version))
    assert decode_request_body(type(entity), view, offset) == entity
    if api_key == PRODUCE_KEY:
        decoded = produce_handler.decode_request(view, offset, version)
        assert decoded.acks == entity.acks
        assert [bytes(r) if r is not None else None for _n, _i, parts in decoded.topics for _p, r in parts] == [
            p.records for t in entity.topic_data for p in t.partition_data
        ]


@pytest.mark.parametrize("flexible_count", [b"\xff\xff\xff\xff\x0f", b"\xfe\xff\xff\xff\x0f"])
def test_huge_array_count_is_malformed_not_an_abort(flexible_count: bytes) -> None:
    """Regression: kio's native reader preallocates an array from its count (2**32-2 items:
    ~34 GB) and the Rust allocator aborts the process. The codec must refuse it first."""
    # Metadata v12: compact topics array, count as a 5-byte varint.
    frame = encode_request(3, 12, metadata_v12.MetadataRequest(
        topics=(), allow_auto_topic_creation=False, include_topic_authorized_operations=False,
    ))
    view = memoryview(bytearray(frame))
    _header, offset = parse_request_header(view, True)
    bad = memoryview(bytearray(bytes(view[:offset]) + flexible_count + b"\x00\x00\x00"))
    with pytest.raises(MalformedRequest, match="array of"):
        decode_request_body(metadata_v12.MetadataRequest, bad, offset)
    # Legacy int32 count (Metadata v1): 2**31-1 topics.
    frame = encode_request(3, 1, metadata_v1.MetadataRequest(topics=()))
    view = memoryview(bytearray(frame))
    _header, offset = parse_request_header(view, False)
    bad = memoryview(bytearray(bytes(view[:offset]) + b"\x7f\xff\xff\xff" + b"\x00" * 8))
    with pytest.raises(MalformedRequest, match="array of"):
        decode_request_body(metadata_v1.MetadataRequest, bad, offset)


def test_null_for_a_non_nullable_array_is_malformed() -> None:
    """Regression: kio decodes count -1 as None even where the schema forbids null; ListOffsets
    then failed iterating ``request.topics`` (TypeError -> "unexpected error" in the broker)."""
    from kio.schema.list_offsets.v5 import request as list_offsets_v5

    legacy = list_offsets_v5.ListOffsetsRequest(replica_id=i32(-1), isolation_level=i8(0), topics=())
    flexible = list_offsets_v7.ListOffsetsRequest(replica_id=i32(-1), isolation_level=i8(0), topics=())
    # topics is the last field: int32 0 -> -1 (legacy); varint 1 -> 0 before the tag byte (compact)
    for version, body, empty, null in [(5, legacy, b"\x00" * 4, b"\xff" * 4), (7, flexible, b"\x01\x00", b"\x00\x00")]:
        view = memoryview(bytearray(encode_request(2, version, body)))
        _header, offset = parse_request_header(view, is_flexible(2, version))
        assert bytes(view[-len(empty) :]) == empty
        view[-len(null) :] = null
        with pytest.raises(MalformedRequest, match="non-nullable array is null"):
            decode_request_body(type(body), view, offset)
    # A nullable array (Metadata topics) may still be null: "all topics".
    frame = encode_request(3, 12, metadata_v12.MetadataRequest(
        topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False,
    ))
    view = memoryview(bytearray(frame))
    _header, offset = parse_request_header(view, True)
    assert decode_request_body(metadata_v12.MetadataRequest, view, offset).topics is None


@pytest.mark.timeout(60)
@FUZZ_SETTINGS
@given(st.binary(max_size=300))
def test_random_bytes(frame: bytes) -> None:
    feed(frame)


@pytest.mark.timeout(60)
@FUZZ_SETTINGS
@given(mutated_frames())
def test_mutated_valid_frames(frame: bytes) -> None:
    feed(frame)


@pytest.mark.timeout(60)
@FUZZ_SETTINGS
@given(header_then_junk())
def test_valid_header_random_body(frame: bytes) -> None:
    feed(frame)


def test_every_truncation_of_every_valid_frame() -> None:
    """Exhaustive: each valid frame cut at every length (the classic short-read bug)."""
    for frame in VALID_FRAMES:
        for cut in range(len(frame)):
            feed(frame[:cut])


# --- record batches -----------------------------------------------------------------------

payloads = st.one_of(st.none(), st.binary(max_size=64))
record_lists = st.lists(st.tuples(payloads, payloads), min_size=1, max_size=20)
header_lists = st.lists(st.tuples(st.text(max_size=8), payloads), max_size=3)


@settings(max_examples=300, deadline=None, database=None)
@given(
    records=record_lists,
    base_offset=st.integers(0, 2**40),
    base_ts=st.integers(0, 2**42),
    ts_deltas=st.lists(st.integers(0, 10**6), min_size=20, max_size=20),
)
def test_build_split_iter_round_trip(
    records: list[tuple[bytes | None, bytes | None]], base_offset: int, base_ts: int, ts_deltas: list[int]
) -> None:
    stamps = [base_ts + d for d in ts_deltas[: len(records)]]
    batch = build_batch(records, base_offset=base_offset, timestamps=stamps)
    [(pos, header)] = split_batches(batch)
    assert pos == 0
    assert header.size == len(batch)
    assert header.base_offset == base_offset
    assert header.record_count == len(records)
    assert header.last_offset == base_offset + len(records) - 1
    assert header.max_timestamp == max(stamps)
    decoded = list(iter_records(batch))
    assert [(r.key, r.value) for r in decoded] == records
    assert [r.offset for r in decoded] == list(range(base_offset, base_offset + len(records)))
    assert [r.timestamp for r in decoded] == stamps


@settings(max_examples=200, deadline=None, database=None)
@given(st.lists(record_lists, min_size=1, max_size=5))
def test_back_to_back_batches(batches: list[list[tuple[bytes | None, bytes | None]]]) -> None:
    payload = b""
    offset = 0
    for records in batches:
        payload += build_batch(records, base_offset=offset)
        offset += len(records)
    found = split_batches(payload)
    assert len(found) == len(batches)
    offset = 0
    for (pos, header), records in zip(found, batches, strict=True):
        assert header.base_offset == offset
        whole = payload[pos : pos + header.size]
        assert [(r.key, r.value) for r in iter_records(whole)] == records
        offset += len(records)


@settings(max_examples=200, deadline=None, database=None)
@given(st.lists(st.tuples(payloads, payloads, header_lists), min_size=1, max_size=10))
def test_record_headers_round_trip(
    records: list[tuple[bytes | None, bytes | None, list[tuple[str, bytes | None]]]],
) -> None:
    body = b"".join(encode_record(i, i, k, v, h) for i, (k, v, h) in enumerate(records))
    batch = build_batch([(k, v) for k, v, _h in records], compressed_records=body, base_timestamp=1000)
    decoded = list(iter_records(batch))
    assert [(r.key, r.value, list(r.headers)) for r in decoded] == records
    assert [r.timestamp for r in decoded] == [1000 + i for i in range(len(records))]


def _xerial(raw: bytes) -> bytes:
    chunk = bytes(cramjam.snappy.compress_raw(raw))
    return b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1) + struct.pack(">i", len(chunk)) + chunk


COMPRESSORS: dict[str, tuple[int, Callable[[bytes], bytes]]] = {
    "gzip": (1, lambda b: bytes(cramjam.gzip.compress(b))),
    "snappy-raw": (2, lambda b: bytes(cramjam.snappy.compress_raw(b))),
    "snappy-xerial": (2, _xerial),
    "lz4": (3, lambda b: bytes(cramjam.lz4.compress(b))),
    "zstd": (4, lambda b: bytes(cramjam.zstd.compress(b))),
}


@pytest.mark.parametrize("codec", sorted(COMPRESSORS))
@settings(max_examples=50, deadline=None, database=None)
@given(records=record_lists)
def test_compressed_round_trip(codec: str, records: list[tuple[bytes | None, bytes | None]]) -> None:
    attribute, compress = COMPRESSORS[codec]
    body = b"".join(encode_record(i, 0, k, v) for i, (k, v) in enumerate(records))
    batch = build_batch(records, attributes=attribute, compressed_records=compress(body), base_offset=7)
    [(_pos, header)] = split_batches(batch)
    assert header.compression == attribute
    assert [(r.key, r.value, r.offset) for r in iter_records(batch)] == [
        (k, v, 7 + i) for i, (k, v) in enumerate(records)
    ]


@settings(max_examples=300, deadline=None, database=None)
@given(records=record_lists, data=st.data())
def test_single_bit_corruption_is_caught_by_crc(
    records: list[tuple[bytes | None, bytes | None]], data: st.DataObject
) -> None:
    batch = bytearray(build_batch(records))
    # From the CRC field to the end: everything the CRC protects, and the CRC itself.
    pos = data.draw(st.integers(CRC_OFFSET, len(batch) - 1))
    batch[pos] ^= 1 << data.draw(st.integers(0, 7))
    assert not crc_is_valid(batch, 0, len(batch))
    with pytest.raises(KafkaError) as info:
        split_batches(batch)
    assert info.value.code == ErrorCode.corrupt_message


@settings(max_examples=200, deadline=None, database=None)
@given(records=record_lists, cut=st.integers(1, 10_000))
def test_truncated_batch_is_corrupt(records: list[tuple[bytes | None, bytes | None]], cut: int) -> None:
    batch = build_batch(records)
    cut = min(cut, len(batch) - 1)
    with pytest.raises(KafkaError) as info:
        split_batches(batch[:-cut])
    assert info.value.code in (ErrorCode.corrupt_message, ErrorCode.invalid_record)
    if len(batch) - cut >= HEADER_SIZE:
        assert info.value.code == ErrorCode.corrupt_message


def test_log_append_time_keeps_crc_valid() -> None:
    batch = bytearray(build_batch([(b"k", b"v"), (None, b"w")], base_timestamp=5))
    set_log_append_time(batch, 0, len(batch), 123_456)
    [(_pos, header)] = split_batches(batch)
    assert header.is_log_append_time and header.max_timestamp == 123_456
    assert [r.timestamp for r in iter_records(bytes(batch))] == [123_456, 123_456]
    assert read_header(batch).crc != read_header(build_batch([(b"k", b"v"), (None, b"w")], base_timestamp=5)).crc


@settings(max_examples=1000, deadline=None, database=None)
@given(
    codec=st.integers(0, 7),
    count=st.integers(1, 5),
    body=st.one_of(
        st.binary(max_size=200),
        st.builds(lambda tail: b"\x82SNAPPY\x00" + tail, st.binary(max_size=40)),
    ),
)
def test_crc_valid_junk_records_raise_only_kafka_error(codec: int, count: int, body: bytes) -> None:
    """A client can send a CRC-valid batch whose records are junk; reading it (compacted
    topics check keys) must fail with a Kafka error code, never another exception or a hang."""
    batch = build_batch([(None, None)] * count, attributes=codec, compressed_records=body)
    split_batches(batch)  # header, length, CRC and counts are all fine
    FUZZ_COUNTS["junk batches"] += 1
    with hang_guard():
        try:
            list(iter_records(batch))
        except KafkaError:
            pass


def test_fuzz_volume() -> None:
    """Runs last in this module: report how much the decoders were fed."""
    print(
        f"\nFUZZ VOLUME: {FUZZ_COUNTS['frames']} frames ({FUZZ_COUNTS['bytes']} bytes), "
        f"{FUZZ_COUNTS['decoder calls']} decoder calls: {FUZZ_COUNTS['decoded']} decoded, "
        f"{FUZZ_COUNTS['MalformedRequest']} MalformedRequest, 0 other exceptions; "
        f"{FUZZ_COUNTS['generated valid frames']} generated valid requests decoded; "
        f"{FUZZ_COUNTS['junk batches']} CRC-valid junk batches read"
    )
    if FUZZ_COUNTS["frames"]:  # absent when run alone (-k)
        assert FUZZ_COUNTS["frames"] >= 3 * FUZZ_EXAMPLES
