"""KIP-714 client telemetry: real clients push their metrics and /metrics re-exports them.

A subscription is made as an operator makes it, with Kafka's ``kafka-client-metrics`` tool
(``--metrics '*' --interval 100``, a CLIENT_METRICS config resource). Then a confluent-kafka
producer (librdkafka, ``enable.metrics.push`` on by default) and Kafka's Java console producer
(``enable.metrics.push`` default) produce; each shows up on /metrics with its own metrics,
labelled by its client id, client instance id, and the software name and version it sent in
ApiVersions.
"""

from __future__ import annotations

import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Producer

from compat.deps import DepsError, kafka_classpath
from tests.broker_process import BrokerProcess
from tests.end_to_end.metrics_endpoint import broker_with_http_listener, scrape

JVM_FLAGS = ["-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Xshare:auto"]
DEADLINE_S = 60.0


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[tuple[BrokerProcess, str]]:
    with broker_with_http_listener(tmp_path / "data") as running:
        yield running


@pytest.fixture(scope="module")
def java() -> list[str]:
    java = shutil.which("java")
    if java is None:
        pytest.fail("no 'java' on PATH: the telemetry test needs a Java 17+ runtime")
    try:
        return [java, *JVM_FLAGS, "-cp", kafka_classpath()]
    except DepsError as exc:
        pytest.fail(f"Kafka jars unavailable: {exc}")


def client_samples(http: str, client_id: str) -> dict[str, dict[str, str]]:
    """name -> labels of the pushed samples of ``client_id`` on /metrics (parsed by prometheus-client)."""
    return {name: dict(labels) for name, labels in scrape(http) if dict(labels).get("client_id") == client_id}


def wait_for_client(http: str, client_id: str) -> dict[str, dict[str, str]]:
    """The client's samples once its first push has landed (clients push from their own threads)."""
    deadline = time.monotonic() + DEADLINE_S
    while not (samples := client_samples(http, client_id)):
        assert time.monotonic() < deadline, f"{client_id} never showed up on /metrics"
        time.sleep(0.2)
    return samples


def test_java_and_librdkafka_clients_push_their_metrics(broker: tuple[BrokerProcess, str], java: list[str]) -> None:
    proc, http = broker
    subscribe = subprocess.run([*java, "org.apache.kafka.tools.ClientMetricsCommand", "--bootstrap-server",
                                proc.bootstrap, "--alter", "--name", "everything", "--metrics", "*",
                                "--interval", "100"], capture_output=True, text=True, timeout=120, check=False)
    assert subscribe.returncode == 0, subscribe.stderr
    assert "Altered client metrics config for everything" in subscribe.stdout

    producer = Producer({"bootstrap.servers": proc.bootstrap, "client.id": "rdkafka-app"})
    for i in range(10):
        producer.produce("telemetry", value=b"%d" % i)
    assert producer.flush(30) == 0
    rdkafka = wait_for_client(http, "rdkafka-app")
    assert "org_apache_kafka_producer_node_request_latency_avg" in rdkafka
    labels = next(iter(rdkafka.values()))
    assert labels["client_software_name"] == "confluent-kafka-python"
    assert "rdkafka" in labels["client_software_version"]
    assert labels["client_instance_id"] not in ("", "00000000-0000-0000-0000-000000000000")

    console = subprocess.Popen([*java, "org.apache.kafka.tools.ConsoleProducer", "--bootstrap-server", proc.bootstrap,
                                "--topic", "telemetry", "--command-property", "client.id=java-app"],
                               stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        assert console.stdin is not None
        console.stdin.write("one\ntwo\n")
        console.stdin.flush()
        java_samples = wait_for_client(http, "java-app")
    finally:
        if console.stdin is not None:
            console.stdin.close()
        console.wait(timeout=60)
    assert "org_apache_kafka_producer_connection_creation_total" in java_samples
    labels = next(iter(java_samples.values()))
    assert labels["client_software_name"] == "apache-kafka-java"
    assert labels["client_software_version"] == "4.3.1"
