"""Kafka's own server.properties files start kbroker unchanged.

A server.properties that sets every key Kafka 4.3.1's broker and controller define to a value
Kafka accepts (its own ConfigDef says so, asked from its jars) other than the default: ``kbroker
serve`` starts on it, lists the keys it does not act on, and DescribeConfigs shows each key as set
(static source, value as Kafka prints it, passwords hidden); the keys kbroker acts on take effect
(a new topic's configs follow the log.* keys set). And a secured node's file (SASL_PLAINTEXT and
SSL listeners, StandardAuthorizer, PEM stores, client certificates required) starts Kafka 4.3.1
and kbroker alike, and serves its super user."""

from __future__ import annotations

import os
import select
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from kbroker.storage.log_config import ConfigSource, ConfigType
from kio.schema.describe_configs.v4 import request as describe_configs

from compat.security.certificates import Certificates, make_certificates
from compat.targets import KafkaTarget, KbrokerTarget, ProcessTarget
from kbroker.config.broker_catalogue import BROKER_CONFIGS, BrokerConfigDef, kafka_string
from tests.broker_process import free_port
from tests.kbroker.handlers.wire import call
from tests.support.kafka_config_def import kafka_checks

READY_TIMEOUT_S = 60.0
_LIMIT = {ConfigType.SHORT: 2**15 - 1, ConfigType.INT: 2**31 - 1, ConfigType.LONG: 2**63 - 1}


def _range(spec: str | None) -> tuple[float | None, float | None]:
    if not spec or not spec.startswith("[") or (",...," not in spec and not spec.endswith(",...]")):
        return None, None
    low, _dots, high = spec[1:-1].partition(",...")
    return (float(low) if low else None), (float(high.lstrip(",")) if high.lstrip(",") else None)


def _other_value(d: BrokerConfigDef) -> str:
    """A value Kafka's validator accepts that is not the default."""
    if d.type == ConfigType.BOOLEAN:
        return "false" if d.default == "true" else "true"
    if d.type in _LIMIT or d.type == ConfigType.DOUBLE:
        if d.validator == "[1,...,9] or -1":
            return "5"
        low, high = _range(d.validator)
        if d.type == ConfigType.DOUBLE:
            base = float(d.default) if d.default is not None else (low or 0.0) + 250
            up = base + 0.25
            return str(up if high is None or up <= high else base - 0.25)
        top = min(int(high), _LIMIT[d.type]) if high is not None else _LIMIT[d.type]
        start = int(d.default) if d.default is not None else int(low or 0) + 1000
        return str(start + 1 if start + 1 <= top else start - 1)
    if d.validator and d.validator.startswith(("[", "(case insensitive) [")):
        allowed = d.validator[d.validator.index("[") + 1:-1].split(", ")
        return next(v for v in allowed if v != d.default)
    if d.type == ConfigType.CLASS:
        return "java.lang.Object"  # Kafka's parser loads the class; this one is always there
    if d.type == ConfigType.PASSWORD:
        return f"secret-of-{d.name}"
    return f"value-of-{d.name}" if d.type == ConfigType.STRING else f"first-of-{d.name},second-of-{d.name}"


def _settings(tmp: Path, port: int, controller_port: int) -> dict[str, str]:
    settings = {name: _other_value(d) for name, d in BROKER_CONFIGS.items() if not name.startswith("kbroker.")}
    # Keys a running single node needs to be consistent (each still not Kafka's default).
    settings.update({
        "process.roles": "broker,controller", "node.id": "1", "broker.id": "1",
        "listeners": f"PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller_port}",
        "advertised.listeners": f"PLAINTEXT://127.0.0.1:{port}", "controller.listener.names": "CONTROLLER",
        "early.start.listeners": "CONTROLLER", "inter.broker.listener.name": "PLAINTEXT",
        "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
        "controller.quorum.voters": f"1@127.0.0.1:{controller_port}",
        "controller.quorum.bootstrap.servers": f"127.0.0.1:{controller_port}",
        "log.dirs": str(tmp / "data"), "log.dir": str(tmp / "unused"), "metadata.log.dir": str(tmp / "data"),
        "offsets.topic.replication.factor": "1", "transaction.state.log.replication.factor": "1",
        "transaction.state.log.min.isr": "1", "share.coordinator.state.topic.replication.factor": "1",
        "share.coordinator.state.topic.min.isr": "1", "offsets.topic.num.partitions": "2",
        "transaction.state.log.num.partitions": "2", "log.segment.bytes": "16777216",
        "log.retention.ms": "7200000", "log.roll.ms": "3600000", "log.flush.interval.ms": "60000",
        "max.connections.per.ip.overrides": "127.0.0.2:5", "replica.selector.class":
        "org.apache.kafka.common.replica.RackAwareReplicaSelector", "group.consumer.assignors": "range",
        "socket.request.max.bytes": "104857601", "queued.max.request.bytes": "104857601",
        # A class the broker can load (Kafka's broker stops on one it cannot, as kbroker does).
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    })
    # Kafka refuses security.inter.broker.protocol beside inter.broker.listener.name.
    del settings["security.inter.broker.protocol"]
    return settings


def test_every_kafka_key_set_to_a_valid_non_default_value_starts_and_is_described(tmp_path: Path) -> None:
    port, controller_port = free_port(), free_port()
    settings = _settings(tmp_path, port, controller_port)
    refused = {key: answer for (key, _v), answer in zip(settings.items(), kafka_checks(list(settings.items())),
                                                       strict=True) if answer is not None}
    assert refused == {}  # Kafka's own ConfigDef accepts every value of the file
    assert all(value != BROKER_CONFIGS[key].default for key, value in settings.items())
    path = tmp_path / "server.properties"
    # The authorizer's own key (not a KafkaConfig key): the test's client may then do anything.
    path.write_text("".join(f"{key}={value}\n" for key, value in settings.items()) + "super.users=User:ANONYMOUS\n")
    log_path = tmp_path / "kbroker.log"
    with open(log_path, "w") as log:
        proc = subprocess.Popen([sys.executable, "-m", "kbroker", "serve", "--config", str(path)],
                                stdout=subprocess.PIPE, stderr=log, text=True, cwd=str(tmp_path),
                                env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    try:
        _wait_listening(proc, log_path)
        request = describe_configs.DescribeConfigsRequest(
            resources=(describe_configs.DescribeConfigsResource(resource_type=4, resource_name="1",
                                                                configuration_keys=None),),
            include_synonyms=True, include_documentation=True)
        (result,) = call(f"127.0.0.1:{port}", request, 4).results
        entries = {entry.name: entry for entry in result.configs}
        # Every key, the internal ones because they are set; security.inter.broker.protocol, the one
        # key left unset (Kafka refuses it beside inter.broker.listener.name), with its default.
        assert set(entries) == set(settings) | {"security.inter.broker.protocol"}
        unset = entries["security.inter.broker.protocol"]
        assert (unset.value, unset.config_source) == ("PLAINTEXT", ConfigSource.DEFAULT_CONFIG)
        for key, value in settings.items():
            entry, definition = entries[key], BROKER_CONFIGS[key]
            # A new cluster keeps min.insync.replicas as its dynamic default, as Kafka's format does.
            source = ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG if key == "min.insync.replicas" else \
                ConfigSource.STATIC_BROKER_CONFIG
            assert (entry.config_source, entry.synonyms[0].source) == (source, source), key
            assert entry.is_sensitive == definition.sensitive, key
            assert entry.value == (None if definition.sensitive else kafka_string(definition, value)), key
            assert entry.read_only == definition.read_only and entry.documentation, key
        _assert_topic_follows_the_log_keys(port)
        assert "not acted on yet" in log_path.read_text()
        assert "num.io.threads" in log_path.read_text()
    finally:
        proc.terminate()
        proc.wait(30)


def _wait_listening(proc: subprocess.Popen[str], log_path: Path) -> None:
    assert proc.stdout is not None
    deadline = time.monotonic() + READY_TIMEOUT_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"kbroker exited ({proc.returncode}):\n{log_path.read_text()[-3000:]}")
        ready, _, _ = select.select([proc.stdout], [], [], 0.2)
        if ready and "listening on" in proc.stdout.readline():
            return
    raise AssertionError(f"kbroker not listening within {READY_TIMEOUT_S} s:\n{log_path.read_text()[-3000:]}")


def _assert_topic_follows_the_log_keys(port: int) -> None:
    from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic, ResourceType

    admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{port}"})
    admin.create_topics([NewTopic("follows", 1, 1)])["follows"].result(30)
    configs = admin.describe_configs([ConfigResource(ResourceType.TOPIC, "follows")])
    entries = next(iter(configs.values())).result(30)
    assert {key: entries[key].value for key in ("retention.ms", "segment.bytes", "segment.ms", "cleanup.policy",
                                                "message.timestamp.type", "compression.type")} == {
        "retention.ms": "7200000", "segment.bytes": "16777216", "segment.ms": "3600000",
        "cleanup.policy": "compact", "message.timestamp.type": "LogAppendTime", "compression.type": "uncompressed"}


# --- a secured node, from the server.properties ------------------------------------------

SECURED_TOPIC = "secured-orders"


def _secured_properties(sasl_port: int, ssl_port: int, controller_port: int, data: Path, certs: Certificates) -> str:
    """Kafka's way to run a secured single node: SASL_PLAINTEXT between brokers and for clients
    (PLAIN, SCRAM-SHA-256), SSL with client certificates required, the StandardAuthorizer with
    admin (and the controller's ANONYMOUS connection) as super users and no access otherwise."""
    jaas = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
            'password="admin-secret" user_admin="admin-secret" user_alice="alice-secret";')
    return "".join(f"{key}={value}\n" for key, value in {
        "process.roles": "broker,controller", "node.id": "1",
        "controller.quorum.voters": f"1@127.0.0.1:{controller_port}",
        "listeners": f"SASL_PLAINTEXT://127.0.0.1:{sasl_port},SSL://127.0.0.1:{ssl_port},"
                     f"CONTROLLER://127.0.0.1:{controller_port}",
        "advertised.listeners": f"SASL_PLAINTEXT://127.0.0.1:{sasl_port},SSL://127.0.0.1:{ssl_port}",
        "controller.listener.names": "CONTROLLER",
        "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT,SSL:SSL",
        "inter.broker.listener.name": "SASL_PLAINTEXT",
        "sasl.mechanism.inter.broker.protocol": "PLAIN",
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": jaas,
        "listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config":
            "org.apache.kafka.common.security.scram.ScramLoginModule required;",
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:admin;User:ANONYMOUS",
        "allow.everyone.if.no.acl.found": "false",
        "ssl.keystore.type": "PEM", "ssl.keystore.location": str(certs.broker.keystore),
        "ssl.truststore.type": "PEM", "ssl.truststore.location": str(certs.ca),
        "ssl.client.auth": "required",
        "log.dirs": str(data), "offsets.topic.replication.factor": "1",
        "transaction.state.log.replication.factor": "1", "transaction.state.log.min.isr": "1",
        "group.initial.rebalance.delay.ms": "0",
    }.items())  # fmt: skip


@pytest.mark.parametrize("kind", ["kafka", "kbroker"])
def test_a_secured_node_from_kafkas_server_properties_serves_its_super_user(kind: str, tmp_path: Path) -> None:
    """The same file starts Kafka 4.3.1 and kbroker unchanged; admin (PLAIN over SASL_PLAINTEXT)
    creates a topic, produces and consumes; a client with a trusted certificate on the SSL
    listener is an ordinary user there and is refused the topic (no ACL grants it)."""
    from confluent_kafka import Consumer, KafkaError, Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    certs = make_certificates(tmp_path / "certs")
    target: ProcessTarget = KafkaTarget(tmp_path / kind) if kind == "kafka" else KbrokerTarget(tmp_path / kind)
    ssl_port, controller_port = free_port(), free_port()
    target.properties.write_text(  # type: ignore[attr-defined]
        _secured_properties(target.port, ssl_port, controller_port, tmp_path / kind / "data", certs))
    admin_config = {"bootstrap.servers": target.bootstrap, "security.protocol": "SASL_PLAINTEXT",
                    "sasl.mechanism": "PLAIN", "sasl.username": "admin", "sasl.password": "admin-secret"}
    with target:
        admin = AdminClient(admin_config)
        admin.create_topics([NewTopic(SECURED_TOPIC, 1, 1)])[SECURED_TOPIC].result(30)
        delivered: list[object] = []
        producer = Producer({**admin_config, "message.timeout.ms": 30000})
        producer.produce(SECURED_TOPIC, key=b"k1", value=b"paid", on_delivery=lambda e, m: delivered.append(
            e or m.offset()))
        producer.flush(30)
        assert delivered == [0]
        consumer = Consumer({**admin_config, "group.id": "secured-readers", "auto.offset.reset": "earliest"})
        consumer.subscribe([SECURED_TOPIC])
        try:
            message = _first_message(consumer)
        finally:
            consumer.close()
        assert (message.key(), message.value(), message.offset()) == (b"k1", b"paid", 0)

        refused: list[object] = []
        stranger = Producer({
            "bootstrap.servers": f"127.0.0.1:{ssl_port}", "security.protocol": "SSL", "ssl.ca.location": str(certs.ca),
            "ssl.certificate.location": str(certs.client.certificate), "ssl.key.location": str(certs.client.key),
            "message.timeout.ms": 30000,
        })  # fmt: skip
        stranger.produce(SECURED_TOPIC, value=b"forged", on_delivery=lambda e, m: refused.append(e and e.code()))
        stranger.flush(30)
        assert refused == [KafkaError.TOPIC_AUTHORIZATION_FAILED]


def _first_message(consumer: Any) -> Any:
    deadline = time.monotonic() + READY_TIMEOUT_S
    while time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None:
            assert message.error() is None, message.error()
            return message
    raise AssertionError(f"nothing consumed within {READY_TIMEOUT_S} s")
