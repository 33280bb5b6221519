"""Shared fixtures: a real kbroker process on loopback, one per test module by default."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.broker_process import BrokerProcess


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """A running single-node broker shared by the tests of one module."""
    data = tmp_path_factory.mktemp("broker") / "data"
    proc = BrokerProcess(str(data))
    proc.start()
    yield proc
    proc.close()


@pytest.fixture
def fresh_broker(tmp_path) -> Iterator[BrokerProcess]:
    """A broker of the test's own (for tests that crash, restart or reconfigure it)."""
    proc = BrokerProcess(str(tmp_path / "data"))
    proc.start()
    yield proc
    proc.close()
