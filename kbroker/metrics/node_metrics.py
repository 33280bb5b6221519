"""The node's metric registry: what /metrics renders (prometheus-client's exposition), built
once per process when an HTTP listener is configured, and the hook the Dispatcher calls."""

from __future__ import annotations

from prometheus_client import (
    CollectorRegistry,
    GCCollector,
    PlatformCollector,
    ProcessCollector,
    disable_created_metrics,
    generate_latest,
)

from kbroker.metrics.client_telemetry import CLIENT_TELEMETRY, TelemetryCollector
from kbroker.metrics.event_loop_lag import EventLoopLag
from kbroker.metrics.node_collector import NodeCollector, NodeRoles
from kbroker.metrics.request_metrics import RequestMetrics


class NodeMetrics:
    def __init__(self, services: NodeRoles) -> None:
        # No ``_created`` series: Kafka's JMX metrics have none, and they double the families.
        disable_created_metrics()
        self.registry = CollectorRegistry()
        # process_cpu_seconds_total, process_resident_memory_bytes, python_gc_*: as any exporter has
        ProcessCollector(registry=self.registry)
        PlatformCollector(registry=self.registry)
        GCCollector(registry=self.registry)
        self.requests = RequestMetrics(self.registry)
        self.node = NodeCollector(services)
        self.registry.register(self.node)
        self.registry.register(TelemetryCollector(CLIENT_TELEMETRY))
        self.event_loop_lag = EventLoopLag(self.registry)

    async def before_scrape(self) -> None:
        """Fetch what a scrape needs from other brokers (a bounded wait, off the collectors,
        which prometheus-client calls synchronously)."""
        await self.node.refresh_end_offsets()

    def render(self) -> bytes:
        """The Prometheus text exposition of every family."""
        return generate_latest(self.registry)
