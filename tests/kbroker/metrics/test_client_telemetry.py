"""KIP-714 on the broker side, as Kafka's ClientMetricsManager: subscriptions matched on the
client, the subscription id, throttling, refusals, and pushed OTLP metrics kept for /metrics."""

from __future__ import annotations

import uuid

import cramjam
import pytest
from kbroker.protocol.errors import ErrorCode, KafkaError
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.metrics.v1.metrics_pb2 import (
    AggregationTemporality,
    Gauge,
    Metric,
    MetricsData,
    NumberDataPoint,
    ResourceMetrics,
    ScopeMetrics,
    Sum,
)
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from kbroker.metrics.client_telemetry import ClientIdentity, ClientTelemetry, TelemetryCollector, parse_subscription

JAVA = ClientIdentity("app-1", "apache-kafka-java", "4.3.1", "127.0.0.1", "50000")
RDK = ClientIdentity("other", "confluent-kafka-python", "2.16.1", "127.0.0.1", "50001")
GZIP, ZSTD = 1, 4


def payload(sent: float, rate: float) -> bytes:
    node = KeyValue(key="node.id", value=AnyValue(string_value="1"))
    metrics = [
        Metric(name="org.apache.kafka.producer.record.send.total", sum=Sum(
            aggregation_temporality=AggregationTemporality.AGGREGATION_TEMPORALITY_DELTA, is_monotonic=True,
            data_points=[NumberDataPoint(as_double=sent, attributes=[node])])),
        Metric(name="org.apache.kafka.producer.record.send.rate",
               gauge=Gauge(data_points=[NumberDataPoint(as_double=rate)])),
    ]
    data = MetricsData(resource_metrics=[ResourceMetrics(scope_metrics=[ScopeMetrics(metrics=metrics)])])
    return data.SerializeToString()


def test_subscriptions_match_clients_and_union() -> None:
    telemetry = ClientTelemetry()
    subs = [parse_subscription({"metrics": "org.apache.kafka.producer.", "interval.ms": "1000",
                                "match": "client_software_name=apache-kafka-java"}),
            parse_subscription({"metrics": "org.apache.kafka.consumer.", "interval.ms": "500"})]
    java = telemetry.get_subscriptions(None, JAVA, subs, 0)
    assert java.metrics == ("org.apache.kafka.consumer.", "org.apache.kafka.producer.") and java.interval_ms == 500
    rdk = telemetry.get_subscriptions(None, RDK, subs, 0)
    assert rdk.metrics == ("org.apache.kafka.consumer.",)
    assert java.instance_id != rdk.instance_id and java.instance_id.int != 0
    nothing = telemetry.get_subscriptions(None, RDK, [], 0)
    assert nothing.metrics == () and nothing.interval_ms == 300_000


def test_push_rules_and_values_on_metrics() -> None:
    telemetry = ClientTelemetry(max_bytes=10_000)
    subs = [parse_subscription({"metrics": "*", "interval.ms": "100"})]
    instance = telemetry.get_subscriptions(None, JAVA, subs, 1_000)
    assert instance.metrics == ("*",)
    with pytest.raises(KafkaError) as again:  # asked again within the push interval
        telemetry.get_subscriptions(instance.instance_id, JAVA, subs, 1_050)
    assert again.value.code == ErrorCode.throttling_quota_exceeded
    sub_id = instance.subscription_id
    telemetry.push(instance.instance_id, JAVA, subs, sub_id, False, ZSTD,
                   bytes(cramjam.zstd.compress(payload(5, 2.5))), 1_100)
    with pytest.raises(KafkaError) as early:
        telemetry.push(instance.instance_id, JAVA, subs, sub_id, False, 0, payload(1, 1), 1_150)
    assert early.value.code == ErrorCode.throttling_quota_exceeded
    with pytest.raises(KafkaError) as stale:
        telemetry.push(instance.instance_id, JAVA, subs, sub_id + 1, False, 0, payload(1, 1), 1_300)
    assert stale.value.code == ErrorCode.unknown_subscription_id
    telemetry.push(instance.instance_id, JAVA, subs, sub_id, True, GZIP,
                   bytes(cramjam.gzip.compress(payload(3, 4.0))), 1_500)
    with pytest.raises(KafkaError) as after_end:
        telemetry.push(instance.instance_id, JAVA, subs, sub_id, False, 0, payload(1, 1), 2_000)
    assert after_end.value.code == ErrorCode.invalid_request
    with pytest.raises(KafkaError) as big:
        other = telemetry.get_subscriptions(None, RDK, subs, 1_000)
        telemetry.push(other.instance_id, RDK, subs, other.subscription_id, False, 0, b"x" * 10_001, 1_200)
    assert big.value.code == ErrorCode.telemetry_too_large
    with pytest.raises(KafkaError) as reserved:
        telemetry.push(uuid.UUID(int=0), RDK, subs, 0, False, 0, b"", 1_200)
    assert reserved.value.code == ErrorCode.invalid_request

    registry = CollectorRegistry()
    registry.register(TelemetryCollector(telemetry))
    samples = {s.name: s for f in text_string_to_metric_families(generate_latest(registry).decode())
               for s in f.samples}
    sent = samples["org_apache_kafka_producer_record_send_total"]
    assert sent.value == 8  # deltas 5 + 3 added up
    assert sent.labels == {"node_id": "1", "client_id": "app-1", "client_instance_id": str(instance.instance_id),
                           "client_software_name": "apache-kafka-java", "client_software_version": "4.3.1"}
    assert samples["org_apache_kafka_producer_record_send_rate"].value == 4.0


def test_an_undecodable_payload_is_invalid_record() -> None:
    telemetry = ClientTelemetry()
    subs = [parse_subscription({"metrics": "*", "interval.ms": "100"})]
    instance = telemetry.get_subscriptions(None, JAVA, subs, 0)
    with pytest.raises(KafkaError) as raised:
        telemetry.push(instance.instance_id, JAVA, subs, instance.subscription_id, False, GZIP, b"not gzip", 10)
    assert raised.value.code == ErrorCode.invalid_record
