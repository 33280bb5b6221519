"""PLAINTEXT, SSL, mTLS, SASL_PLAINTEXT and SASL_SSL listeners side by side on one kbroker node,
and a cluster replicating over a secured inter-broker listener, with real clients over real sockets.

Certificates are made fresh by the test (``compat.security.certificates``: a trusted CA that signs
the broker's and alice's certificates, another CA that signs mallory's). Clients check what a
Kafka user relies on: records read back at the offsets they were written to, the endpoints
Metadata names (a client of a listener is sent to that listener's port), the error a failed
authentication surfaces, and that bad input on one connection leaves the broker serving others.
"""

from __future__ import annotations

import socket
import ssl
import struct
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, Producer
from confluent_kafka.admin import AdminClient

from compat.security.certificates import Certificates, make_certificates
from kbroker.testing.local import CONTROLLER_ID, HOST, TEST_SETTINGS, LocalBroker, free_port

DEADLINE_S = 30.0
USERS = 'user_admin="admin-secret" user_alice="alice-secret"'
JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
        f'username="admin" password="admin-secret" {USERS};')
API_VERSIONS_V0 = struct.pack(">ihhih", 10, 18, 0, 1, -1)  # size, key, version, correlation id, no client id


def _tls_settings(certs: Certificates) -> dict[str, str]:
    return {"ssl.keystore.type": "PEM", "ssl.keystore.location": str(certs.broker.keystore),
            "ssl.truststore.type": "PEM", "ssl.truststore.location": str(certs.ca)}


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certificates:
    return make_certificates(tmp_path_factory.mktemp("certificates"))


@pytest.fixture(scope="module")
def node(certs: Certificates, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """One node: PLAINTEXT, SSL (no client certificate), MTLS (an SSL listener that requires one),
    SASL_PLAINTEXT and SASL_SSL (PLAIN), and its controller listener."""
    ports = {name: free_port() for name in ("PLAINTEXT", "SSL", "MTLS", "SASL_PLAINTEXT", "SASL_SSL", "CONTROLLER")}
    settings = {
        **TEST_SETTINGS, "process.roles": "broker,controller", "controller.listener.names": "CONTROLLER",
        "controller.quorum.voters": f"1@{HOST}:{ports['CONTROLLER']}",
        "listeners": ",".join(f"{name}://{HOST}:{port}" for name, port in ports.items()),
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SSL:SSL,MTLS:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,"
                                          "SASL_SSL:SASL_SSL,CONTROLLER:PLAINTEXT",
        "inter.broker.listener.name": "PLAINTEXT", "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
        "listener.name.sasl_ssl.plain.sasl.jaas.config": JAAS,
        "listener.name.mtls.ssl.client.auth": "required",
        "offsets.topic.replication.factor": "1", "transaction.state.log.replication.factor": "1",
        "transaction.state.log.min.isr": "1", **_tls_settings(certs),
    }
    broker = LocalBroker(tmp_path_factory.mktemp("node"), 1, settings, ports["PLAINTEXT"])
    broker.start()
    try:
        yield {"broker": broker, "ports": ports}
    finally:
        broker.close()


def _client(node: dict[str, Any], certs: Certificates, listener: str, **extra: str) -> dict[str, str]:
    port = node["ports"][listener]
    conf = {"bootstrap.servers": f"{HOST}:{port}"}
    if listener in ("SSL", "MTLS", "SASL_SSL"):
        conf |= {"security.protocol": "SSL" if listener != "SASL_SSL" else "SASL_SSL", "ssl.ca.location": str(certs.ca)}
    if listener == "MTLS":
        conf |= {"ssl.certificate.location": str(certs.client.certificate), "ssl.key.location": str(certs.client.key)}
    if listener == "SASL_PLAINTEXT":
        conf["security.protocol"] = "SASL_PLAINTEXT"
    if listener.startswith("SASL"):
        conf |= {"sasl.mechanism": "PLAIN", "sasl.username": "alice", "sasl.password": "alice-secret"}
    return conf | extra


def _round_trip_confluent(conf: dict[str, str], topic: str, count: int = 20) -> None:
    """acks=all produce of ``count`` records (one large enough for a segment-sized fetch), then a
    consumer reads them back at their offsets."""
    producer = Producer({**conf, "acks": "all"})
    values = [b"x" * 100_000 if i == 0 else f"value-{i}".encode() for i in range(count)]
    for i, value in enumerate(values):
        producer.produce(topic, key=f"k{i}".encode(), value=value)
    assert producer.flush(DEADLINE_S) == 0
    consumer = Consumer({**conf, "group.id": f"g-{topic}", "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    got: dict[int, bytes] = {}
    deadline = time.monotonic() + DEADLINE_S
    try:
        while len(got) < count and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                got[message.offset()] = message.value()
    finally:
        consumer.close()
    assert got == dict(enumerate(values))


def test_confluent_produces_and_consumes_on_every_listener(node: dict[str, Any], certs: Certificates) -> None:
    for listener in ("PLAINTEXT", "SSL", "MTLS", "SASL_PLAINTEXT", "SASL_SSL"):
        _round_trip_confluent(_client(node, certs, listener), f"confluent-{listener.lower()}")


def test_kafka_python_produces_and_consumes_over_ssl_and_mtls(node: dict[str, Any], certs: Certificates) -> None:
    from kafka import KafkaConsumer, KafkaProducer

    for listener in ("SSL", "MTLS"):
        conf: dict[str, Any] = {"bootstrap_servers": f"{HOST}:{node['ports'][listener]}", "security_protocol": "SSL",
                                "ssl_cafile": str(certs.ca)}
        if listener == "MTLS":
            conf |= {"ssl_certfile": str(certs.client.certificate), "ssl_keyfile": str(certs.client.key)}
        topic = f"kafka-python-{listener.lower()}"
        producer = KafkaProducer(acks="all", **conf)
        offsets = [producer.send(topic, key=b"k", value=f"v{i}".encode()).get(DEADLINE_S).offset for i in range(5)]
        producer.close()
        assert offsets == [0, 1, 2, 3, 4]
        consumer = KafkaConsumer(topic, auto_offset_reset="earliest", consumer_timeout_ms=int(DEADLINE_S * 1000),
                                 **conf)
        got = []
        for message in consumer:
            got.append((message.offset, message.value))
            if len(got) == 5:
                break
        consumer.close()
        assert got == [(i, f"v{i}".encode()) for i in range(5)]


def test_metadata_names_the_port_of_the_listener_asked(node: dict[str, Any], certs: Certificates) -> None:
    for listener in ("PLAINTEXT", "SSL", "SASL_SSL"):
        brokers = AdminClient(_client(node, certs, listener)).list_topics(timeout=DEADLINE_S).brokers
        assert {b.id: b.port for b in brokers.values()} == {1: node["ports"][listener]}, listener


def _api_versions_answered(port: int, context: ssl.SSLContext | None = None) -> bool:
    with socket.create_connection((HOST, port), timeout=DEADLINE_S) as raw:
        sock = context.wrap_socket(raw, server_hostname=HOST) if context is not None else raw
        sock.sendall(API_VERSIONS_V0)
        head = sock.recv(8)
        return len(head) == 8 and struct.unpack(">i", head[4:])[0] == 1


def _closed_without_answer(sock: socket.socket) -> bool:
    try:
        return sock.recv(1) == b""
    except (ConnectionResetError, ssl.SSLError):
        return True


def _tls_alert(port: int, context: ssl.SSLContext) -> str:
    """The TLS alert the broker answers a client with (OpenSSL's reason, e.g. TLSV1_ALERT_UNKNOWN_CA);
    "" when the connection ended without one."""
    with socket.create_connection((HOST, port), timeout=DEADLINE_S) as raw:
        try:  # TLS 1.3: the client's side of the handshake ends before the broker checks its certificate
            with context.wrap_socket(raw, server_hostname=HOST) as sock:
                sock.sendall(API_VERSIONS_V0)
                assert sock.recv(1) == b"", "a refused client was answered"
        except ssl.SSLError as exc:
            return exc.reason or ""
        except ConnectionResetError:
            pass
    return ""


@pytest.mark.parametrize("client_certificate", ["from another CA", "none"])
def test_a_refused_client_certificate_gets_kafkas_tls_alert_and_the_broker_keeps_serving(
        node: dict[str, Any], certs: Certificates, client_certificate: str) -> None:
    # Kafka's broker (JSSE) sends the alert, so clients report a certificate error instead of a
    # dropped connection they retry until their timeout.
    context = ssl.create_default_context(cafile=str(certs.ca))
    if client_certificate == "none":
        expected = "TLSV13_ALERT_CERTIFICATE_REQUIRED"
    else:
        expected = "TLSV1_ALERT_UNKNOWN_CA"
        context.load_cert_chain(str(certs.untrusted_client.certificate), str(certs.untrusted_client.key))
    assert _tls_alert(node["ports"]["MTLS"], context) == expected
    trusted = ssl.create_default_context(cafile=str(certs.ca))
    trusted.load_cert_chain(str(certs.client.certificate), str(certs.client.key))
    assert _api_versions_answered(node["ports"]["MTLS"], trusted)


def test_tls_on_a_plaintext_port_and_plaintext_on_a_tls_port_fail_cleanly(
        node: dict[str, Any], certs: Certificates) -> None:
    context = ssl.create_default_context(cafile=str(certs.ca))
    with socket.create_connection((HOST, node["ports"]["PLAINTEXT"]), timeout=DEADLINE_S) as raw:
        with pytest.raises((ssl.SSLError, ConnectionResetError, OSError)):
            context.wrap_socket(raw, server_hostname=HOST)  # a ClientHello read as a 369 MB request: closed
    with socket.create_connection((HOST, node["ports"]["SSL"]), timeout=DEADLINE_S) as sock:
        sock.sendall(API_VERSIONS_V0)  # plaintext where a ClientHello is expected
        assert _closed_without_answer(sock)
    assert _api_versions_answered(node["ports"]["PLAINTEXT"])
    assert _api_versions_answered(node["ports"]["SSL"], context)
    assert "a TLS handshake on a listener without TLS?" in node["broker"].read_log()


def test_a_wrong_password_is_reported_as_kafka_reports_it(node: dict[str, Any], certs: Certificates) -> None:
    errors: list[KafkaError] = []
    conf = _client(node, certs, "SASL_SSL", **{"sasl.password": "wrong"})
    admin = AdminClient({**conf, "error_cb": errors.append})
    deadline = time.monotonic() + DEADLINE_S
    while not errors and time.monotonic() < deadline:
        admin.poll(0.2)
    assert errors and errors[0].code() == KafkaError._AUTHENTICATION
    assert "Authentication failed: Invalid username or password" in errors[0].str()
    assert _api_versions_answered(node["ports"]["PLAINTEXT"])


# --- a cluster over a secured inter-broker listener ---------------------------------------------


@pytest.mark.parametrize(("protocol", "controller_protocol"), [("SSL", "PLAINTEXT"), ("SASL_SSL", "SASL_SSL")])
def test_a_cluster_replicates_over_a_secured_inter_broker_listener(
        protocol: str, controller_protocol: str, certs: Certificates, tmp_path: Path) -> None:
    """A controller and three brokers; the brokers replicate (follower Fetch), send markers and
    find each other on their ``protocol`` listener, and reach the controller (registration,
    heartbeats, metadata) on its ``controller_protocol`` listener; acks=all needs all three replicas.
    The controller's PLAINTEXT listener only answers the test's readiness probe."""
    controller_port, probe_port = free_port(), free_port()
    common = {
        **TEST_SETTINGS, "controller.quorum.voters": f"{CONTROLLER_ID}@{HOST}:{controller_port}",
        "controller.listener.names": "CONTROLLER,PROBE", "default.replication.factor": "3",
        "min.insync.replicas": "3", "offsets.topic.replication.factor": "3", "offsets.topic.num.partitions": "1",
        "transaction.state.log.replication.factor": "3",
        "listener.security.protocol.map": f"PLAINTEXT:PLAINTEXT,INTERNAL:{protocol},"
                                          f"CONTROLLER:{controller_protocol},PROBE:PLAINTEXT",
        "sasl.enabled.mechanisms": "PLAIN", "sasl.mechanism.inter.broker.protocol": "PLAIN",
        "sasl.mechanism.controller.protocol": "PLAIN", "listener.name.internal.plain.sasl.jaas.config": JAAS,
        "listener.name.controller.plain.sasl.jaas.config": JAAS, **_tls_settings(certs),
    }
    controller = LocalBroker(tmp_path / "controller", CONTROLLER_ID, {
        **common, "process.roles": "controller",
        "listeners": f"CONTROLLER://{HOST}:{controller_port},PROBE://{HOST}:{probe_port}"},
        probe_port, role="controller")
    brokers = []
    for node_id in (1, 2, 3):
        port, internal = free_port(), free_port()
        brokers.append(LocalBroker(tmp_path / f"broker-{node_id}", node_id, {
            **common, "process.roles": "broker", "inter.broker.listener.name": "INTERNAL",
            "listeners": f"PLAINTEXT://{HOST}:{port},INTERNAL://{HOST}:{internal}"}, port))
    nodes = [*brokers, controller]  # brokers first: their controlled shutdown needs the controller
    try:
        controller.start()
        for broker in brokers:
            broker.start(wait=False)
        for broker in brokers:
            broker.wait_ready(brokers=3)
        brokers[0].create_topic("replicated", partitions=1, replication_factor=3)
        conf = {"bootstrap.servers": ",".join(b.bootstrap_servers for b in brokers)}
        _round_trip_confluent(conf, "replicated", count=30)
        for partition in brokers[0].metadata(["replicated"]).topics[0].partitions:
            assert sorted(partition.isr_nodes) == [1, 2, 3]
    finally:
        for node in nodes:
            node.close()
