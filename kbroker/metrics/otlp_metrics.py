"""Decoding of a KIP-714 PushTelemetry payload: OpenTelemetry ``MetricsData`` (protobuf),
compressed with the codec the client names, into flat samples.

A sample is (metric name, kind, attributes, value, delta): gauges and sums give one each; a
histogram gives its count and sum. OTLP names (``org.apache.kafka.producer.record.send.total``)
become Prometheus names the way OpenTelemetry's Prometheus exporters make them: every character
outside ``[a-zA-Z0-9_]`` becomes ``_``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from google.protobuf.message import DecodeError
from opentelemetry.proto.metrics.v1.metrics_pb2 import AggregationTemporality, MetricsData, NumberDataPoint

from kbroker.protocol.compression import decompress
from kbroker.protocol.errors import KafkaError

_INVALID = re.compile(r"[^a-zA-Z0-9_]")
GAUGE, COUNTER = "gauge", "counter"


class InvalidPayload(ValueError):
    """The payload does not decompress or does not parse as OTLP MetricsData."""


@dataclass(frozen=True, slots=True)
class Sample:
    name: str
    kind: str  # GAUGE or COUNTER
    attributes: tuple[tuple[str, str], ...]
    value: float
    delta: bool  # a counter's increment since the last push (delta temporality), else its total


def prometheus_name(name: str) -> str:
    """An OTLP metric or attribute name as a Prometheus name."""
    cleaned = _INVALID.sub("_", name)
    return "_" + cleaned if cleaned[:1].isdigit() else cleaned


def _value(point: NumberDataPoint) -> float:
    return float(point.as_double) if point.HasField("as_double") else float(point.as_int)


def _attributes(point: object) -> tuple[tuple[str, str], ...]:
    out = []
    for attribute in getattr(point, "attributes", ()):
        value = attribute.value
        kind = value.WhichOneof("value")
        out.append((prometheus_name(attribute.key), "" if kind is None else str(getattr(value, kind))))
    return tuple(sorted(out))


def decode(compression_type: int, payload: bytes) -> list[Sample]:
    """The samples of a push (InvalidPayload if it is not OTLP metrics)."""
    try:
        data = MetricsData.FromString(decompress(compression_type, payload))
    except (DecodeError, ValueError, KafkaError) as exc:  # KafkaError: it does not decompress
        raise InvalidPayload(str(exc)) from exc
    samples = []
    for resource in data.resource_metrics:
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                name = prometheus_name(metric.name)
                kind = metric.WhichOneof("data")
                if kind == "gauge":
                    samples += [Sample(name, GAUGE, _attributes(p), _value(p), False) for p in metric.gauge.data_points]
                elif kind == "sum":
                    delta = metric.sum.aggregation_temporality == AggregationTemporality.AGGREGATION_TEMPORALITY_DELTA
                    samples += [Sample(name, COUNTER if metric.sum.is_monotonic else GAUGE, _attributes(p), _value(p),
                                       delta and metric.sum.is_monotonic) for p in metric.sum.data_points]
                elif kind == "histogram":
                    delta = (metric.histogram.aggregation_temporality
                             == AggregationTemporality.AGGREGATION_TEMPORALITY_DELTA)
                    for p in metric.histogram.data_points:
                        samples.append(Sample(name + "_count", COUNTER, _attributes(p), float(p.count), delta))
                        samples.append(Sample(name + "_sum", COUNTER, _attributes(p), float(p.sum), delta))
    return samples
