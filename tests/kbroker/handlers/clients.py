"""Small client-side helpers for the handler tests (confluent-kafka and bare requests)."""

from __future__ import annotations

import datetime
import uuid

from confluent_kafka import KafkaException, Producer
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic, ResourceType
from kio.schema.init_producer_id.v5 import request as init_producer_id

from .wire import call

BASE_TS = 1_700_000_000_000
TIMEOUT = datetime.timedelta(seconds=10)
DYNAMIC_TOPIC_CONFIG, STATIC_BROKER_CONFIG, DEFAULT_CONFIG = 1, 4, 5


def new_name() -> str:
    return f"t-{uuid.uuid4().hex[:10]}"


def code(future: object) -> int:
    """The Kafka error code a confluent-kafka admin future ended with (0: success)."""
    try:
        future.result(10)
    except KafkaException as exc:
        return exc.args[0].code()
    return 0


def create(cadmin: AdminClient, partitions: int = 1, **configs: str) -> str:
    name = new_name()
    config = {k.replace("_", "."): v for k, v in configs.items()}
    assert code(cadmin.create_topics([NewTopic(name, partitions, 1, config=config)])[name]) == 0
    return name


def produce(bootstrap: str, topic: str, count: int, partition: int = 0) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    for i in range(count):
        producer.produce(topic, b"v%d" % i, partition=partition, timestamp=BASE_TS + i * 1000)
    assert producer.flush(10) == 0


def topic_configs(cadmin: AdminClient, topic: str) -> dict[str, tuple[str | None, int]]:
    future = cadmin.describe_configs([ConfigResource(ResourceType.TOPIC, topic)])
    entries = next(iter(future.values())).result(10)
    return {name: (e.value, int(e.source)) for name, e in entries.items()}


def producer_id(
    bootstrap: str, transactional_id: str | None = None, pid: int = -1, epoch: int = -1
) -> tuple[int, int, int]:
    """InitProducerId v5: (error code, producer id, epoch)."""
    request = init_producer_id.InitProducerIdRequest(
        transactional_id=transactional_id, transaction_timeout=TIMEOUT, producer_id=pid, producer_epoch=epoch
    )
    response = call(bootstrap, request, 5)
    return response.error_code, response.producer_id, response.producer_epoch
