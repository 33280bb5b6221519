"""Client quotas with real clients: ``kafka-configs`` sets and describes them (Kafka's CLI from
the compat jars), a confluent-kafka producer over its ``producer_byte_rate`` is throttled —
librdkafka reports the broker's throttle_time_ms through ``throttle_cb`` — while a producer
without a quota on the same broker never is, and a consumer over its ``consumer_byte_rate`` is
throttled too."""

from __future__ import annotations

import time
from typing import Any

from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from compat.scenarios.protocol import RawConnection
from tests.broker_process import BrokerProcess
from tests.end_to_end.test_java_cli import CONFIGS, KafkaCli, kafka_cli  # noqa: F401  (the session fixture)

DEADLINE_S = 60.0
VALUE = b"v" * 10240


def configs(cli: KafkaCli, broker: BrokerProcess, *args: str) -> str:
    return cli.run(CONFIGS, "--bootstrap-server", broker.bootstrap, *args).text


def test_kafka_configs_alters_and_describes_user_and_client_quotas(kafka_cli: KafkaCli, broker: BrokerProcess) -> None:  # noqa: F811
    alice_app = ("--entity-type", "users", "--entity-name", "alice", "--entity-type", "clients", "--entity-name", "app")
    both = "producer_byte_rate=1048576,consumer_byte_rate=2097152"
    assert configs(kafka_cli, broker, "--alter", "--add-config", both, *alice_app) == (
        "Completed updating config for user alice.\n")
    assert configs(kafka_cli, broker, "--alter", "--add-config", "request_percentage=50",
                   "--entity-type", "users", "--entity-default") == (
        "Completed updating default config for users in the cluster.\n")
    assert configs(kafka_cli, broker, "--describe", *alice_app) == (
        "Quota configs for user-principal 'alice', client-id 'app' are "
        "consumer_byte_rate=2097152.0, producer_byte_rate=1048576.0\n")
    assert configs(kafka_cli, broker, "--describe", "--entity-type", "users", "--entity-default") == (
        "Quota configs for the default user-principal are request_percentage=50.0\n")
    configs(kafka_cli, broker, "--alter", "--delete-config", "request_percentage", "--entity-type", "users",
            "--entity-default")
    assert configs(kafka_cli, broker, "--describe", "--entity-type", "users", "--entity-default") == ""
    refused = kafka_cli.run(CONFIGS, "--bootstrap-server", broker.bootstrap, "--alter", "--add-config",
                            "producer_byte_rate=-5", "--entity-type", "clients", "--entity-name", "x", check=False)
    assert refused.returncode != 0
    assert "InvalidRequestException: Quota producer_byte_rate must be greater than 0" in refused.stderr + refused.text
    # tidy up: the other test must see no user quota
    configs(kafka_cli, broker, "--alter", "--delete-config", "producer_byte_rate,consumer_byte_rate", *alice_app)


def set_client_quota(bootstrap: str, client_id: str, key: str, value: float) -> None:
    """Set a client-id quota, then wait until the broker applies it.

    The controller answers AlterClientQuotas at commit; the broker enforces the quota once it has
    replayed the record (Kafka likewise). Bytes sent before that are not counted against the
    quota, so a test that produced at once could send everything before the quota existed: its
    DescribeClientQuotas, answered from the broker's replayed metadata, tells when it is applied.
    """
    from kio.schema.alter_client_quotas.v1 import request as alter_v1
    from kio.schema.describe_client_quotas.v1 import request as describe_v1

    conn = RawConnection(bootstrap)
    try:
        entry = alter_v1.EntryData(entity=(alter_v1.EntityData(entity_type="client-id", entity_name=client_id),),
                                   ops=(alter_v1.OpData(key=key, value=value, remove=False),))
        answer = conn.request(49, 1, alter_v1.AlterClientQuotasRequest(entries=(entry,), validate_only=False))
        assert [e.error_code for e in answer.entries] == [0]
        exact = describe_v1.ComponentData(entity_type="client-id", match_type=0, match=client_id)
        deadline = time.monotonic() + DEADLINE_S
        while time.monotonic() < deadline:
            described = conn.request(48, 1, describe_v1.DescribeClientQuotasRequest(components=(exact,), strict=True))
            if any(v.key == key and v.value == value for e in described.entries or () for v in e.values):
                return
        raise AssertionError(f"the broker never applied {key}={value} for client {client_id!r}")
    finally:
        conn.close()


def test_a_producer_over_its_byte_rate_is_throttled_and_another_is_not(broker: BrokerProcess) -> None:
    topic = "quota-throttled"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})  # kept: its futures need a live handle
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    set_client_quota(broker.bootstrap, "limited", "producer_byte_rate", 102400)  # 100 KiB/s
    throttles: dict[str, list[float]] = {"limited": [], "unlimited": []}
    acked: dict[str, int] = {"limited": 0, "unlimited": 0}
    errors: list[Any] = []

    def producer(client_id: str) -> Any:
        return Producer({"bootstrap.servers": broker.bootstrap, "client.id": client_id, "linger.ms": 5,
                         "throttle_cb": lambda event: throttles[client_id].append(event.throttle_time)})

    def on_delivery(client_id: str) -> Any:
        def done(err: Any, _msg: Any) -> None:
            if err is None:
                acked[client_id] += 1
            else:
                errors.append(err)
        return done

    limited, unlimited = producer("limited"), producer("unlimited")
    # 4 MiB each: beyond what the quota's ten windows (~1 MiB at 100 KiB/s) let through unthrottled.
    deadline = time.monotonic() + DEADLINE_S
    for _ in range(400):
        for client_id, p in (("limited", limited), ("unlimited", unlimited)):
            p.produce(topic, VALUE, on_delivery=on_delivery(client_id))
            p.poll(0)
    while not throttles["limited"] and time.monotonic() < deadline:
        limited.poll(0.1)
    unlimited.flush(DEADLINE_S)
    assert throttles["limited"], "the producer over its quota was never told a throttle time"
    assert max(throttles["limited"]) > 0
    assert acked["limited"] < 400, "the throttled producer was not slowed"
    assert acked["unlimited"] == 400 and throttles["unlimited"] == []
    assert errors == []
    limited.purge()  # what is left would take ~30 s at 100 KiB/s
    limited.flush(DEADLINE_S)


def test_a_consumer_over_its_byte_rate_is_throttled_and_still_reads_in_order(broker: BrokerProcess) -> None:
    topic = "quota-fetched"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})  # kept: its futures need a live handle
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5})
    for i in range(300):  # 3 MiB: beyond the ~1 MiB ten windows of 100 KiB/s let through unthrottled
        producer.produce(topic, VALUE, key=b"%d" % i)
    assert producer.flush(DEADLINE_S) == 0
    set_client_quota(broker.bootstrap, "slow-reader", "consumer_byte_rate", 102400)
    throttles: list[float] = []
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "client.id": "slow-reader", "group.id": "quota-g",
                         "auto.offset.reset": "earliest",
                         "throttle_cb": lambda event: throttles.append(event.throttle_time)})
    consumer.subscribe([topic])
    keys: list[bytes] = []
    deadline = time.monotonic() + DEADLINE_S
    while not throttles and time.monotonic() < deadline:
        message = consumer.poll(0.2)
        if message is not None and message.error() is None:
            keys.append(message.key())
    consumer.close()
    assert throttles and max(throttles) > 0, "the consumer over its quota was never told a throttle time"
    assert keys == [b"%d" % i for i in range(len(keys))]  # what it read before the throttle: in order, no gap


def test_a_client_over_its_request_percentage_is_throttled(broker: BrokerProcess) -> None:
    topic = "quota-busy"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})  # kept: its futures need a live handle
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    set_client_quota(broker.bootstrap, "busy", "request_percentage", 0.01)  # 100 µs of handler time a second
    throttles: list[float] = []
    producer = Producer({"bootstrap.servers": broker.bootstrap, "client.id": "busy", "linger.ms": 0,
                         "throttle_cb": lambda event: throttles.append(event.throttle_time)})
    deadline = time.monotonic() + DEADLINE_S
    while not throttles and time.monotonic() < deadline:
        producer.produce(topic, b"x")
        producer.flush(DEADLINE_S)
    assert throttles, "the client over its request_percentage was never told a throttle time"
    assert 0 < max(throttles) <= 1.0  # Kafka caps a request quota's throttle at one window (1 s)
    producer.flush(DEADLINE_S)
