"""SASL/PLAIN and SCRAM against a real kbroker with real clients: users from the JAAS config and
from ``kbroker serve --add-scram``, SCRAM users managed with Kafka's own ``kafka-configs``, and
wrong credentials failing with the message each client surfaces (Kafka's words).

One node for the module: a PLAINTEXT listener (administration) beside a SASL_PLAINTEXT one
offering PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512. The ``kafka-configs`` outputs asserted here are
what Kafka 4.3.1 prints for the same commands (run side by side while writing this test).
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
from collections.abc import Iterator
from pathlib import Path

import aiokafka
import kafka
import pytest
from confluent_kafka import KafkaError, Producer

from tests.broker_process import BrokerProcess, free_port
from tests.end_to_end.test_java_cli import CONFIGS, KafkaCli, kafka_cli  # noqa: F401 (the fixture)

PLAIN_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
              'password="admin-secret" user_admin="admin-secret" user_bob="bob-secret";')
SCRAM_JAAS = "org.apache.kafka.common.security.scram.ScramLoginModule required;"
SCRAM_FAILED = "Authentication failed during authentication due to invalid credentials with SASL mechanism {}"
PLAIN_FAILED = "Authentication failed: Invalid username or password"
TIMEOUT_S = 15


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[BrokerProcess, str]]:
    data = tmp_path_factory.mktemp("scram") / "data"
    sasl_port = free_port()
    broker = BrokerProcess(str(data), overrides={
        "listeners": "PLAINTEXT://127.0.0.1:{port}," + f"SASL_PLAINTEXT://127.0.0.1:{sasl_port}",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT,CONTROLLER:PLAINTEXT",
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS,
        "listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config": SCRAM_JAAS,
        "listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config": SCRAM_JAAS,
    }, extra_args=["--add-scram", "SCRAM-SHA-256=[name=alice,password=alice-secret]"])
    broker.overrides["listeners"] = broker.overrides["listeners"].format(port=broker.port)
    broker.start()
    try:
        yield broker, f"127.0.0.1:{sasl_port}"
    finally:
        broker.close()


def confluent_produce(bootstrap: str, mechanism: str, user: str, password: str) -> list[KafkaError]:
    """Produce one record; the errors the client reported (delivery and error_cb)."""
    errors: list[KafkaError] = []
    producer = Producer({"bootstrap.servers": bootstrap, "security.protocol": "SASL_PLAINTEXT",
                         "sasl.mechanism": mechanism, "sasl.username": user, "sasl.password": password,
                         "message.timeout.ms": 10_000, "error_cb": errors.append})
    producer.produce("sasl-topic", b"v", on_delivery=lambda err, _msg: errors.append(err) if err else None)
    producer.flush(TIMEOUT_S)
    return errors


def confluent_auth_errors(bootstrap: str, mechanism: str, user: str, password: str) -> list[KafkaError]:
    """The authentication errors a producer reports (error_cb) once it has reported one."""
    errors: list[KafkaError] = []
    producer = Producer({"bootstrap.servers": bootstrap, "security.protocol": "SASL_PLAINTEXT",
                         "sasl.mechanism": mechanism, "sasl.username": user, "sasl.password": password,
                         "error_cb": errors.append})
    deadline = time.monotonic() + TIMEOUT_S
    while not any(e.code() == KafkaError._AUTHENTICATION for e in errors) and time.monotonic() < deadline:
        producer.poll(0.1)
    return [e for e in errors if e.code() == KafkaError._AUTHENTICATION]


def kafka_python_topics(bootstrap: str, mechanism: str, user: str, password: str,
                        bootstrap_timeout_ms: int = 10_000) -> list[str]:
    admin = kafka.KafkaAdminClient(bootstrap_servers=bootstrap, security_protocol="SASL_PLAINTEXT",
                                   sasl_mechanism=mechanism, sasl_plain_username=user, sasl_plain_password=password,
                                   request_timeout_ms=10_000, bootstrap_timeout_ms=bootstrap_timeout_ms)
    try:
        return admin.list_topics()
    finally:
        admin.close()


def aiokafka_produce(bootstrap: str, mechanism: str, user: str, password: str) -> int:
    async def main() -> int:
        producer = aiokafka.AIOKafkaProducer(
            bootstrap_servers=bootstrap, security_protocol="SASL_PLAINTEXT", sasl_mechanism=mechanism,
            sasl_plain_username=user, sasl_plain_password=password, request_timeout_ms=10_000)
        await producer.start()
        try:
            return (await producer.send_and_wait("sasl-topic", b"v")).offset
        finally:
            await producer.stop()
    return asyncio.run(main())


@pytest.mark.parametrize(("mechanism", "user", "password"), [
    ("PLAIN", "bob", "bob-secret"),                   # a JAAS user_<name>
    ("SCRAM-SHA-256", "alice", "alice-secret"),       # seeded with --add-scram
])
def test_every_client_authenticates(node, mechanism: str, user: str, password: str) -> None:
    _broker, bootstrap = node
    assert confluent_produce(bootstrap, mechanism, user, password) == []
    assert "sasl-topic" in kafka_python_topics(bootstrap, mechanism, user, password)
    assert aiokafka_produce(bootstrap, mechanism, user, password) >= 0


@pytest.mark.parametrize(("mechanism", "user", "password", "message"), [
    ("PLAIN", "bob", "wrong", PLAIN_FAILED),
    ("SCRAM-SHA-256", "alice", "wrong", SCRAM_FAILED.format("SCRAM-SHA-256")),
    ("SCRAM-SHA-512", "alice", "alice-secret", SCRAM_FAILED.format("SCRAM-SHA-512")),  # no 512 credential
    ("SCRAM-SHA-256", "mallory", "alice-secret", SCRAM_FAILED.format("SCRAM-SHA-256")),  # unknown user
])
def test_wrong_credentials_fail_with_the_clients_sasl_error(node, caplog: pytest.LogCaptureFixture, mechanism: str,
                                                            user: str, password: str, message: str) -> None:
    _broker, bootstrap = node
    errors = confluent_auth_errors(bootstrap, mechanism, user, password)
    assert errors and f"SASL authentication error: {message} (after" in errors[0].str(), errors
    # kafka-python gives up bootstrapping. It logs the broker's answer when it reads it before the
    # connection's close: kafka-python 3.0.12 drops a response that arrives with the close in one
    # read, and does on Kafka 4.3.1 as often (its connection closes right after the answer too).
    caplog.set_level(logging.ERROR)
    with pytest.raises(kafka.errors.KafkaTimeoutError):
        kafka_python_topics(bootstrap, mechanism, user, password, bootstrap_timeout_ms=2000)
    answers = re.findall(r"SaslAuthenticationFailedError: (?!SaslAuthenticationFailedError)([^\n]*)", caplog.text)
    assert all(answer.startswith(message) for answer in answers), answers
    caplog.clear()
    with pytest.raises(aiokafka.errors.KafkaConnectionError):
        aiokafka_produce(bootstrap, mechanism, user, password)
    assert f"SaslAuthenticationFailed: {message}" in caplog.text, caplog.text[-2000:]


def configs(cli: KafkaCli, broker: BrokerProcess, *args: str, check: bool = True) -> str:
    result = cli.run(CONFIGS, "--bootstrap-server", broker.bootstrap, *args, check=check)
    return result.text if check else result.stderr


def test_kafka_configs_manages_scram_users_who_then_authenticate(node, kafka_cli: KafkaCli) -> None:  # noqa: F811
    broker, bootstrap = node
    carol = ("--entity-type", "users", "--entity-name", "carol")
    add = "SCRAM-SHA-512=[iterations=8192,password=carol-secret]"
    assert configs(kafka_cli, broker, "--alter", "--add-config", add, *carol) == (
        "Completed updating config for user carol.\n")
    assert configs(kafka_cli, broker, "--describe", *carol) == (
        "SCRAM credential configs for user-principal 'carol' are SCRAM-SHA-512=iterations=8192\n")
    described = configs(kafka_cli, broker, "--describe", "--entity-type", "users").splitlines()
    assert "SCRAM credential configs for user-principal 'alice' are SCRAM-SHA-256=iterations=4096" in described
    assert confluent_produce(bootstrap, "SCRAM-SHA-512", "carol", "carol-secret") == []

    # Kafka's refusals, as its CLI prints them
    assert "Iterations 100 is less than the minimum 4096 required for SCRAM-SHA-256" in configs(
        kafka_cli, broker, "--alter", "--add-config", "SCRAM-SHA-256=[iterations=100,password=x]", *carol,
        check=False)
    assert "UnacceptableCredentialException: Too many iterations" in configs(
        kafka_cli, broker, "--alter", "--add-config", "SCRAM-SHA-256=[iterations=20000,password=x]", *carol,
        check=False)

    assert configs(kafka_cli, broker, "--alter", "--delete-config", "SCRAM-SHA-512", *carol) == (
        "Completed updating config for user carol.\n")
    assert configs(kafka_cli, broker, "--describe", *carol) == ""
    assert "ResourceNotFoundException: Attempt to delete a user credential that does not exist" in configs(
        kafka_cli, broker, "--alter", "--delete-config", "SCRAM-SHA-512", *carol, check=False)
    assert confluent_auth_errors(bootstrap, "SCRAM-SHA-512", "carol", "carol-secret")


def test_the_metadata_log_holds_no_password(node) -> None:
    broker, _bootstrap = node
    metadata = Path(broker.data_dir) / "__cluster_metadata-0"
    stored = b"".join(path.read_bytes() for path in metadata.glob("*.log"))
    assert b"UserScramCredentialRecord" in stored
    assert b"alice-secret" not in stored and b"carol-secret" not in stored
    assert b"alice-secret" not in Path(broker.log_path).read_bytes()



def test_scram_credentials_need_cluster_describe_and_alter_under_an_authorizer(
        tmp_path_factory: pytest.TempPathFactory, kafka_cli: KafkaCli) -> None:  # noqa: F811
    # As Kafka: AlterUserScramCredentials needs ALTER, DescribeUserScramCredentials DESCRIBE on
    # the cluster; a user without them gets CLUSTER_AUTHORIZATION_FAILED, a super user succeeds.
    # (The describe goes through kafka-configs: confluent-kafka 2.16's describe aborts the process
    # on any top-level error answer.)
    from confluent_kafka.admin import AdminClient, ScramCredentialInfo, ScramMechanism, UserScramCredentialUpsertion

    home = tmp_path_factory.mktemp("scram-acl")
    sasl_port = free_port()
    broker = BrokerProcess(str(home / "data"), overrides={
        "listeners": f"SASL_PLAINTEXT://127.0.0.1:{sasl_port}",
        "listener.security.protocol.map": "SASL_PLAINTEXT:SASL_PLAINTEXT,CONTROLLER:PLAINTEXT",
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS,
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:admin",
    }, port=sasl_port)
    broker.start()
    try:
        upsert = UserScramCredentialUpsertion("carol", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096),
                                              b"carol-secret")

        def alter_error(user: str) -> int | None:
            client = AdminClient({"bootstrap.servers": broker.bootstrap, "security.protocol": "SASL_PLAINTEXT",
                                  "sasl.mechanism": "PLAIN", "sasl.username": user, "sasl.password": f"{user}-secret"})
            try:
                client.alter_user_scram_credentials([upsert])["carol"].result(TIMEOUT_S)
                return None
            except Exception as exc:
                return exc.args[0].code()

        def describe(user: str) -> str:
            config = home / f"{user}.properties"
            config.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
                              "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required "
                              f'username="{user}" password="{user}-secret";\n')
            result = kafka_cli.run(CONFIGS, "--bootstrap-server", broker.bootstrap, "--command-config", str(config),
                                   "--describe", "--entity-type", "users", "--entity-name", "carol", check=False)
            return result.text + result.stderr

        assert alter_error("bob") == KafkaError.CLUSTER_AUTHORIZATION_FAILED
        assert "ClusterAuthorizationException" in describe("bob")
        assert alter_error("admin") is None
        described = describe("admin")
        assert "SCRAM credential configs for user-principal 'carol' are SCRAM-SHA-256=iterations=4096" in described
    finally:
        broker.close()
