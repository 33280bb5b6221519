"""The aiohttp application of one node: ``/health/live``, ``/health/ready``, ``/metrics``, and
the routes of the web console, which plugs in through ``kbroker.http.console.register(app,
services)`` when that package is installed.

``NodeServices`` is what the routes may read: the node's configuration and its broker and
controller roles (either may be absent: a controller-only or broker-only node, or a role still
being built while the node starts). Handlers read them at request time; nothing here runs on
the produce/fetch path.
"""

from __future__ import annotations

import dataclasses
import importlib
import importlib.util
from typing import TYPE_CHECKING

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST

if TYPE_CHECKING:
    from kbroker.config.kafka_config import KafkaConfig
    from kbroker.metrics.node_metrics import NodeMetrics
    from kbroker.node.broker import Broker
    from kbroker.node.controller_node import ControllerNode

SERVICES_KEY: web.AppKey[NodeServices] = web.AppKey("kbroker.services")
# The console's module; it is optional so the HTTP side works without it.
CONSOLE_MODULE = "kbroker.http.console"


@dataclasses.dataclass
class NodeServices:
    """The node's roles as the routes see them; the node fills them in as it builds them."""

    config: KafkaConfig
    broker: Broker | None = None
    controller: ControllerNode | None = None
    metrics: NodeMetrics | None = None

    def readiness(self) -> tuple[bool, str]:
        """(ready, why): ready when each role this node has would serve clients now. A broker is
        ready once it has registered, caught up with the metadata log and been unfenced (the
        moment its Dispatcher starts answering) and while it stays unfenced; a controller-only
        node once its quorum has a known leader."""
        roles = self.config.process_roles
        if "broker" in roles:
            broker = self.broker
            if broker is None or not broker.ready.is_set():
                return False, "broker starting: not yet registered, caught up and unfenced"
            if broker.lifecycle is None or broker.lifecycle.fenced:
                return False, "broker fenced by the controller"
        if "controller" in roles:
            controller = self.controller
            raft = None if controller is None else controller.raft
            if raft is None:
                return False, "controller starting"
            if raft.leader_id is None:
                return False, "controller quorum has no leader"
        return True, "ready"


async def _live(_request: web.Request) -> web.Response:
    """The process answers: its event loop turns."""
    return web.json_response({"status": "live"})


async def _ready(request: web.Request) -> web.Response:
    ready, why = request.app[SERVICES_KEY].readiness()
    return web.json_response({"status": "ready" if ready else "not ready", "reason": why},
                             status=200 if ready else 503)


async def _metrics(request: web.Request) -> web.Response:
    """Prometheus text format 0.0.4, rendered by prometheus-client."""
    metrics = request.app[SERVICES_KEY].metrics
    assert metrics is not None
    await metrics.before_scrape()
    return web.Response(body=metrics.render(), headers={"Content-Type": CONTENT_TYPE_LATEST})


def build_app(services: NodeServices) -> web.Application:
    """The node's application; the console adds its routes when its package is installed."""
    app = web.Application()
    app[SERVICES_KEY] = services
    app.router.add_get("/health/live", _live)
    app.router.add_get("/health/ready", _ready)
    if services.metrics is not None:
        app.router.add_get("/metrics", _metrics)
    if importlib.util.find_spec(CONSOLE_MODULE) is not None:
        importlib.import_module(CONSOLE_MODULE).register(app, services)
    return app
