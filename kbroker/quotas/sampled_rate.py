"""The two measures Kafka's quota sensors use: a rate over sampled windows and a token bucket.

``SampledRate`` is Kafka's ``Rate`` over a ``SampledStat`` of ``quota.window.num`` samples of
``quota.window.size.seconds`` each: a sample takes values until its window has passed, then the
oldest sample is reused; samples older than all the windows together count nothing. The rate
divides the samples' sum by the time they cover, counted as at least ``samples - 1`` whole
windows (so a first burst is not divided by a few milliseconds). The throttle time is Kafka's
``QuotaUtils.throttleTime``: with O the rate observed over window W and T the quota, the delay X
that brings O * W / (W + X) down to T, X = (O - T) / T * W.

``TokenBucket`` is Kafka's measure for ``controller_mutation_rate``: tokens refill at the quota
per second up to a burst of quota * samples * window seconds, each mutation takes one, and a
negative balance is a violation lasting -tokens / quota seconds.
"""

from __future__ import annotations


class SampledRate:
    """Values per second over the last ``samples`` windows of ``window_ms``."""

    __slots__ = ("_current", "_samples", "samples", "window_ms")

    def __init__(self, samples: int, window_ms: int, now_ms: int) -> None:
        self.samples = samples
        self.window_ms = window_ms
        self._samples: list[list[float]] = [[float(now_ms), 0.0]]  # [window start ms, sum]
        self._current = 0

    def record(self, value: float, now_ms: int) -> None:
        sample = self._samples[self._current]
        if now_ms - sample[0] >= self.window_ms:
            self._current = (self._current + 1) % self.samples
            if self._current >= len(self._samples):
                self._samples.append([float(now_ms), 0.0])
            else:
                self._samples[self._current][:] = [float(now_ms), 0.0]
            sample = self._samples[self._current]
        sample[1] += value

    def _purge(self, now_ms: int) -> None:
        expire = self.samples * self.window_ms
        for sample in self._samples:
            if now_ms - sample[0] >= expire:
                sample[:] = [float(now_ms), 0.0]

    def window_size_ms(self, now_ms: int) -> float:
        """The time the rate is measured over (Kafka's ``Rate.windowSize``)."""
        self._purge(now_ms)
        elapsed = now_ms - min(sample[0] for sample in self._samples)
        full_windows = int(elapsed // self.window_ms)
        if full_windows < self.samples - 1:
            elapsed += (self.samples - 1 - full_windows) * self.window_ms
        return elapsed

    def rate(self, now_ms: int) -> float:
        """Per second."""
        window = self.window_size_ms(now_ms)  # purges first
        return sum(sample[1] for sample in self._samples) / (window / 1000.0)

    def throttle_ms(self, quota: float, now_ms: int) -> int:
        """How long this rate must see nothing to fall to ``quota`` (0 when within it)."""
        observed = self.rate(now_ms)
        if observed <= quota:
            return 0
        return round((observed - quota) / quota * self.window_size_ms(now_ms))


class TokenBucket:
    """Mutations allowed now: refilled at the quota per second, at most a burst's worth."""

    __slots__ = ("_last_ms", "tokens")

    def __init__(self, now_ms: int) -> None:
        self.tokens: float | None = None  # full at first use (the burst depends on the quota)
        self._last_ms = now_ms

    def _refill(self, quota: float, burst: float, now_ms: int) -> float:
        tokens = burst if self.tokens is None else min(burst, self.tokens + quota * (now_ms - self._last_ms) / 1000.0)
        self._last_ms = now_ms
        self.tokens = tokens
        return tokens

    def throttle_ms(self, quota: float, burst: float, now_ms: int) -> int:
        """0 while tokens are left, else how long until the balance is back at zero."""
        tokens = self._refill(quota, burst, now_ms)
        return 0 if tokens >= 0 else round(-tokens / quota * 1000)

    def take(self, permits: float, quota: float, burst: float, now_ms: int) -> None:
        self.tokens = self._refill(quota, burst, now_ms) - permits
