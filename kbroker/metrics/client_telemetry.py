"""KIP-714 client telemetry, built in: the broker side of GetTelemetrySubscriptions and
PushTelemetry, and the pushed metrics re-exported on /metrics.

Subscriptions are the CLIENT_METRICS config resources (``kafka-client-metrics.sh --alter
--name s --metrics ... --interval ... --match ...``, stored in the metadata log). As Kafka's
ClientMetricsManager: a client matching no subscription gets an empty metric list (it pushes
nothing); a client matching several gets the union of their metric prefixes (``*`` alone if any
has it) and the smallest interval; the subscription id is CRC32C of that set and interval
XORed with the instance id's hash, so it changes when the subscriptions do and a push with an
older one is UNKNOWN_SUBSCRIPTION_ID. A GetTelemetrySubscriptions sooner than the push interval
after the last request, or a push sooner than the interval after the last push (unless a
GetTelemetrySubscriptions came between, or the client is terminating), is
THROTTLING_QUOTA_EXCEEDED; after a terminating push the instance takes no more pushes
(INVALID_REQUEST). The broker accepts zstd, lz4, gzip and snappy and asks for delta
temporality, as Kafka does.

Pushed samples are kept per client instance, labelled ``client_id``, ``client_instance_id``,
``client_software_name``, ``client_software_version`` (the last two from the connection's
ApiVersions v3); a delta counter is added to its total. An instance not heard from for
max(60 s, three push intervals) is forgotten.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field

import crc32c
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from kbroker.config.client_metrics_config import INTERVAL_MS, MATCH, METRICS, parse_match, split_list
from kbroker.metrics.otlp_metrics import COUNTER, InvalidPayload, Sample, decode
from kbroker.network.connected_clients import ConnectedClients
from kbroker.protocol.errors import ErrorCode, KafkaError

DEFAULT_INTERVAL_MS = 300_000  # Kafka's ClientMetricsConfigs.DEFAULT_INTERVAL_MS
ALL_METRICS = "*"
# Kafka's accepted compression types, in its order: ZSTD, LZ4, GZIP, SNAPPY.
ACCEPTED_COMPRESSION_TYPES = (4, 3, 1, 2)
KNOWN_COMPRESSION_TYPES = frozenset({0, 1, 2, 3, 4})
EXPIRY_MS = 60_000
MAX_INSTANCES = 16_384  # Kafka's cache size
CLIENT_LABELS = ("client_id", "client_instance_id", "client_software_name", "client_software_version")


@dataclass(frozen=True, slots=True)
class ClientIdentity:
    """What a subscription's ``match`` selectors test (Kafka's ClientMetricsInstanceMetadata)."""

    client_id: str
    software_name: str
    software_version: str
    source_address: str
    source_port: str

    def selectors(self, instance_id: uuid.UUID) -> dict[str, str]:
        return {"client_instance_id": str(instance_id), "client_id": self.client_id,
                "client_software_name": self.software_name, "client_software_version": self.software_version,
                "client_source_address": self.source_address, "client_source_port": self.source_port}


@dataclass(slots=True)
class ClientInstance:
    instance_id: uuid.UUID
    identity: ClientIdentity
    subscription_id: int
    metrics: tuple[str, ...]
    interval_ms: int
    last_get_ms: int = -1
    last_push_ms: int = -1
    terminating: bool = False
    # (name, attributes) -> (kind, value)
    values: dict[tuple[str, tuple[tuple[str, str], ...]], tuple[str, float]] = field(default_factory=dict)

    def seen_ms(self) -> int:
        return max(self.last_get_ms, self.last_push_ms)


@dataclass(frozen=True, slots=True)
class Subscription:
    metrics: tuple[str, ...]
    interval_ms: int
    match: Mapping[str, re.Pattern[str]]

    def matches(self, selectors: Mapping[str, str]) -> bool:
        return all(pattern.fullmatch(selectors.get(key, "")) for key, pattern in self.match.items())


def subscription_id(metrics: Iterable[str], interval_ms: int, instance_id: uuid.UUID) -> int:
    """A stable signed 32-bit id of a subscription set for one instance."""
    digest = crc32c.crc32c(("[" + ", ".join(sorted(metrics)) + "]" + str(interval_ms)).encode())
    mixed = (digest ^ hash(instance_id)) & 0xFFFFFFFF
    return mixed - (1 << 32) if mixed >= 1 << 31 else mixed


def parse_subscription(configs: Mapping[str, str]) -> Subscription:
    return Subscription(tuple(split_list(configs.get(METRICS, ""))),
                        int(configs.get(INTERVAL_MS, str(DEFAULT_INTERVAL_MS)).strip()),
                        parse_match(split_list(configs.get(MATCH, ""))))


class ClientTelemetry:
    def __init__(self, max_bytes: int = 1_048_576) -> None:
        self.max_bytes = max_bytes  # telemetry.max.bytes
        self.instances: dict[uuid.UUID, ClientInstance] = {}
        # Who is connected (the broker's Dispatcher's registry): a connection's ApiVersions software.
        self.connected: ConnectedClients | None = None

    def software(self, peer: str) -> tuple[str, str]:
        """(client software name, version) the connection ``peer`` sent in ApiVersions v3+."""
        client = self.connected.client(peer) if self.connected is not None else None
        return ("", "") if client is None else (client.software_name, client.software_version)

    def _evaluate(self, instance_id: uuid.UUID, identity: ClientIdentity,
                  subscriptions: Iterable[Subscription]) -> tuple[int, tuple[str, ...], int]:
        """(subscription id, metric prefixes, push interval) of the subscriptions matching the client."""
        selectors = identity.selectors(instance_id)
        metrics: set[str] = set()
        interval = DEFAULT_INTERVAL_MS
        for subscription in subscriptions:
            if subscription.matches(selectors):
                metrics.update(subscription.metrics)
                interval = min(interval, subscription.interval_ms)
        if ALL_METRICS in metrics:
            metrics = {ALL_METRICS}
        return subscription_id(metrics, interval, instance_id), tuple(sorted(metrics)), interval

    def _instance(self, instance_id: uuid.UUID, identity: ClientIdentity,
                  subscriptions: Iterable[Subscription], now_ms: int) -> ClientInstance:
        """The client instance, re-evaluated against the current subscriptions (a changed set
        is a new instance state, so its next request is not throttled)."""
        self._expire(now_ms)
        sub_id, metrics, interval = self._evaluate(instance_id, identity, subscriptions)
        instance = self.instances.get(instance_id)
        if instance is None or instance.subscription_id != sub_id:
            values = instance.values if instance is not None else {}
            instance = ClientInstance(instance_id, identity, sub_id, metrics, interval, values=values)
            self.instances[instance_id] = instance
        instance.identity = identity
        return instance

    def _expire(self, now_ms: int) -> None:
        stale = [i for i, c in self.instances.items() if now_ms - c.seen_ms() > max(EXPIRY_MS, 3 * c.interval_ms)
                 and c.seen_ms() >= 0]
        for instance_id in stale:
            del self.instances[instance_id]
        while len(self.instances) >= MAX_INSTANCES:
            del self.instances[min(self.instances, key=lambda i: self.instances[i].seen_ms())]

    def get_subscriptions(self, instance_id: uuid.UUID | None, identity: ClientIdentity,
                          subscriptions: Iterable[Subscription], now_ms: int) -> ClientInstance:
        """GetTelemetrySubscriptions: the instance (a new id when the client sent none) with
        its subscription; KafkaError THROTTLING_QUOTA_EXCEEDED when asked again too soon."""
        if instance_id is None or instance_id.int == 0:
            instance_id = uuid.uuid4()
            while instance_id in self.instances:
                instance_id = uuid.uuid4()
        instance = self._instance(instance_id, identity, subscriptions, now_ms)
        last = instance.seen_ms()
        if last >= 0 and now_ms - last < instance.interval_ms:
            raise KafkaError(ErrorCode.throttling_quota_exceeded,
                             f"Request from the client [{instance_id}] arrived before the next push interval time")
        instance.last_get_ms = now_ms
        return instance

    def push(self, instance_id: uuid.UUID | None, identity: ClientIdentity, subscriptions: Iterable[Subscription],
             request_subscription_id: int, terminating: bool, compression_type: int, payload: bytes,
             now_ms: int) -> None:
        """PushTelemetry: KafkaError with Kafka's code for a refused push, else its samples kept."""
        if instance_id is None or instance_id.int in (0, 1):  # Kafka's reserved ids
            raise KafkaError(ErrorCode.invalid_request, f"Invalid request from the client [{instance_id}], "
                             "invalid client instance id")
        instance = self._instance(instance_id, identity, subscriptions, now_ms)
        try:
            if instance.terminating:
                raise KafkaError(ErrorCode.invalid_request, f"Client [{instance_id}] sent the previous request with "
                                 "state terminating to TRUE, can not accept any requests after that")
            may_push = instance.last_get_ms > instance.last_push_ms or (
                instance.last_push_ms < 0 or now_ms - instance.last_push_ms >= instance.interval_ms)
            if not may_push and not terminating:
                raise KafkaError(ErrorCode.throttling_quota_exceeded, f"Request from the client [{instance_id}] "
                                 "arrived before the next push interval time")
            instance.last_push_ms = now_ms
            if request_subscription_id != instance.subscription_id:
                raise KafkaError(ErrorCode.unknown_subscription_id,
                                 f"Unknown client subscription id for the client [{instance_id}]")
            if compression_type not in KNOWN_COMPRESSION_TYPES:
                raise KafkaError(ErrorCode.unsupported_compression_type, f"Unknown compression type "
                                 f"[{compression_type}] is received in telemetry request from [{instance_id}]")
            if len(payload) > self.max_bytes:
                raise KafkaError(ErrorCode.telemetry_too_large, f"Telemetry request from [{instance_id}] is larger "
                                 f"than the maximum allowed size [{self.max_bytes}]")
        finally:
            instance.terminating = instance.terminating or terminating
        if payload:
            try:
                samples = decode(compression_type, payload)
            except InvalidPayload as exc:
                raise KafkaError(ErrorCode.invalid_record, f"cannot decode the metrics: {exc}") from exc
            self._keep(instance, samples)

    @staticmethod
    def _keep(instance: ClientInstance, samples: Iterable[Sample]) -> None:
        values = instance.values
        for sample in samples:
            key = (sample.name, sample.attributes)
            if sample.delta:
                _kind, total = values.get(key, (COUNTER, 0.0))
                values[key] = (COUNTER, total + sample.value)
            else:
                values[key] = (sample.kind, sample.value)


class TelemetryCollector(Collector):
    """The pushed metrics at scrape time, one family per metric name across client instances."""

    def __init__(self, telemetry: ClientTelemetry) -> None:
        self.telemetry = telemetry

    def collect(self) -> Iterator[Metric]:
        families: dict[str, Metric] = {}
        for instance in list(self.telemetry.instances.values()):
            identity = instance.identity
            client = (("client_id", identity.client_id), ("client_instance_id", str(instance.instance_id)),
                      ("client_software_name", identity.software_name),
                      ("client_software_version", identity.software_version))
            for (name, attributes), (kind, value) in instance.values.items():
                family = families.get(name)
                if family is None:
                    doc = "Pushed by clients (KIP-714)"
                    family = families[name] = (CounterMetricFamily(name, doc) if kind == COUNTER
                                               else GaugeMetricFamily(name, doc))
                labels = dict(attributes)
                labels.update(client)
                sample_name = family.name + "_total" if family.type == "counter" else family.name
                family.add_sample(sample_name, labels, value)
        yield from families.values()


# One node per process: the telemetry handlers and /metrics share this instance.
CLIENT_TELEMETRY = ClientTelemetry()
