"""Real kbroker nodes for any project's tests.

``kafka_broker()`` and ``kafka_cluster(n)`` start local kbroker processes (no container, no JVM;
:mod:`kbroker.testing.local`); the pytest plugin (:mod:`kbroker.testing.pytest_plugin`, loaded
through the ``pytest11`` entry point) offers them as the fixtures ``kbroker`` and
``kbroker_cluster``; ``KbrokerContainer`` runs the container image under testcontainers-python
(:mod:`kbroker.testing.containers`, needs ``pip install testcontainers``).
"""

from __future__ import annotations

from typing import Any

from kbroker.testing.local import LocalBroker, LocalCluster, kafka_broker, kafka_cluster

__all__ = ["KbrokerCluster", "KbrokerContainer", "LocalBroker", "LocalCluster", "kafka_broker", "kafka_cluster"]


def __getattr__(name: str) -> Any:
    # testcontainers is optional: imported only when its classes are asked for.
    if name in ("KbrokerContainer", "KbrokerCluster"):
        from kbroker.testing import containers

        return getattr(containers, name)
    raise AttributeError(name)
