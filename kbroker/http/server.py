"""Serves the node's application on each ``kbroker.http.listeners`` address, on the node's own
event loop (aiohttp's AppRunner and one TCPSite per listener), started before the node's roles
so ``/health/live`` answers during start-up and stopped after them."""

from __future__ import annotations

import logging

from aiohttp import web

from kbroker.http.app import NodeServices, build_app
from kbroker.http.listeners import HTTP_LISTENERS_KEY, parse_http_listeners
from kbroker.metrics.node_metrics import NodeMetrics

log = logging.getLogger(__name__)


class HttpServer:
    def __init__(self, services: NodeServices) -> None:
        self.services = services
        self.listeners = parse_http_listeners(services.config.get(HTTP_LISTENERS_KEY) or "")
        self._runner: web.AppRunner | None = None
        self.bound: list[tuple[str, int]] = []

    async def start(self) -> None:
        """Listen on every configured address (none: nothing to do). A port in use raises OSError."""
        if not self.listeners:
            return
        self.services.metrics = NodeMetrics(self.services)
        self.services.metrics.event_loop_lag.start()
        # access_log=None: no log line per HTTP request (scrapes every few seconds would flood it).
        self._runner = web.AppRunner(build_app(self.services), access_log=None, handle_signals=False)
        await self._runner.setup()
        for host, port in self.listeners:
            site = web.TCPSite(self._runner, host or None, port, reuse_address=True)
            await site.start()
        self.bound = [(address[0], address[1]) for address in self._runner.addresses]
        log.info("HTTP listening on %s", ", ".join(f"http://{h}:{p}" for h, p in self.bound))

    async def stop(self) -> None:
        if self.services.metrics is not None:
            self.services.metrics.event_loop_lag.stop()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
