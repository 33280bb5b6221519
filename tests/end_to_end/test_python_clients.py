"""The three Python Kafka clients against a real kbroker: what their users rely on, end to end.

kafka-python, aiokafka and confluent-kafka each, through their own public APIs: create topics
with the admin client, produce keyed records with headers in every compression codec and read
them back byte-identical at contiguous offsets, null keys and tombstones, seek by offset and
by timestamp, list the beginning/end offsets, delete records, and alter/describe topic
configs. Consumers use ``assign()`` (no consumer group). Auto-creation is off so every topic
exists only because the admin API created it.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from tests.broker_process import BrokerProcess

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
DEADLINE_S = 15.0
# DescribeConfigs config_source numbers, as named by Kafka (and kafka-python/confluent).
SOURCE_NAMES = {
    0: "UNKNOWN", 1: "DYNAMIC_TOPIC_CONFIG", 2: "DYNAMIC_BROKER_CONFIG",
    3: "DYNAMIC_DEFAULT_BROKER_CONFIG", 4: "STATIC_BROKER_CONFIG", 5: "DEFAULT_CONFIG",
}


@dataclass(frozen=True)
class Rec:
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes], ...] = ()
    timestamp_ms: int | None = None


@dataclass(frozen=True)
class Got:
    offset: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes], ...]
    timestamp_ms: int


def _headers(raw: object) -> tuple[tuple[str, bytes], ...]:
    return tuple((k, bytes(v) if v is not None else v) for k, v in (raw or ()))


# --- one adapter per client: each method uses that client's own public API -----------------


class KafkaPythonClient:
    name = "kafka-python"

    def __init__(self, bootstrap: str) -> None:
        from kafka import KafkaAdminClient

        self.bootstrap = bootstrap
        self.admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="e2e-admin")

    def close(self) -> None:
        self.admin.close()

    def create_topic(self, topic: str, partitions: int, configs: dict[str, str]) -> None:
        self.admin.create_topics(
            {topic: {"num_partitions": partitions, "replication_factor": 1, "configs": configs}}
        )

    def partitions(self, topic: str) -> set[int]:
        (described,) = self.admin.describe_topics([topic])
        return {p["partition_index"] for p in described["partitions"]}

    def produce(self, topic: str, partition: int, records: list[Rec], codec: str) -> list[int]:
        from kafka import KafkaProducer

        producer = KafkaProducer(
            bootstrap_servers=self.bootstrap, acks="all", linger_ms=20,
            compression_type=None if codec == "none" else codec,
        )
        try:
            futures = [
                producer.send(topic, value=r.value, key=r.key, partition=partition,
                              headers=list(r.headers), timestamp_ms=r.timestamp_ms)
                for r in records
            ]
            producer.flush(DEADLINE_S)
            return [f.get(DEADLINE_S).offset for f in futures]
        finally:
            producer.close(DEADLINE_S)

    def consumer(self, topic: str, partition: int) -> KafkaPythonSession:
        return KafkaPythonSession(self.bootstrap, topic, partition)

    def list_offsets(self, topic: str, partition: int) -> tuple[int, int]:
        with self.consumer(topic, partition) as session:
            return session.beginning(), session.end()

    def delete_records(self, topic: str, partition: int, before: int) -> int:
        from kafka import TopicPartition

        tp = TopicPartition(topic, partition)
        result = self.admin.delete_records({tp: before})
        return result[tp]["low_watermark"]

    def alter_config(self, topic: str, configs: dict[str, str]) -> bool:
        """IncrementalAlterConfigs SET (kafka-python picks it when the broker has it)."""
        from kafka.admin import AlterConfigOp, ConfigResource, ConfigResourceType

        resource = ConfigResource(
            ConfigResourceType.TOPIC, topic,
            configs={k: (AlterConfigOp.SET, v) for k, v in configs.items()},
        )
        result = self.admin.alter_configs([resource], incremental=True)
        assert result["topic"][topic] == "OK", result
        return True

    def describe_config(self, topic: str) -> dict[str, tuple[str | None, str]]:
        from kafka.admin import ConfigResource, ConfigResourceType

        result = self.admin.describe_configs(
            [ConfigResource(ConfigResourceType.TOPIC, topic)], config_filter="all"
        )
        return {k: (v["value"], v["config_source"]) for k, v in result["topic"][topic].items()}


class KafkaPythonSession:
    def __init__(self, bootstrap: str, topic: str, partition: int) -> None:
        from kafka import KafkaConsumer, TopicPartition

        self.tp = TopicPartition(topic, partition)
        self.consumer = KafkaConsumer(
            bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
            auto_offset_reset="earliest",
        )
        self.consumer.assign([self.tp])

    def __enter__(self) -> KafkaPythonSession:
        return self

    def __exit__(self, *exc: object) -> None:
        self.consumer.close()

    def seek(self, offset: int) -> None:
        self.consumer.seek(self.tp, offset)

    def seek_to_beginning(self) -> None:
        self.consumer.seek_to_beginning(self.tp)

    def read(self, count: int) -> list[Got]:
        out: list[Got] = []
        deadline = time.monotonic() + DEADLINE_S
        while len(out) < count and time.monotonic() < deadline:
            for batch in self.consumer.poll(timeout_ms=200, max_records=count - len(out)).values():
                out += [Got(m.offset, m.key, m.value, _headers(m.headers), m.timestamp) for m in batch]
        return out

    def offset_for_time(self, ts: int) -> int | None:
        found = self.consumer.offsets_for_times({self.tp: ts})[self.tp]
        return None if found is None else found.offset

    def beginning(self) -> int:
        return self.consumer.beginning_offsets([self.tp])[self.tp]

    def end(self) -> int:
        return self.consumer.end_offsets([self.tp])[self.tp]


class AioKafkaClient:
    """aiokafka is asyncio-only: each call runs on this adapter's own event loop."""

    name = "aiokafka"

    def __init__(self, bootstrap: str) -> None:
        from aiokafka.admin import AIOKafkaAdminClient

        self.bootstrap = bootstrap
        self.loop = asyncio.new_event_loop()

        async def start() -> AIOKafkaAdminClient:
            admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, client_id="e2e-admin")
            await admin.start()
            return admin

        self.admin = self.run(start())

    def run(self, coro):
        return self.loop.run_until_complete(asyncio.wait_for(coro, DEADLINE_S * 2))

    def close(self) -> None:
        self.run(self.admin.close())
        self.loop.close()

    def create_topic(self, topic: str, partitions: int, configs: dict[str, str]) -> None:
        from aiokafka.admin import NewTopic

        response = self.run(self.admin.create_topics(
            [NewTopic(topic, partitions, 1, topic_configs=configs)]
        )).to_object()
        errors = [(t["topic"], t["error_code"]) for t in response["topic_errors"]]
        assert errors == [(topic, 0)], response

    def partitions(self, topic: str) -> set[int]:
        (described,) = self.run(self.admin.describe_topics([topic]))
        return {p["partition"] for p in described["partitions"]}

    def produce(self, topic: str, partition: int, records: list[Rec], codec: str) -> list[int]:
        from aiokafka import AIOKafkaProducer

        async def go() -> list[int]:
            producer = AIOKafkaProducer(
                bootstrap_servers=self.bootstrap, acks="all", linger_ms=20,
                compression_type=None if codec == "none" else codec,
            )
            await producer.start()
            try:
                futures = [
                    await producer.send(topic, value=r.value, key=r.key, partition=partition,
                                        headers=list(r.headers), timestamp_ms=r.timestamp_ms)
                    for r in records
                ]
                return [m.offset for m in await asyncio.gather(*futures)]
            finally:
                await producer.stop()

        return self.run(go())

    def consumer(self, topic: str, partition: int) -> AioKafkaSession:
        return AioKafkaSession(self, topic, partition)

    def list_offsets(self, topic: str, partition: int) -> tuple[int, int]:
        with self.consumer(topic, partition) as session:
            return session.beginning(), session.end()

    def delete_records(self, topic: str, partition: int, before: int) -> int:
        from aiokafka import TopicPartition
        from aiokafka.admin import RecordsToDelete

        tp = TopicPartition(topic, partition)
        return self.run(self.admin.delete_records({tp: RecordsToDelete(before_offset=before)}))[tp]

    def alter_config(self, topic: str, configs: dict[str, str]) -> bool:
        """AlterConfigs (aiokafka has no incremental variant): replaces the topic's whole set."""
        from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType

        (response,) = self.run(self.admin.alter_configs(
            [ConfigResource(ConfigResourceType.TOPIC, topic, configs=configs)]
        ))
        resources = response.to_object()["resources"]
        assert [(r["resource_name"], r["error_code"]) for r in resources] == [(topic, 0)], resources
        return False

    def describe_config(self, topic: str) -> dict[str, tuple[str | None, str]]:
        from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType

        (response,) = self.run(self.admin.describe_configs(
            [ConfigResource(ConfigResourceType.TOPIC, topic)]
        ))
        (resource,) = response.to_object()["resources"]
        assert resource["error_code"] == 0, resource
        return {
            c["config_names"]: (c["config_value"], SOURCE_NAMES[c["config_source"]])
            for c in resource["config_entries"]
        }


class AioKafkaSession:
    def __init__(self, client: AioKafkaClient, topic: str, partition: int) -> None:
        from aiokafka import AIOKafkaConsumer, TopicPartition

        self.run = client.run
        self.tp = TopicPartition(topic, partition)

        async def start() -> AIOKafkaConsumer:
            consumer = AIOKafkaConsumer(
                bootstrap_servers=client.bootstrap, group_id=None, enable_auto_commit=False,
                auto_offset_reset="earliest",
            )
            await consumer.start()
            consumer.assign([self.tp])
            return consumer

        self.consumer = self.run(start())

    def __enter__(self) -> AioKafkaSession:
        return self

    def __exit__(self, *exc: object) -> None:
        self.run(self.consumer.stop())

    def seek(self, offset: int) -> None:
        self.consumer.seek(self.tp, offset)

    def seek_to_beginning(self) -> None:
        self.run(self.consumer.seek_to_beginning(self.tp))

    def read(self, count: int) -> list[Got]:
        async def go() -> list[Got]:
            out: list[Got] = []
            deadline = time.monotonic() + DEADLINE_S
            while len(out) < count and time.monotonic() < deadline:
                batches = await self.consumer.getmany(self.tp, timeout_ms=200, max_records=count - len(out))
                for batch in batches.values():
                    out += [Got(m.offset, m.key, m.value, _headers(m.headers), m.timestamp) for m in batch]
            return out

        return self.run(go())

    def offset_for_time(self, ts: int) -> int | None:
        found = self.run(self.consumer.offsets_for_times({self.tp: ts}))[self.tp]
        return None if found is None else found.offset

    def beginning(self) -> int:
        return self.run(self.consumer.beginning_offsets([self.tp]))[self.tp]

    def end(self) -> int:
        return self.run(self.consumer.end_offsets([self.tp]))[self.tp]


class ConfluentClient:
    name = "confluent-kafka"

    def __init__(self, bootstrap: str) -> None:
        from confluent_kafka.admin import AdminClient

        self.bootstrap = bootstrap
        self.admin = AdminClient({"bootstrap.servers": bootstrap, "client.id": "e2e-admin"})

    def close(self) -> None:
        pass

    def create_topic(self, topic: str, partitions: int, configs: dict[str, str]) -> None:
        from confluent_kafka.admin import NewTopic

        futures = self.admin.create_topics(
            [NewTopic(topic, num_partitions=partitions, replication_factor=1, config=configs)],
            request_timeout=DEADLINE_S,
        )
        futures[topic].result(DEADLINE_S)

    def partitions(self, topic: str) -> set[int]:
        return set(self.admin.list_topics(topic, timeout=DEADLINE_S).topics[topic].partitions)

    def produce(self, topic: str, partition: int, records: list[Rec], codec: str) -> list[int]:
        from confluent_kafka import Producer

        producer = Producer({
            "bootstrap.servers": self.bootstrap, "acks": "all", "linger.ms": 20,
            "compression.type": codec,
        })
        delivered: list[tuple[int, object]] = []

        def on_delivery(err: object, msg: object) -> None:
            delivered.append((msg.offset(), err))

        for r in records:
            kwargs = {"timestamp": r.timestamp_ms} if r.timestamp_ms is not None else {}
            producer.produce(topic, value=r.value, key=r.key, partition=partition,
                             headers=list(r.headers), on_delivery=on_delivery, **kwargs)
        assert producer.flush(DEADLINE_S) == 0, "records still undelivered after the deadline"
        assert [err for _o, err in delivered] == [None] * len(records), delivered
        return [offset for offset, _err in delivered]

    def consumer(self, topic: str, partition: int) -> ConfluentSession:
        return ConfluentSession(self.bootstrap, topic, partition)

    def list_offsets(self, topic: str, partition: int) -> tuple[int, int]:
        from confluent_kafka import TopicPartition
        from confluent_kafka.admin import OffsetSpec

        tp = TopicPartition(topic, partition)
        earliest = self.admin.list_offsets({tp: OffsetSpec.earliest()})[tp].result(DEADLINE_S)
        latest = self.admin.list_offsets({tp: OffsetSpec.latest()})[tp].result(DEADLINE_S)
        return earliest.offset, latest.offset

    def delete_records(self, topic: str, partition: int, before: int) -> int:
        from confluent_kafka import TopicPartition

        tp = TopicPartition(topic, partition, before)
        (future,) = self.admin.delete_records([tp], request_timeout=DEADLINE_S).values()
        return future.result(DEADLINE_S).low_watermark

    def alter_config(self, topic: str, configs: dict[str, str]) -> bool:
        from confluent_kafka.admin import (
            AlterConfigOpType,
            ConfigEntry,
            ConfigResource,
            ResourceType,
        )

        entries = [ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET) for k, v in configs.items()]
        resource = ConfigResource(ResourceType.TOPIC, topic, incremental_configs=entries)
        (future,) = self.admin.incremental_alter_configs([resource]).values()
        future.result(DEADLINE_S)
        return True

    def describe_config(self, topic: str) -> dict[str, tuple[str | None, str]]:
        from confluent_kafka.admin import ConfigResource, ConfigSource, ResourceType

        (future,) = self.admin.describe_configs([ConfigResource(ResourceType.TOPIC, topic)]).values()
        return {k: (e.value, ConfigSource(e.source).name) for k, e in future.result(DEADLINE_S).items()}


class ConfluentSession:
    def __init__(self, bootstrap: str, topic: str, partition: int) -> None:
        from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

        # librdkafka insists on a group.id; with assign() and no commits no group is joined.
        self.consumer = Consumer({
            "bootstrap.servers": bootstrap, "group.id": f"e2e-unused-{topic}",
            "enable.auto.commit": False, "auto.offset.reset": "earliest",
        })
        self.topic, self.partition = topic, partition
        self.consumer.assign([TopicPartition(topic, partition, OFFSET_BEGINNING)])

    def __enter__(self) -> ConfluentSession:
        return self

    def __exit__(self, *exc: object) -> None:
        self.consumer.close()

    def _tp(self, offset: int | None = None):
        from confluent_kafka import OFFSET_INVALID, TopicPartition

        return TopicPartition(self.topic, self.partition, OFFSET_INVALID if offset is None else offset)

    def seek(self, offset: int) -> None:
        self.consumer.seek(self._tp(offset))

    def seek_to_beginning(self) -> None:
        from confluent_kafka import OFFSET_BEGINNING

        self.consumer.seek(self._tp(OFFSET_BEGINNING))

    def read(self, count: int) -> list[Got]:
        out: list[Got] = []
        deadline = time.monotonic() + DEADLINE_S
        while len(out) < count and time.monotonic() < deadline:
            for m in self.consumer.consume(count - len(out), timeout=0.2):
                assert m.error() is None, m.error()
                out.append(Got(m.offset(), m.key(), m.value(), _headers(m.headers()), m.timestamp()[1]))
        return out

    def offset_for_time(self, ts: int) -> int | None:
        (found,) = self.consumer.offsets_for_times([self._tp(ts)], timeout=DEADLINE_S)
        return None if found.offset < 0 else found.offset

    def beginning(self) -> int:
        return self.consumer.get_watermark_offsets(self._tp(), timeout=DEADLINE_S, cached=False)[0]

    def end(self) -> int:
        return self.consumer.get_watermark_offsets(self._tp(), timeout=DEADLINE_S, cached=False)[1]


Client = KafkaPythonClient | AioKafkaClient | ConfluentClient
CLIENTS = {c.name: c for c in (KafkaPythonClient, AioKafkaClient, ConfluentClient)}


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
