"""Shared fixtures: a real kbroker process on loopback, one per test module by default, and the
clearing of injected I/O failures; and the two lanes the whole suite runs in side by side
(``pytest -n 2``)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from kbroker.storage import file_io
from xdist.scheduler import LoadScopeScheduling

from tests.broker_process import BrokerProcess


@pytest.fixture
def no_failpoints_left() -> Iterator[None]:
    """Clears the I/O failures a test injected (``kbroker.storage.file_io``): they are process-wide."""
    yield
    file_io.clear_failpoints()


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


# The Spark pipelines and the side-by-side compat suite spend most of their time in JVMs and
# waiting on brokers, the tests under tests/ mostly in kbroker processes: with ``-n 2`` they run
# as two lanes, one xdist worker each, every test in collection order, so the suite takes the
# longer lane's time instead of the sum.
SIDE_LANE = ("spark/", "compat/")


class TwoLanes(LoadScopeScheduling):
    """xdist scheduling with exactly two scopes: the side lane and the main lane."""

    def _split_scope(self, nodeid: str) -> str:
        return "side" if nodeid.startswith(SIDE_LANE) else "main"


def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> TwoLanes:
    return TwoLanes(config, log)
