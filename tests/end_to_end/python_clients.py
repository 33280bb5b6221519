"""The three Python Kafka clients behind one small interface, for test_python_clients.py.

kafka-python, aiokafka and confluent-kafka each through their own public APIs: admin (create
topics, alter/describe configs, delete records), a producer and an ``assign()`` consumer
(no consumer group), list offsets. ``CLIENTS`` maps each client's name to its adapter.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass

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
