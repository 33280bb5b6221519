"""ClientQuotaManager: one quota key's sensors and the throttle time they give, as Kafka's
ClientQuotaManager (producer_byte_rate, consumer_byte_rate), ClientRequestQuotaManager
(request_percentage) and ControllerMutationQuotaManager (controller_mutation_rate).

A sensor is kept per Kafka metric tags (kbroker/quotas/quota_precedence.py); the quota it is
checked against is looked up at each record, so an AlterClientQuotas applies from the next
request, as Kafka updates its sensors' bounds. A sensor not recorded to for an hour is dropped
(Kafka's inactive-sensor expiry).
"""

from __future__ import annotations

from kbroker.quotas.quota_precedence import QuotaConfigs, SensorKey, applicable_quota
from kbroker.quotas.sampled_rate import SampledRate, TokenBucket

INACTIVE_SENSOR_EXPIRY_MS = 3600 * 1000


class ClientQuotaManager:
    """A rate quota: byte rates, and request_percentage (``max_throttle_ms``: Kafka caps the
    request quota's throttle at one window; byte-rate throttles are not capped)."""

    def __init__(self, key: str, samples: int, window_ms: int, max_throttle_ms: int | None = None) -> None:
        self.key = key
        self.samples = samples
        self.window_ms = window_ms
        self.max_throttle_ms = max_throttle_ms
        self._sensors: dict[SensorKey, tuple[SampledRate, list[int]]] = {}  # rate, [last recorded ms]
        self._next_expiry_ms = 0

    def record(self, configs: QuotaConfigs, user: str, client_id: str, value: float, now_ms: int) -> int:
        """Record ``value`` for this client; the throttle time in ms (0 within its quota)."""
        found = applicable_quota(configs, self.key, user, client_id)
        if found is None:
            return 0
        quota, sensor_key = found
        rate = self._sensor(sensor_key, now_ms)
        rate.record(value, now_ms)
        throttle = rate.throttle_ms(quota, now_ms)
        return throttle if self.max_throttle_ms is None else min(throttle, self.max_throttle_ms)

    def unrecord(self, configs: QuotaConfigs, user: str, client_id: str, value: float, now_ms: int) -> None:
        """Take back a recorded value (a throttled fetch sends no data: Kafka unrecords its size)."""
        found = applicable_quota(configs, self.key, user, client_id)
        if found is not None:
            self._sensor(found[1], now_ms).record(-value, now_ms)

    def max_value_in_window(self, configs: QuotaConfigs, user: str, client_id: str) -> float | None:
        """What may be recorded at once without certain throttling (Kafka bounds a consumer's
        fetch size by it): the quota times ``samples - 1`` windows; None when unlimited."""
        found = applicable_quota(configs, self.key, user, client_id)
        if found is None:
            return None
        return found[0] * (self.samples - 1) * self.window_ms / 1000

    def _sensor(self, key: SensorKey, now_ms: int) -> SampledRate:
        if now_ms >= self._next_expiry_ms:
            self._expire(now_ms)
        entry = self._sensors.get(key)
        if entry is None:
            entry = self._sensors[key] = (SampledRate(self.samples, self.window_ms, now_ms), [now_ms])
        entry[1][0] = now_ms
        return entry[0]

    def _expire(self, now_ms: int) -> None:
        self._next_expiry_ms = now_ms + 60_000
        for key in [k for k, (_r, last) in self._sensors.items() if now_ms - last[0] >= INACTIVE_SENSOR_EXPIRY_MS]:
            del self._sensors[key]


class ControllerMutationQuotaManager:
    """controller_mutation_rate (KIP-599): partitions created or deleted per second, a token
    bucket per sensor. Strict (CreateTopics v6+, CreatePartitions v3+, DeleteTopics v5+): a
    topic asked for while the bucket is empty is refused with THROTTLING_QUOTA_EXCEEDED, one
    asked for while tokens are left is accepted even if it takes the bucket below zero.
    Permissive (older versions): every topic is accepted and the response carries the throttle."""

    def __init__(self, samples: int, window_ms: int) -> None:
        self.samples = samples
        self.window_ms = window_ms
        self._buckets: dict[SensorKey, TokenBucket] = {}

    def quota(self, configs: QuotaConfigs, user: str, client_id: str) -> tuple[float, float, TokenBucket] | None:
        """(rate, burst, bucket) for this client, or None: unlimited."""
        found = applicable_quota(configs, "controller_mutation_rate", user, client_id)
        if found is None:
            return None
        rate, sensor_key = found
        bucket = self._buckets.get(sensor_key)
        if bucket is None:
            bucket = self._buckets[sensor_key] = TokenBucket(0)
        return rate, rate * self.samples * self.window_ms / 1000, bucket
