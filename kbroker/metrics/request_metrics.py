"""Kafka's RequestMetrics for every answered request: ``RequestsPerSec`` by request and version,
``TotalTimeMs`` by request (Fetch also as FetchConsumer or FetchFollower, as Kafka splits both),
``ErrorsPerSec`` by request and error code, NONE included, as Kafka counts its answers'
``errorCounts()``: Produce, Fetch and Metadata answers, encoded by hand, carry the tally their encoder
made of every partition's code (and Fetch's top-level one); other answers count every
``error_code`` in them, top-level and per topic, partition, group or member alike
(``answer_error_counts``); and, from Fetch answers, BrokerTopicMetrics' bytes out and fetch
request counts per topic.

The Dispatcher calls ``RequestMetrics.completed`` once per request when metrics are on (an HTTP
listener is configured). The per-(API, version) prometheus children are cached, so a request
costs two dictionary lookups, a counter increment and one or two histogram observations; a
Fetch answer adds one step per partition slice it carries, and an answer one cached counter
increment per distinct error code in it. Other answers are walked once for their codes (a few
microseconds per partition of a Metadata answer; none of them is on the produce/fetch path).
"""

from __future__ import annotations

import dataclasses
import os
import time
from types import ModuleType
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, Counter, Histogram

from kbroker.metrics.topic_metrics import BROKER_TOPIC_METRICS, BrokerTopicMetrics
from kbroker.network.context import EncodedResponse
from kbroker.protocol.errors import ErrorCode
from kbroker.storage.log import FetchSlice

if TYPE_CHECKING:
    from kbroker.network.context import RequestContext

FETCH_KEY = 1
# Request latency buckets in milliseconds (Kafka's TotalTimeMs is in ms); up to the long polls'
# and rebalances' waits.
TOTAL_TIME_BUCKETS_MS = (0.5, 1, 2.5, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000, 60000)


def request_name(handler: ModuleType) -> str:
    """Kafka's ApiKeys name of a handler module: ``list_offsets`` -> ``ListOffsets``."""
    return "".join(part.capitalize() for part in handler.__name__.rsplit(".", 1)[-1].split("_"))


class RequestMetrics:
    def __init__(self, registry: CollectorRegistry, topics: BrokerTopicMetrics = BROKER_TOPIC_METRICS) -> None:
        self.topics = topics
        self.requests = Counter("kafka_network_requestmetrics_requests", "Requests answered (Kafka's "
                                "RequestMetrics RequestsPerSec count)", ["request", "version"], registry=registry)
        self.total_time = Histogram("kafka_network_requestmetrics_totaltimems", "Time from a request's "
                                    "dispatch to its answer, ms (Kafka's RequestMetrics TotalTimeMs)",
                                    ["request"], buckets=TOTAL_TIME_BUCKETS_MS, registry=registry)
        self.errors = Counter("kafka_network_requestmetrics_errors", "Error codes in answers by request, "
                              "per partition too (Kafka's RequestMetrics ErrorsPerSec count)", ["request", "error"],
                              registry=registry)
        self._children: dict[tuple[int, int, bool], tuple[str, tuple[Counter, ...], tuple[Histogram, ...]]] = {}
        self._topic_of_dir: dict[str, str] = {}
        self._error_children: dict[tuple[str, int], Counter] = {}

    def completed(self, handler: ModuleType, api_key: int, api_version: int, request: object, response: object,
                  started: float, context: RequestContext[object]) -> None:
        """Count one answered request that was dispatched at ``started`` (time.perf_counter())."""
        elapsed_ms = (time.perf_counter() - started) * 1000
        follower = api_key == FETCH_KEY and _replica_id(request) >= 0
        children = self._children.get((api_key, api_version, follower))
        if children is None:
            children = self._children[(api_key, api_version, follower)] = self._new_children(
                handler, api_key, api_version, follower)
        name, counters, timers = children
        for counter in counters:
            counter.inc()
        for timer in timers:
            timer.observe(elapsed_ms)
        if isinstance(response, EncodedResponse):
            if response.error_counts:
                for code, count in response.error_counts.items():
                    self._error_counter(name, code).inc(count)
        elif hasattr(type(response), "__dataclass_fields__"):
            counts: dict[int, int] = {}
            answer_error_counts(response, counts)
            for code, count in counts.items():
                self._error_counter(name, code).inc(count)
        if api_key == FETCH_KEY:
            self._fetched(request, response, follower, context)

    def _error_counter(self, name: str, code: int) -> Counter:
        counter = self._error_children.get((name, code))
        if counter is None:
            counter = self._error_children[(name, code)] = self.errors.labels(name, _error_name(code))
        return counter

    def _new_children(self, handler: ModuleType, api_key: int, api_version: int,
                      follower: bool) -> tuple[str, tuple[Counter, ...], tuple[Histogram, ...]]:
        name = request_name(handler)
        names = [name]
        if api_key == FETCH_KEY:  # Kafka counts and times fetches twice: as Fetch and as who fetched
            names.append("FetchFollower" if follower else "FetchConsumer")
        return (name, tuple(self.requests.labels(n, str(api_version)) for n in names),
                tuple(self.total_time.labels(n) for n in names))

    def _fetched(self, request: object, response: object, follower: bool, context: RequestContext[object]) -> None:
        """Kafka's per-topic fetch request count (one per partition asked for) and bytes out
        (ReplicationBytesOut for followers), from the slices the answer sends."""
        by_id = getattr(getattr(context.services, "catalogue", None), "topics_by_id", {})
        requests = self.topics.total_fetch_requests
        for topic in getattr(request, "topics", ()):
            name = topic.topic if getattr(topic, "topic", None) else getattr(by_id.get(topic.topic_id), "name", None)
            if name:
                requests[name] += len(topic.partitions)
        if not isinstance(response, EncodedResponse):
            return
        out = self.topics.replication_bytes_out if follower else self.topics.bytes_out
        for chunk in response.chunks:
            if isinstance(chunk, FetchSlice):
                directory = chunk.segment.directory
                topic = self._topic_of_dir.get(directory)
                if topic is None:  # <log dir>/<topic>-<partition>
                    topic = self._topic_of_dir[directory] = os.path.basename(directory).rpartition("-")[0]
                out[topic] += chunk.length


# Per kio entity type: its error code fields, and the others (which may hold nested entities).
_ERROR_FIELDS: dict[type, tuple[tuple[str, ...], tuple[str, ...]]] = {}


def answer_error_counts(entity: object, counts: dict[int, int]) -> None:
    """Add to ``counts`` every ``error_code`` (and ``*_error_code``) field of a kio answer, at any
    depth, as Kafka's responses count them in ``errorCounts()``."""
    fields = _ERROR_FIELDS.get(type(entity))
    if fields is None:
        names = [f.name for f in dataclasses.fields(entity)]  # type: ignore[arg-type]
        fields = _ERROR_FIELDS[type(entity)] = (tuple(n for n in names if n.endswith("error_code")),
                                                tuple(n for n in names if not n.endswith("error_code")))
    codes, others = fields
    for name in codes:
        code = getattr(entity, name)
        if code is not None:
            counts[code] = counts.get(code, 0) + 1
    for name in others:
        value = getattr(entity, name)
        if type(value) is tuple:
            for item in value:
                if not hasattr(type(item), "__dataclass_fields__"):
                    break  # a list of numbers or strings
                answer_error_counts(item, counts)
        elif hasattr(type(value), "__dataclass_fields__"):
            answer_error_counts(value, counts)


def _replica_id(request: object) -> int:
    """Who sent a Fetch: a broker's id (a follower), or -1 (a consumer); v15+ in replica_state."""
    state = getattr(request, "replica_state", None)
    if state is not None:
        return int(state.replica_id)
    return int(getattr(request, "replica_id", -1))


_ERROR_NAMES: dict[int, str] = {}


def _error_name(code: int) -> str:
    """Kafka's Errors enum name (NONE, NOT_LEADER_OR_FOLLOWER, ...)."""
    name = _ERROR_NAMES.get(code)
    if name is None:
        try:
            name = ErrorCode(code).name.upper()
        except ValueError:
            name = f"UNKNOWN_{code}"
        _ERROR_NAMES[code] = name
    return name
