"""ClientQuotas: a broker's client quotas applied to its requests, with Kafka's throttling.

The Dispatcher hands a request here instead of calling its handler directly once any client
quota is configured (``configured()``: one look at the image's quota map, the whole cost of a
broker without quotas). Then, as Kafka's KafkaApis does:

- Produce records the request's size against ``producer_byte_rate`` and, unless acks=0, its
  handler time against ``request_percentage``; the response goes out at once carrying the larger
  throttle time (acks=0: no response, the client is only muted).
- Fetch from a consumer (followers are exempt) asks for at most what the consumer quota allows in
  a window (``consumer_byte_rate`` x (``quota.window.num`` - 1) x window), records the response's
  size and handler time; when either is over quota the data is not sent: the answer is an empty
  response with the throttle time (and the size is taken back from the byte-rate sensor), as
  Kafka's throttled fetch response.
- Every other API records its handler time against ``request_percentage``.
- CreateTopics, CreatePartitions and DeleteTopics take their partitions from
  ``controller_mutation_rate`` (``mutation_quota``; the handlers refuse a topic with
  THROTTLING_QUOTA_EXCEEDED in the strict versions) and put its throttle time in their response.
  Deviation: Kafka counts these on the active controller (a cluster-wide bucket per sensor);
  kbroker counts them on the broker that takes the request (the same on a single node).

The throttle time is written into the response's ``throttle_time_ms`` and returned with it
(``ThrottledResponse``): the connection sends the response, then reads nothing from the client
for that long (KIP-219's muted channel).

request_percentage in kbroker: Kafka measures the time a request spends on its request handler
(and network) threads, 100 being one thread busy all the time. kbroker's analogue is the time the
request's handler spends running on the event loop — its synchronous steps between awaits,
measured around each step, so a long-polling fetch waiting for data costs nothing — and 100 is
the event loop busy all the time with this client's requests.
"""

from __future__ import annotations

import dataclasses
import datetime
import struct
import time
from collections.abc import Awaitable, Callable, Generator
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from kbroker.network.context import NO_RESPONSE, EncodedResponse, RequestContext, ThrottledResponse
from kbroker.protocol.codec import build, has_field, response_module
from kbroker.protocol.errors import ErrorCode, KafkaError
from kbroker.quotas.client_quota_manager import ClientQuotaManager, ControllerMutationQuotaManager
from kbroker.quotas.quota_precedence import QuotaConfigs
from kbroker.quotas.sampled_rate import TokenBucket
from kbroker.storage.clock import Clock
from kbroker.storage.log import FetchSlice

PRODUCE, FETCH, METADATA = 0, 1, 3
# Broker-to-broker APIs Kafka exempts from request quotas (cluster actions).
_EXEMPT = frozenset({27, 24})  # WriteTxnMarkers, AddPartitionsToTxn (v4+ is broker to broker)
_INT32 = struct.Struct(">i")
_PRODUCE_FIRST_FLEXIBLE = 9
_FETCH_FIRST_FLEXIBLE = 12
_METADATA_FIRST_FLEXIBLE = 9
_PERCENT_PER_SECOND = 100.0


@dataclass(frozen=True, slots=True)
class QuotaWindows:
    """Kafka's quota.window.num / quota.window.size.seconds and the controller.* pair."""

    samples: int = 11
    window_seconds: int = 1
    controller_samples: int = 11
    controller_window_seconds: int = 1


class ClientQuotas:
    def __init__(self, configs: Callable[[], QuotaConfigs], windows: QuotaWindows, clock: Clock) -> None:
        self.configs = configs
        self.clock = clock
        window_ms = windows.window_seconds * 1000
        self.produce = ClientQuotaManager("producer_byte_rate", windows.samples, window_ms)
        self.fetch = ClientQuotaManager("consumer_byte_rate", windows.samples, window_ms)
        self.request = ClientQuotaManager("request_percentage", windows.samples, window_ms, max_throttle_ms=window_ms)
        self.controller_mutation = ControllerMutationQuotaManager(
            windows.controller_samples, windows.controller_window_seconds * 1000)

    def mutation_quota(self, context: RequestContext[Any], strict_since_version: int) -> MutationQuota:
        """This request's controller_mutation_rate quota: strict from ``strict_since_version``."""
        found = self.controller_mutation.quota(self.configs(), context.principal.name, context.header.client_id or "")
        return MutationQuota(found, context.api_version >= strict_since_version, self.now_ms)

    def configured(self) -> bool:
        return bool(self.configs())

    def now_ms(self) -> int:
        return int(self.clock.monotonic() * 1000)

    async def handle(self, handler: ModuleType, context: RequestContext[Any], request: Any,
                     request_bytes: int) -> object:
        """The handler's response, as a ThrottledResponse when the client is over a quota."""
        configs = self.configs()
        user = context.principal.name
        client_id = context.header.client_id or ""
        api_key = handler.API_KEY
        follower = api_key == FETCH and _replica_id(request) >= 0
        if api_key == FETCH and not follower:
            window_bytes = self.fetch.max_value_in_window(configs, user, client_id)
            if window_bytes is not None and window_bytes < request.max_bytes:
                request = dataclasses.replace(request, max_bytes=int(window_bytes))
        timed = _TimedSteps(handler.handle(context, request))
        response = await timed
        if follower or api_key in _EXEMPT:
            return response
        now = self.now_ms()
        if response is NO_RESPONSE:  # acks=0: its bytes count (not its handler time, as Kafka); muted, no answer
            throttle = self.produce.record(configs, user, client_id, request_bytes, now)
            return ThrottledResponse(response, throttle) if throttle else response
        request_throttle = self.request.record(configs, user, client_id, timed.busy * _PERCENT_PER_SECOND, now)
        byte_throttle = 0
        if api_key == PRODUCE:
            byte_throttle = self.produce.record(configs, user, client_id, request_bytes, now)
        elif api_key == FETCH and isinstance(response, EncodedResponse):
            size = _encoded_size(response)
            byte_throttle = self.fetch.record(configs, user, client_id, size, now)
            if byte_throttle or request_throttle:
                self.fetch.unrecord(configs, user, client_id, size, now)
                throttle = max(byte_throttle, request_throttle)
                return ThrottledResponse(_empty_fetch(context.api_version, throttle), throttle)
        # A throttle the handler set (controller_mutation_rate) mutes the client too.
        handler_throttle = getattr(response, "throttle_time", None)
        handler_ms = int(handler_throttle.total_seconds() * 1000) if handler_throttle is not None else 0
        throttle = max(byte_throttle, request_throttle, handler_ms)
        if not throttle:
            return response
        return ThrottledResponse(with_throttle_time(api_key, context.api_version, response, throttle), throttle)


class MutationQuota:
    """One request's controller_mutation_rate (Kafka's Strict and Permissive
    ControllerMutationQuota): ``check`` before a topic's change, ``record`` its partitions after."""

    __slots__ = ("_at_ms", "_now_ms", "_quota", "_throttle_ms", "strict")

    def __init__(self, quota: tuple[float, float, TokenBucket] | None, strict: bool, now_ms: Callable[[], int]) -> None:
        self._quota = quota
        self.strict = strict
        self._now_ms = now_ms
        self._throttle_ms = 0
        self._at_ms = 0

    def check(self) -> None:
        """Strict: THROTTLING_QUOTA_EXCEEDED while the bucket is empty (a topic asked for while
        tokens are left goes through, even if it empties the bucket)."""
        if self._quota is None or not self.strict:
            return
        rate, burst, bucket = self._quota
        now = self._now_ms()
        throttle = bucket.throttle_ms(rate, burst, now)
        if throttle > 0:
            self._throttle_ms, self._at_ms = throttle, now
            # No message: Kafka's ApiError drops one equal to the code's default text.
            raise KafkaError(ErrorCode.throttling_quota_exceeded)

    def record(self, partitions: int) -> None:
        if self._quota is None:
            return
        rate, burst, bucket = self._quota
        now = self._now_ms()
        bucket.take(partitions, rate, burst, now)
        if not self.strict:  # permissive: the response tells the client how long to wait instead
            throttle = bucket.throttle_ms(rate, burst, now)
            if throttle > 0:
                self._throttle_ms, self._at_ms = throttle, now

    def throttle_time(self) -> datetime.timedelta:
        """The response's throttle_time_ms: what is left of the last throttle seen."""
        remaining = max(0, self._throttle_ms - (self._now_ms() - self._at_ms)) if self._throttle_ms else 0
        return datetime.timedelta(milliseconds=remaining)


def with_throttle_time(api_key: int, api_version: int, response: object, throttle_ms: int) -> object:
    """``response`` with its throttle_time_ms set (a response without the field is unchanged)."""
    if isinstance(response, EncodedResponse):
        first = response.chunks[0]
        assert isinstance(first, bytes | bytearray)
        patched = bytearray(first)
        if api_key == PRODUCE:  # the last field, before the flexible versions' tagged fields
            position = len(patched) - 4 - (1 if api_version >= _PRODUCE_FIRST_FLEXIBLE else 0)
        elif api_key == FETCH:  # the first field after the response header
            position = 8 + (1 if api_version >= _FETCH_FIRST_FLEXIBLE else 0)
        elif api_key == METADATA and api_version >= 3:  # likewise, from v3 on
            position = 8 + (1 if api_version >= _METADATA_FIRST_FLEXIBLE else 0)
        else:
            return response  # no other API packs its response by hand
        _INT32.pack_into(patched, position, throttle_ms)
        return EncodedResponse([bytes(patched), *response.chunks[1:]], response.error_counts)
    if dataclasses.is_dataclass(response) and has_field(type(response), "throttle_time"):
        return dataclasses.replace(response, throttle_time=datetime.timedelta(milliseconds=throttle_ms))
    return response


def _empty_fetch(api_version: int, throttle_ms: int) -> object:
    """Kafka's throttled fetch response: no error, no session, no partitions."""
    m = response_module(FETCH, api_version)
    return build(m.FetchResponse, throttle_time=datetime.timedelta(milliseconds=throttle_ms),
                 error_code=ErrorCode.none, session_id=0, responses=(), node_endpoints=())


def _replica_id(request: Any) -> int:
    state = getattr(request, "replica_state", None)
    return int(state.replica_id if state is not None else getattr(request, "replica_id", -1))


def _encoded_size(response: EncodedResponse) -> int:
    return sum(chunk.length if isinstance(chunk, FetchSlice) else len(chunk) for chunk in response.chunks)


class _TimedSteps:
    """Awaits a handler's coroutine, adding up the time each of its steps runs on the event loop
    (between the points where it waits): ``busy``, in seconds."""

    __slots__ = ("_coro", "busy")

    def __init__(self, coro: Awaitable[object]) -> None:
        self._coro = coro
        self.busy = 0.0

    def __await__(self) -> Generator[Any, Any, object]:
        steps = self._coro.__await__()
        sent: Any = None
        thrown: BaseException | None = None
        while True:
            started = time.perf_counter()
            try:
                waiting_on = steps.throw(thrown) if thrown is not None else steps.send(sent)
            except StopIteration as done:
                self.busy += time.perf_counter() - started
                return done.value
            except BaseException:
                self.busy += time.perf_counter() - started
                raise
            self.busy += time.perf_counter() - started
            sent, thrown = None, None
            try:
                sent = yield waiting_on
            except BaseException as exc:  # cancellation and the like go on into the handler
                thrown = exc
