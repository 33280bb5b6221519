"""The three Python Kafka clients against a real kbroker: what their users rely on, end to end.

kafka-python, aiokafka and confluent-kafka each, through their own public APIs: create topics
with the admin client, produce keyed records with headers in every compression codec and read
them back byte-identical at contiguous offsets, null keys and tombstones, seek by offset and
by timestamp, list the beginning/end offsets, delete records, and alter/describe topic
configs. Consumers use ``assign()`` (no consumer group). Auto-creation is off so every topic
exists only because the admin API created it.
"""

from __future__ import annotations

import random
import time
from collections.abc import Iterator

import pytest

from tests.broker_process import BrokerProcess
from tests.end_to_end.python_clients import CLIENTS, Client, Rec

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]


# --- fixtures ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """One broker for the module, with auto-creation off: topics come from the admin APIs."""
    proc = BrokerProcess(
        str(tmp_path_factory.mktemp("e2e") / "data"), {"auto.create.topics.enable": "false"}
    )
    proc.start()
    yield proc
    proc.close()


@pytest.fixture(scope="module", params=list(CLIENTS))
def client(request: pytest.FixtureRequest, broker: BrokerProcess) -> Iterator[Client]:
    adapter = CLIENTS[request.param](broker.bootstrap)
    yield adapter
    adapter.close()


def _topic(client: Client, label: str) -> str:
    return f"e2e-{client.name}-{label}-{random.getrandbits(24):06x}"


def _records(count: int, seed: int) -> list[Rec]:
    """Keyed records with binary keys, values of mixed compressibility and binary headers."""
    rng = random.Random(seed)
    out = []
    for i in range(count):
        body = rng.randbytes(rng.randrange(0, 600)) + bytes([i % 256]) * rng.randrange(0, 3000)
        headers = (("index", str(i).encode()), ("blob", rng.randbytes(16)), ("trace", b"\x00\xff" * 4))
        out.append(Rec(key=b"k\x00" + rng.randbytes(8), value=body, headers=headers))
    return out


# --- tests ---------------------------------------------------------------------------------------


def test_admin_created_topic_has_the_requested_partitions(client: Client) -> None:
    topic = _topic(client, "create")
    client.create_topic(topic, 3, {})
    assert client.partitions(topic) == {0, 1, 2}, "CreateTopics with 3 partitions"


@pytest.mark.parametrize("codec", CODECS)
def test_keyed_records_with_headers_round_trip_in_every_codec(client: Client, codec: str) -> None:
    topic = _topic(client, codec)
    client.create_topic(topic, 2, {})
    first, second = _records(40, seed=1), _records(25, seed=2)
    offsets = client.produce(topic, 1, first, codec) + client.produce(topic, 1, second, codec)
    sent = first + second
    assert offsets == list(range(len(sent))), "a new partition assigns offsets 0, 1, 2, ... in send order"
    with client.consumer(topic, 1) as session:
        got = session.read(len(sent))
    assert [g.offset for g in got] == offsets, "consumed offsets are the produced offsets, no gaps"
    for g, r in zip(got, sent, strict=True):
        assert (g.key, g.value) == (r.key, r.value), f"offset {g.offset}: key/value byte-identical"
        assert g.headers == r.headers, f"offset {g.offset}: headers byte-identical and in order"
    assert client.list_offsets(topic, 0) == (0, 0), "partition 0 received nothing"


def test_record_near_max_message_bytes_then_small_ones(client: Client) -> None:
    """A ~900 KB request (grows the broker's read buffer) followed by small ones (shrinks it)."""
    topic = _topic(client, "large")
    client.create_topic(topic, 1, {})
    big = Rec(key=b"big", value=random.Random(3).randbytes(900_000))
    small = [Rec(key=b"%d" % i, value=b"small-%d" % i) for i in range(3)]
    offsets = client.produce(topic, 0, [big], "none")
    offsets += [client.produce(topic, 0, [r], "none")[0] for r in small]
    assert offsets == [0, 1, 2, 3], "a record below max.message.bytes is accepted whole"
    with client.consumer(topic, 0) as session:
        got = session.read(4)
    assert [(g.offset, g.key, g.value) for g in got] == [
        (i, r.key, r.value) for i, r in enumerate([big, *small])
    ]


def test_null_keys_and_tombstones_round_trip(client: Client) -> None:
    topic = _topic(client, "nulls")
    client.create_topic(topic, 1, {})
    sent = [
        Rec(key=None, value=b"value without key"),
        Rec(key=b"deleted-key", value=None),  # tombstone
        Rec(key=b"", value=b""),  # empty is not null
        Rec(key=b"k", value=b"v", headers=(("h", b""),)),
    ]
    offsets = client.produce(topic, 0, sent, "none")
    assert offsets == [0, 1, 2, 3]
    with client.consumer(topic, 0) as session:
        got = session.read(len(sent))
    assert [(g.offset, g.key, g.value) for g in got] == [
        (0, None, b"value without key"),
        (1, b"deleted-key", None),
        (2, b"", b""),
        (3, b"k", b"v"),
    ], "null stays null, empty stays empty"
    assert got[3].headers == (("h", b""),), "an empty header value is kept"


def test_seek_by_offset_and_by_timestamp(client: Client) -> None:
    topic = _topic(client, "seek")
    client.create_topic(topic, 1, {})
    base = int(time.time() * 1000) - 60_000
    # Timestamps 1 s apart, produced together so they share batches: the lookup has to find
    # the right record inside a batch, not just the batch.
    sent = [Rec(key=b"%d" % i, value=b"value-%d" % i, timestamp_ms=base + 1000 * i) for i in range(10)]
    assert client.produce(topic, 0, sent, "lz4") == list(range(10))
    with client.consumer(topic, 0) as session:
        session.seek(6)
        got = session.read(2)
        assert [(g.offset, g.value) for g in got] == [(6, b"value-6"), (7, b"value-7")], "seek(6) reads from offset 6"
        assert got[0].timestamp_ms == base + 6000, "CreateTime is the producer's timestamp"
        session.seek(2)
        assert [(g.offset, g.value) for g in session.read(1)] == [(2, b"value-2")], "seek backwards re-reads offset 2"

        assert session.offset_for_time(base + 3000) == 3, "exact timestamp: that record's offset"
        assert session.offset_for_time(base + 4500) == 5, "between records: the first one at or after it"
        assert session.offset_for_time(base - 10_000) == 0, "before everything: the first offset"
        assert session.offset_for_time(base + 60_000) is None, "after everything: no offset"
        session.seek(session.offset_for_time(base + 7000))
        assert [g.value for g in session.read(1)] == [b"value-7"], "seek to the looked-up offset"


def test_list_offsets_and_delete_records(client: Client) -> None:
    topic = _topic(client, "delete")
    client.create_topic(topic, 1, {})
    assert client.list_offsets(topic, 0) == (0, 0), "an empty partition: beginning = end = 0"
    sent = [Rec(key=b"%d" % i, value=b"v%d" % i) for i in range(30)]
    client.produce(topic, 0, sent[:10], "gzip")
    client.produce(topic, 0, sent[10:], "zstd")
    assert client.list_offsets(topic, 0) == (0, 30), "beginning 0, end = next offset to be written"

    assert client.delete_records(topic, 0, 17) == 17, "DeleteRecords answers the new low watermark"
    assert client.list_offsets(topic, 0) == (17, 30), "the beginning offset moved to 17, the end did not"
    with client.consumer(topic, 0) as session:
        assert (session.beginning(), session.end()) == (17, 30)
        session.seek_to_beginning()
        got = session.read(13)
    assert [(g.offset, g.value) for g in got] == [(i, b"v%d" % i) for i in range(17, 30)], (
        "reading from the beginning starts at offset 17, inside a batch"
    )


def test_alter_config_then_describe_reads_it_back(client: Client) -> None:
    topic = _topic(client, "config")
    client.create_topic(topic, 1, {"max.message.bytes": "2000000"})
    before = client.describe_config(topic)
    assert before["max.message.bytes"] == ("2000000", "DYNAMIC_TOPIC_CONFIG"), "set at creation"
    assert before["retention.ms"] == ("604800000", "DEFAULT_CONFIG"), "Kafka's default: 7 days"

    incremental = client.alter_config(topic, {"retention.ms": "123456"})
    after = client.describe_config(topic)
    assert after["retention.ms"] == ("123456", "DYNAMIC_TOPIC_CONFIG"), "the altered value reads back"
    if incremental:
        assert after["max.message.bytes"] == ("2000000", "DYNAMIC_TOPIC_CONFIG"), (
            "IncrementalAlterConfigs leaves other overrides alone"
        )
    else:
        assert after["max.message.bytes"][1] != "DYNAMIC_TOPIC_CONFIG", (
            "AlterConfigs replaces the whole override set: unnamed overrides are dropped"
        )
