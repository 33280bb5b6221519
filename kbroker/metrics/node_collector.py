"""The metrics read from the node's state when Prometheus scrapes: Kafka's ReplicaManager,
Log, KafkaController, ControllerStats, GroupMetadataManager and socket-server gauges, the
BrokerTopicMetrics counters, and kafka_exporter's consumer-group offsets and lag.

Names are what the Prometheus JMX exporter's Kafka example config (lowercaseOutputName) makes of
Kafka's MBeans: ``kafka.server:type=ReplicaManager,name=UnderReplicatedPartitions`` becomes
``kafka_server_replicamanager_underreplicatedpartitions``; a ``...PerSec`` meter's count becomes
``..._total`` with its MBean keys (topic, request, ...) as labels.

ISR shrinks/expands (on the leader, as the controller accepts each) and leader elections (on
the active controller, as it commits each) are counted as they happen
(kbroker.metrics.partition_changes), so one that reverts before the next scrape counts too.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Protocol

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from kbroker.metrics.end_offsets import end_offsets, local_end_offset
from kbroker.metrics.topic_metrics import BROKER_TOPIC_METRICS, BrokerTopicMetrics

if TYPE_CHECKING:
    from kbroker.metrics.partition_changes import IsrChanges
    from kbroker.node.broker import Broker
    from kbroker.node.controller_node import ControllerNode


class NodeRoles(Protocol):
    """The node's roles as they are built (kbroker.http.app.NodeServices): either may be absent."""

    @property
    def broker(self) -> Broker | None: ...

    @property
    def controller(self) -> ControllerNode | None: ...


def _counter(name: str, doc: str, values: dict[str, int]) -> CounterMetricFamily:
    """A BrokerTopicMetrics meter: one sample per topic and the all-topics one without a label,
    as Kafka registers both MBeans."""
    family = CounterMetricFamily(name, doc, labels=["topic"])
    for topic, value in sorted(values.items()):
        family.add_metric([topic], value)
    family.add_sample(name + "_total", {}, sum(values.values()))
    return family


class NodeCollector(Collector):
    def __init__(self, services: NodeRoles, topics: BrokerTopicMetrics = BROKER_TOPIC_METRICS) -> None:
        self.services = services
        self.topics = topics
        # The end offsets of committed partitions this broker holds no replica of, asked of their
        # leaders just before each scrape (refresh_end_offsets), for kafka_consumergroup_lag.
        self.remote_end_offsets: dict[tuple[str, int], int] = {}

    async def refresh_end_offsets(self) -> None:
        """Ask the leaders of committed partitions this broker holds no replica of for their end
        offsets (a bounded wait: kbroker.metrics.end_offsets)."""
        broker = self.services.broker
        if broker is None or broker.lifecycle is None:
            return
        remote = {key for offsets in broker.offset_store.committed.values() for key in offsets
                  if local_end_offset(broker, key) is None}
        self.remote_end_offsets = await end_offsets(broker, remote) if remote else {}

    def collect(self) -> Iterator[Metric]:
        yield from self._topic_metrics()
        broker, controller = self.services.broker, self.services.controller
        if broker is not None and broker.lifecycle is not None:
            yield from self._replica_manager(broker, broker.lifecycle.isr_changes)
            yield from self._logs(broker)
            yield from self._groups(broker)
        if controller is not None:
            yield from self._controller(controller)
        yield self._connections(broker, controller)

    def _topic_metrics(self) -> Iterator[Metric]:
        t = self.topics
        prefix = "kafka_server_brokertopicmetrics_"
        yield _counter(prefix + "messagesin", "Records appended (MessagesInPerSec count)", t.messages_in)
        yield _counter(prefix + "bytesin", "Bytes appended by producers (BytesInPerSec count)", t.bytes_in)
        yield _counter(prefix + "bytesout", "Record bytes sent to consumers (BytesOutPerSec count)", t.bytes_out)
        yield _counter(prefix + "replicationbytesout", "Record bytes sent to followers "
                       "(ReplicationBytesOutPerSec count)", t.replication_bytes_out)
        yield _counter(prefix + "totalproducerequests", "Produce partitions asked to append "
                       "(TotalProduceRequestsPerSec count)", t.total_produce_requests)
        yield _counter(prefix + "failedproducerequests", "Produce partitions that failed "
                       "(FailedProduceRequestsPerSec count)", t.failed_produce_requests)
        yield _counter(prefix + "totalfetchrequests", "Fetch partitions asked for (TotalFetchRequestsPerSec count)",
                       t.total_fetch_requests)

    def _replica_manager(self, broker: Broker, isr_changes: IsrChanges) -> Iterator[Metric]:
        partitions = list(broker.replica_manager.partitions.values())
        led = [p for p in partitions if p.is_leader]
        under_replicated = sum(1 for p in led if len(p.isr) < len(p.replicas))
        under_min_isr = sum(1 for p in led if len(p.isr) < p.effective_min_isr())
        at_min_isr = sum(1 for p in led if len(p.isr) == p.effective_min_isr())
        prefix = "kafka_server_replicamanager_"
        for name, doc, value in (
            ("partitioncount", "Partitions hosted here", len(partitions)),
            ("leadercount", "Partitions led here", len(led)),
            ("underreplicatedpartitions", "Led partitions whose ISR is smaller than their replicas", under_replicated),
            ("underminisrpartitioncount", "Led partitions whose ISR is below min.insync.replicas", under_min_isr),
            ("atminisrpartitioncount", "Led partitions whose ISR is at min.insync.replicas", at_min_isr),
        ):
            yield GaugeMetricFamily(prefix + name, doc, value=value)
        yield CounterMetricFamily(prefix + "isrshrinks", "ISR shrinks of partitions led here (IsrShrinksPerSec "
                                  "count)", value=isr_changes.shrinks)
        yield CounterMetricFamily(prefix + "isrexpands", "ISR expansions of partitions led here (IsrExpandsPerSec "
                                  "count)", value=isr_changes.expands)

    def _logs(self, broker: Broker) -> Iterator[Metric]:
        labels = ["topic", "partition"]
        size = GaugeMetricFamily("kafka_log_log_size", "Bytes of the partition's log (Log Size)", labels=labels)
        segments = GaugeMetricFamily("kafka_log_log_numlogsegments", "Segments of the partition's log", labels=labels)
        end = GaugeMetricFamily("kafka_log_log_logendoffset", "The partition's log end offset", labels=labels)
        start = GaugeMetricFamily("kafka_log_log_logstartoffset", "The partition's log start offset", labels=labels)
        for (topic, index), partition in sorted(broker.replica_manager.partitions.items()):
            log = partition.log
            key = [topic, str(index)]
            size.add_metric(key, log.size_in_bytes)
            segments.add_metric(key, len(log.segments))
            end.add_metric(key, log.log_end_offset)
            start.add_metric(key, log.log_start_offset)
        yield from (size, segments, end, start)

    def _groups(self, broker: Broker) -> Iterator[Metric]:
        """Groups coordinated here, and kafka_exporter's offsets and lag of their committed
        partitions (lag: the partition's high watermark minus the committed offset; the high
        watermark of this broker's replica, else the one its leader gave before the scrape)."""
        yield GaugeMetricFamily("kafka_coordinator_group_groupmetadatamanager_numgroups",
                                "Groups coordinated here (GroupMetadataManager NumGroups)",
                                value=len(broker.group_coordinator.registry.ids()))
        labels = ["consumergroup", "topic", "partition"]
        current = GaugeMetricFamily("kafka_consumergroup_current_offset", "The group's committed offset "
                                    "(kafka_exporter)", labels=labels)
        lag = GaugeMetricFamily("kafka_consumergroup_lag", "High watermark minus the group's committed offset "
                                "(kafka_exporter)", labels=labels)
        for group, offsets in sorted(broker.offset_store.committed.items()):
            for (topic, index), committed in sorted(offsets.items()):
                key = [group, topic, str(index)]
                current.add_metric(key, committed.offset)
                end = local_end_offset(broker, (topic, index))
                if end is None:
                    end = self.remote_end_offsets.get((topic, index))
                if end is not None:
                    lag.add_metric(key, max(end - committed.offset, 0))
        yield current
        yield lag

    def _controller(self, controller: ControllerNode) -> Iterator[Metric]:
        quorum = controller.controller
        active = quorum.active
        image = quorum.image
        topics = image.topics.values() if active else ()
        registrations = [(t.name, i, r) for t in topics for i, r in t.partitions.items()]
        brokers = list(image.brokers.values()) if active else []
        prefix = "kafka_controller_kafkacontroller_"
        for name, doc, value in (
            ("activecontrollercount", "1 on the active controller", int(active)),
            ("offlinepartitionscount", "Partitions without a leader", sum(1 for *_k, r in registrations
                                                                          if r.leader < 0)),
            ("globaltopiccount", "Topics in the cluster", len(image.topics) if active else 0),
            ("globalpartitioncount", "Partitions in the cluster", len(registrations)),
            ("activebrokercount", "Unfenced brokers", sum(1 for b in brokers if not b.fenced)),
            ("fencedbrokercount", "Fenced brokers", sum(1 for b in brokers if b.fenced)),
            ("preferredreplicaimbalancecount", "Partitions not led by their first replica",
             sum(1 for *_k, r in registrations if r.replicas and r.leader != r.replicas[0])),
        ):
            yield GaugeMetricFamily(prefix + name, doc, value=value)
        stats = "kafka_controller_controllerstats_"
        # A Kafka timer: the exporter renders its count as ``_count`` (no sum, no buckets).
        elections = Metric(stats + "leaderelectionrateandtimems_count", "Leader changes the active controller made "
                           "(LeaderElectionRateAndTimeMs count)", "unknown")
        elections.add_sample(stats + "leaderelectionrateandtimems_count", {}, controller.elections.elections)
        yield elections
        yield CounterMetricFamily(stats + "uncleanleaderelections", "Leaders taken from outside the ISR "
                                  "(UncleanLeaderElectionsPerSec count)",
                                  value=controller.elections.unclean)

    def _connections(self, broker: Broker | None, controller: ControllerNode | None) -> Metric:
        """socket-server-metrics connection-count per listener (kbroker has one network loop:
        networkProcessor 0)."""
        servers = list(broker.socket_servers) if broker is not None else []
        if controller is not None and controller.socket_server is not None:
            servers.append(controller.socket_server)
        counts: dict[str, int] = {}
        for server in servers:
            for name, _host, _port in server.listeners:
                counts.setdefault(name, 0)
            for connection in server.connections:
                counts[connection.listener] = counts.get(connection.listener, 0) + 1
        family = GaugeMetricFamily("kafka_server_socket_server_metrics_connection_count",
                                   "Open connections per listener", labels=["listener", "networkProcessor"])
        for listener, count in sorted(counts.items()):
            family.add_metric([listener, "0"], count)
        return family
