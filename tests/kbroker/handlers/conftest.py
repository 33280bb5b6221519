"""Client fixtures for the handler tests, on the module's shared broker."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from confluent_kafka.admin import AdminClient
from kafka.admin import KafkaAdminClient

from tests.broker_process import BrokerProcess

from .wire import wait_for_coordinators


@pytest.fixture(scope="module", autouse=True)
def coordinators(broker: BrokerProcess) -> None:
    """Group and transaction requests here are bare: first the coordinators a client would find."""
    wait_for_coordinators(broker.bootstrap)


@pytest.fixture(scope="module")
def kadmin(broker: BrokerProcess) -> Iterator[KafkaAdminClient]:
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=10_000)
    yield admin
    admin.close()


@pytest.fixture(scope="module")
def cadmin(broker: BrokerProcess) -> AdminClient:
    return AdminClient({"bootstrap.servers": broker.bootstrap})
