"""The ``kbroker.request`` logger, kbroker's ``kafka.request.logger``: at DEBUG a line for every
request answered (API, version, correlation id, client id, peer, listener, principal, total
time), and a request slower than ``kbroker.request.logger.slow.ms`` at INFO whatever the
level. Nothing is logged per request at INFO otherwise."""

from __future__ import annotations

import logging
import time
from types import ModuleType
from typing import Any

from kbroker.network.context import RequestContext

REQUEST_LOGGER = logging.getLogger("kbroker.request")


class RequestLogger:
    def __init__(self, slow_ms: int) -> None:
        self.slow_ms = slow_ms  # -1: no slow-request lines

    def completed(self, handler: ModuleType, api_key: int, api_version: int, request: object, response: object,
                  started: float, context: RequestContext[Any]) -> None:
        elapsed_ms = (time.perf_counter() - started) * 1000
        slow = 0 <= self.slow_ms < elapsed_ms
        if slow or REQUEST_LOGGER.isEnabledFor(logging.DEBUG):
            REQUEST_LOGGER.log(
                logging.INFO if slow else logging.DEBUG,
                "%s request %s v%d (correlation id %d, client id %r) from %s on %s as %s: total time %.1f ms",
                "Slow" if slow else "Completed", handler.__name__.rsplit(".", 1)[-1], api_version,
                context.header.correlation_id, context.header.client_id, context.connection, context.listener,
                context.principal, elapsed_ms,
                extra={"api_key": api_key, "total_time_ms": round(elapsed_ms, 3)},
            )
