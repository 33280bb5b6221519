"""Real kbroker nodes for any project's tests.

``kafka_broker()`` and ``kafka_cluster(n)`` start local kbroker processes (no container, no JVM;
:mod:`kbroker.testing.local`); the pytest plugin (:mod:`kbroker.testing.pytest_plugin`, loaded
through the ``pytest11`` entry point) offers them as the fixtures ``kbroker`` and
``kbroker_cluster``; ``KbrokerContainer`` runs the container image under testcontainers-python
(:mod:`kbroker.testing.containers`, needs ``pip install testcontainers``).
"""

from __future__ import annotations

import importlib
from typing import Any

# Names resolved on first use: pytest loads the plugin (a submodule) before its other plugins, and
# importing kio then would import hypothesis too early; testcontainers is optional.
_HOMES = {"LocalBroker": "local", "LocalCluster": "local", "kafka_broker": "local", "kafka_cluster": "local",
          "KbrokerContainer": "containers", "KbrokerCluster": "containers"}
__all__ = sorted(_HOMES)


def __getattr__(name: str) -> Any:
    if name not in _HOMES:
        raise AttributeError(name)
    return getattr(importlib.import_module(f"kbroker.testing.{_HOMES[name]}"), name)
