"""The fuzzer's own parts without a broker: generation, layouts, mutators, checks, report."""

from __future__ import annotations

import datetime
import random
import struct
from collections import Counter
from pathlib import Path

import pytest
from kbroker.protocol.codec import (
    decode_request_body,
    encode_request,
    encode_response,
    is_flexible,
    parse_request_header,
    request_schema,
)
from kbroker.protocol.records import crc_is_valid, split_batches
from kio.schema.create_partitions.v3 import request as create_partitions_v3
from kio.schema.create_topics.v7 import request as create_topics_v7
from kio.schema.errors import ErrorCode
from kio.schema.produce.v9 import response as produce_v9_response

from compat.fuzz import corpus, record, world
from compat.fuzz.generate import RequestGenerator, record_batch
from compat.fuzz.invariants import DiskWatch, LogWatch
from compat.fuzz.layout import COUNT, LENGTH, RECORDS, walk
from compat.fuzz.mutators import Limits, fix_crc, mutate, op_batch, partition_counts_allowed
from compat.fuzz.report import CLOSED, HANG, OK, TargetRun, render
from compat.fuzz.responses import Effects, answer_codes
from compat.fuzz.runner import declared_wait_s


def test_generated_frames_follow_their_schema() -> None:
    """A generated frame of every served (key, version) is walked to its last byte and decodes."""
    generator = RequestGenerator(random.Random(1), {})
    for key, versions in corpus.served_versions().items():
        for version in versions:
            frame = generator.frame(key, version)
            layout = walk(frame)
            view = memoryview(bytearray(frame))
            _header, offset = parse_request_header(view, is_flexible(key, version))
            assert offset == layout.body_start
            decode_request_body(request_schema(key, version), view, offset)


def test_recorded_corpus_covers_every_api_and_walks() -> None:
    recorded = corpus.load_recorded()
    served = corpus.served_versions()
    assert {f.api_key for f in recorded.frames} == set(served)
    assert all(f.api_version in served[f.api_key] for f in recorded.frames)
    assert all(f.layout is not None for f in recorded.frames), "a recorded frame does not follow its schema"
    assert {world.DATA.name, world.TXN.name, world.ADMIN.name} <= set(recorded.topic_ids)


def test_cases_are_a_function_of_seed_and_index() -> None:
    recorded = corpus.load_recorded()
    first, again, other = (corpus.Corpus(seed, recorded, Limits()) for seed in (7, 7, 8))
    assert [first.case(i).mutated.wire for i in range(200)] == [again.case(i).mutated.wire for i in range(200)]
    assert [first.case(i).mutated.wire for i in range(200)] != [other.case(i).mutated.wire for i in range(200)]
    keys = Counter(first.case(i).api_key for i in range(2000))
    assert set(keys) == set(corpus.served_versions())


def _produce_frame(codec: int) -> bytes:
    generator = RequestGenerator(random.Random(codec), {})
    while True:
        frame = generator.frame(0, 9)
        layout = walk(frame)
        records = layout.of_kind(RECORDS)
        if records and all(struct.unpack_from(">h", frame, r.start + 21)[0] & 7 == codec for r in records):
            return frame


@pytest.mark.parametrize("codec", [0, 1, 2, 3, 4])
@pytest.mark.parametrize("form", ["batch_header", "batch_records", "compressed"])
def test_batch_mutations_recompute_the_crc(codec: int, form: str) -> None:
    """Header, records and compressed-payload mutations leave a batch that passes the CRC
    check (with a length that matches its bytes), so the broker looks further into it."""
    frame = _produce_frame(codec)
    rng = random.Random(3)
    checked = 0
    for _ in range(60):
        mutated = op_batch(bytearray(frame), walk(frame), rng, form)
        if mutated is None:
            continue
        layout = walk(bytes(mutated))
        for span in layout.of_kind(RECORDS):
            records = bytes(mutated[span.start : span.end])
            length = struct.unpack_from(">i", records, 8)[0] + 12
            if form == "batch_header" and (length != len(records) or struct.unpack_from(">b", records, 16)[0] != 2):
                continue  # the length or magic was the field set: the CRC is not where the broker looks first
            checked += 1
            if form != "batch_header":
                assert crc_is_valid(records, 0, length)
    assert checked or (form == "compressed" and codec == 0)


def test_fix_crc_makes_a_changed_batch_valid_again() -> None:
    batch = bytearray(record_batch(random.Random(1), codec=0))
    struct.pack_into(">q", batch, 27, 0)  # base timestamp
    assert not crc_is_valid(batch, 0, len(batch))
    fix_crc(batch)
    split_batches(batch)


def _create_topics(partitions: int) -> bytes:
    body = create_topics_v7.CreateTopicsRequest(
        topics=(create_topics_v7.CreatableTopic(name="t", num_partitions=partitions, replication_factor=1,
                                                assignments=(), configs=()),),
        timeout=datetime.timedelta(seconds=1), validate_only=False,
    )  # fmt: skip
    return encode_request(19, 7, 1, "fz", body)[4:]


def _create_partitions(count: int) -> bytes:
    body = create_partitions_v3.CreatePartitionsRequest(
        topics=(create_partitions_v3.CreatePartitionsTopic(name="t", count=count, assignments=None),),
        timeout=datetime.timedelta(seconds=1), validate_only=False,
    )
    return encode_request(37, 3, 1, "fz", body)[4:]


def test_partition_counts_left_out() -> None:
    assert partition_counts_allowed(_create_topics(1000), Limits())
    assert not partition_counts_allowed(_create_topics(5000), Limits())  # legal but heavy: drawn again
    assert partition_counts_allowed(_create_topics(10_001), Limits())  # beyond Kafka's limit: refused
    assert not partition_counts_allowed(_create_topics(10_001), Limits(max_partitions=1000))
    # CreatePartitions names the new total: 10,001 on a topic of 2 partitions adds a legal 9,999.
    assert not partition_counts_allowed(_create_partitions(10_001), Limits())
    assert partition_counts_allowed(_create_partitions(100_000), Limits())
    rng = random.Random(5)
    frame = _create_topics(3)
    for _ in range(500):
        m = mutate(frame, walk(frame), rng, Limits(max_partitions=1000))
        assert partition_counts_allowed(m.frame[: max(m.declared, 0)], Limits(max_partitions=1000))


def test_the_time_a_request_gives_the_broker() -> None:
    """What a case may take before it is a hang: the request's own timeout (admin, Produce) or
    max wait (Fetch); JoinGroup and SyncGroup wait for other members, unbounded by the request."""
    assert declared_wait_s(19, _create_topics(3)) == 1.0
    generator = RequestGenerator(random.Random(2), {})
    assert declared_wait_s(11, generator.frame(11, 5)) is None
    fetch = generator.frame(1, 12)
    assert declared_wait_s(1, fetch) == walk(fetch).named("max_wait")[0].value / 1000
    assert declared_wait_s(3, generator.frame(3, 12)) == 0.0


def test_length_and_count_mutations_hit_their_fields() -> None:
    frame = _create_topics(3)
    layout = walk(frame)
    assert {s.path for s in layout.of_kind(LENGTH)} >= {"header.client_id", "topics.name"}
    assert {s.path for s in layout.of_kind(COUNT)} >= {"topics", "topics.assignments", "topics.configs"}


def test_answer_codes_reads_every_error_code() -> None:
    ok = produce_v9_response.PartitionProduceResponse(index=0, error_code=ErrorCode.none, base_offset=5,
                                                      record_errors=())
    bad = produce_v9_response.PartitionProduceResponse(index=1, error_code=ErrorCode.not_leader_or_follower,
                                                       base_offset=-1, record_errors=())
    response = produce_v9_response.ProduceResponse(
        responses=(produce_v9_response.TopicProduceResponse(name="fz-data", partition_responses=(ok, bad)),),
        throttle_time=datetime.timedelta(0),
    )
    frame = encode_response(42, 0, response)[4:]
    assert answer_codes(0, 9, frame) == [0, 6]
    effects = Effects()
    effects.note(None, response, {})
    assert effects.written == {("fz-data", 0)}


KBROKER_LOG = """\
2026-11-26 06:29:34,192 INFO kbroker: started
2026-11-26 06:29:35,001 ERROR kbroker.network.dispatcher: unexpected error handling produce v9 (correlation id 7) from x
Traceback (most recent call last):
  File "x.py", line 1, in f
TypeError: boom
2026-11-26 06:29:35,002 ERROR asyncio: Task exception was never retrieved
Traceback (most recent call last):
ValueError: lost
2026-11-26 06:29:35,003 INFO kbroker: fine
"""


def test_log_watch_sorts_explained_from_unexplained(tmp_path: Path) -> None:
    log = tmp_path / "kbroker.log"
    log.write_text(KBROKER_LOG)
    found = LogWatch(log, "kbroker").scan({})
    assert found.explained == Counter({"produce": 1})
    assert len(found.unexplained) == 1 and "never retrieved" in found.unexplained[0]


def test_disk_watch_allows_only_accepted_changes(tmp_path: Path) -> None:
    (tmp_path / "fz-data-0").mkdir()
    log = tmp_path / "fz-data-0" / "00000000000000000000.log"
    log.write_bytes(b"known")
    watch = DiskWatch(tmp_path)
    watch.rebase()
    effects = Effects()
    log.write_bytes(b"known+accepted")
    effects.written.add(("fz-data", 0))
    assert watch.check(effects) == []
    log.write_bytes(b"known+accepted+junk")
    (tmp_path / "fz-new-x-0").mkdir()
    violations = watch.check(effects)
    assert len(violations) == 2
    assert any("fz-data-0" in v for v in violations) and any("fz-new-x-0" in v for v in violations)


def test_report_round_trip(tmp_path: Path) -> None:
    run = TargetRun("kbroker", 13)
    run.tally(0, OK, ("bit_flip",), "generated", 1, [0])
    run.tally(0, HANG, ("length",), "java", 2, [])
    run.tally(3, CLOSED, (), "kcat", 3, [])
    run.save(tmp_path / "kbroker.json")
    loaded = TargetRun.load(tmp_path / "kbroker.json")
    assert loaded.apis[0].outcomes == Counter({OK: 1, HANG: 1})
    assert loaded.problems() == ["Produce: 1 hang (cases [2])"]
    text = render([loaded, loaded], "cmd")
    assert "| Produce | 0 | 2 / 2 | 1 / 1 |" in text
    run.note_latency(0, 1.5)
    run.save(tmp_path / "kbroker.json")
    assert TargetRun.load(tmp_path / "kbroker.json").apis[0].slowest_s == 1.5


def test_topping_up_a_recording(tmp_path: Path) -> None:
    """``record --add`` keeps the old frames, adds client frames of missing (key, version)
    pairs, lets a hand-built frame give way to a client's, and generates only for APIs no
    frame covers; the ``generated`` mark survives the file."""
    generator = RequestGenerator(random.Random(4), {})

    def frame(key: int, version: int, source: str, generated: bool = False) -> corpus.BaseFrame:
        return corpus.base_frame(generator.frame(key, version), source, generated)

    old = corpus.Recorded({}, [frame(3, 12, "java"), frame(29, 3, "kio-built", True), frame(36, 2, "kio-built", True)])
    new = corpus.Recorded({}, [frame(3, 12, "java"), frame(3, 13, "java"), frame(29, 2, "confluent"),
                               frame(36, 0, record.RECORDER, True), frame(83, 0, record.RECORDER, True)])  # fmt: skip
    merged = record.add_to(old, new)
    assert [(f.api_key, f.api_version, f.source) for f in merged.frames] == [
        (3, 12, "java"), (36, 2, "kio-built"), (3, 13, "java"), (29, 2, "confluent"), (83, 0, record.RECORDER)]
    path = tmp_path / "recorded.jsonl"
    corpus.save_recorded(merged, "test", path)
    assert [f.generated for f in corpus.load_recorded(path).frames] == [False, True, False, False, True]
