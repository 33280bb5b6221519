"""/health/live answers while the node starts; /health/ready only once the broker serves
clients (registered, caught up, unfenced) and not while it is fenced; /metrics only when the
node exports metrics. Served by the real HttpServer on a loopback port."""

from __future__ import annotations

import asyncio
import json
import urllib.error
import urllib.request
from types import SimpleNamespace
from typing import Any

from kbroker.config.kafka_config import KafkaConfig
from kbroker.http.app import NodeServices
from kbroker.http.server import HttpServer


def fetch(url: str) -> tuple[int, dict[str, Any] | str]:
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            body = response.read().decode()
            status = response.status
    except urllib.error.HTTPError as exc:
        body, status = exc.read().decode(), exc.code
    return status, json.loads(body) if body.startswith("{") else body


def test_ready_follows_the_broker() -> None:
    async def scenario() -> None:
        config = KafkaConfig.load(None, ["process.roles=broker", "node.id=2", "controller.quorum.voters=1@127.0.0.1:1",
                                         "controller.listener.names=CONTROLLER",
                                         "kbroker.http.listeners=http://127.0.0.1:0"])
        services = NodeServices(config)
        server = HttpServer(services)
        await server.start()
        host, port = server.bound[0]
        base = f"http://{host}:{port}"
        get = lambda path: asyncio.to_thread(fetch, base + path)  # noqa: E731
        try:
            assert await get("/health/live") == (200, {"status": "live"})
            status, body = await get("/health/ready")
            assert status == 503 and "starting" in body["reason"]
            status, text = await get("/metrics")
            assert status == 200 and "kbroker_event_loop_lag_seconds_count" in text
            lifecycle = SimpleNamespace(fenced=True)
            services.broker = SimpleNamespace(ready=asyncio.Event(), lifecycle=lifecycle)  # type: ignore[assignment]
            services.broker.ready.set()
            status, body = await get("/health/ready")
            assert status == 503 and "fenced" in body["reason"]
            lifecycle.fenced = False
            assert (await get("/health/ready"))[0] == 200
        finally:
            await server.stop()

    asyncio.run(scenario())


def test_no_listener_no_server() -> None:
    async def scenario() -> None:
        server = HttpServer(NodeServices(KafkaConfig.load(None, [])))
        await server.start()
        assert server.bound == [] and server.services.metrics is None
        await server.stop()

    asyncio.run(scenario())
