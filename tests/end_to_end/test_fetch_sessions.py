"""Consumers and fetch sessions (KIP-227) against kbroker, seen on the wire through a tap the
broker advertises: Kafka's Java consumer opens a session and then fetches incrementally (epochs
1, 2, 3, ... naming only what moved) and closes it at exit; librdkafka, which does not implement
KIP-227, stays sessionless; kafka-python's sessions name topics (Fetch v12). All read every
record. ``compat.scenarios.fetch_sessions`` shows the same steps against Apache Kafka 4.3.1."""

from __future__ import annotations

import pytest

from compat.deps import DepsError, kafka_classpath
from compat.scenarios.fetch_sessions import (
    CONFLUENT_CLIENT_ID,
    JAVA_CLIENT_ID,
    KAFKA_PYTHON_CLIENT_ID,
    PARTITIONS,
    RECORDS_PER_PARTITION,
    confluent_consumer,
    fill,
    java_console_consumer,
    kafka_python_consumer,
)
from compat.targets import free_port
from compat.wire_tap import WireTap, session_pattern
from kbroker.testing import kafka_broker


@pytest.fixture(scope="module", autouse=True)
def kafka_jars() -> None:
    try:
        kafka_classpath()
    except DepsError as exc:
        pytest.fail(f"Kafka's jars are not installed (python -m compat.deps installs them): {exc}")


def test_java_consumer_fetches_incrementally_and_librdkafka_sessionless() -> None:
    tap_port = free_port()
    with kafka_broker(**{"advertised.listeners": f"PLAINTEXT://127.0.0.1:{tap_port}"}) as broker:
        tap = WireTap(tap_port, broker.port)
        tap.start()
        try:
            bootstrap = f"127.0.0.1:{tap_port}"
            fill(bootstrap)
            assert java_console_consumer(bootstrap) == RECORDS_PER_PARTITION
            assert confluent_consumer(bootstrap) == PARTITIONS * RECORDS_PER_PARTITION
            assert kafka_python_consumer(bootstrap) == PARTITIONS * RECORDS_PER_PARTITION
        finally:
            tap.close()
    java = tap.fetches(JAVA_CLIENT_ID)
    assert session_pattern(java) == ["full+open -> id", "incremental", "close"]
    incremental = [e for e in java if e.epoch > 0]
    assert len(incremental) >= 3
    assert len({e.session_id for e in incremental}) == 1
    assert all(e.answered_session_id == e.session_id for e in incremental)
    assert max(e.partitions_named for e in incremental) <= 1  # only the moved partition, when it moved
    assert session_pattern(tap.fetches(CONFLUENT_CLIENT_ID)) == ["sessionless"]
    # kafka-python's sessions name topics (Fetch v12): the same steps; it closes no session at exit.
    by_name = tap.fetches(KAFKA_PYTHON_CLIENT_ID)
    assert {e.version for e in by_name} == {12}
    assert session_pattern(by_name)[:2] == ["full+open -> id", "incremental"]
