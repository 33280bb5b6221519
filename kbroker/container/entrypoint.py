"""``kbroker container``: the container image's entrypoint.

It merges the environment, a mounted ``server.properties`` and the image's defaults
(:mod:`kbroker.container.container_config`), writes the result to the data volume (where
``kbroker healthcheck`` reads it), prints each setting with its origin, and hands over to
``kbroker serve`` in this same process. So the broker is PID 1 and receives ``docker stop``'s
SIGTERM itself, with no shell in between, drains and exits 0. ``CLUSTER_ID`` (as the
apache/kafka image takes it) or ``KAFKA_CLUSTER_ID`` is left in the environment, where ``serve``
reads it (kbroker/cli.py): written to fresh log dirs, so nodes given the same id form one cluster
whatever order they start in, and refused against a volume of another cluster.
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Mapping
from types import FrameType

from kbroker.config.broker_catalogue import BROKER_CONFIGS
from kbroker.container.container_config import FINAL_PROPERTIES, MOUNTED_PROPERTIES, log_level, merge
from kbroker.storage.file_io import replace_atomically


def serve_argv(environ: Mapping[str, str], mounted: str = MOUNTED_PROPERTIES,
               final: str = FINAL_PROPERTIES) -> list[str]:
    """Prepare the node's configuration and return the ``kbroker serve`` arguments that run it.

    Raises ``ConfigError`` (exit status 2) for a bad setting, naming the variable or file line.
    """
    # PID 1 ignores a signal it has no handler for; until `serve` installs its own, a stop
    # request ends the container at once (nothing has been opened yet).
    signal.signal(signal.SIGTERM, _stop_before_start)
    try:
        with open(mounted, encoding="utf-8") as fh:
            mounted_text: str | None = fh.read()
    except FileNotFoundError:
        mounted_text = None
    settings = merge(environ, mounted_text, mounted)
    level = log_level(environ)
    os.makedirs(os.path.dirname(final), exist_ok=True)
    replace_atomically(final, settings.properties_text().encode())
    for key, value in settings.values.items():
        shown = "[hidden]" if _is_password(key) else value
        print(f"kbroker container: {key}={shown} ({settings.origins[key]})", file=sys.stderr)
    return ["serve", "--config", final, "--log-level", level]


def _is_password(key: str) -> bool:
    """A password key, also under a listener or mechanism prefix
    (``listener.name.sasl_ssl.plain.sasl.jaas.config``): never printed, as Kafka prints [hidden]."""
    parts = key.split(".")
    return any((d := BROKER_CONFIGS.get(".".join(parts[i:]))) is not None and d.sensitive for i in range(len(parts)))


def _stop_before_start(signum: int, frame: FrameType | None) -> None:
    raise SystemExit(0)
