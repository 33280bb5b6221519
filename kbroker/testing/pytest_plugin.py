"""The pytest plugin (``pytest11`` entry point ``kbroker``): fixtures ``kbroker`` and
``kbroker_cluster``, a fresh node or cluster per test.

``@pytest.mark.kbroker(num_partitions=3)`` passes broker settings to either fixture, and
``@pytest.mark.kbroker(brokers=5)`` sizes the cluster (three brokers by default).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from kbroker.testing.local import LocalBroker, LocalCluster


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "kbroker(**settings): broker settings for the kbroker fixtures "
                                       "(brokers=N sizes kbroker_cluster)")


def _marked_settings(request: pytest.FixtureRequest) -> dict[str, Any]:
    marker = request.node.get_closest_marker("kbroker")
    return dict(marker.kwargs) if marker else {}


@pytest.fixture
def kbroker(request: pytest.FixtureRequest) -> Iterator[LocalBroker]:
    """A single kbroker node ready for clients; ``kbroker.bootstrap_servers`` is "host:port"."""
    from kbroker.testing.local import kafka_broker  # not at plugin load: kio imports hypothesis early

    with kafka_broker(**_marked_settings(request)) as broker:
        yield broker


@pytest.fixture
def kbroker_cluster(request: pytest.FixtureRequest) -> Iterator[LocalCluster]:
    """A replicated kbroker cluster (a controller and three brokers) ready for clients."""
    from kbroker.testing.local import kafka_cluster

    settings = _marked_settings(request)
    with kafka_cluster(settings.pop("brokers", 3), **settings) as cluster:
        yield cluster
