"""LogDirHealth: which log directories are failing I/O now, and how often they have.

Kafka takes a log directory offline at its first I/O error (and a broker with one directory
shuts down). kbroker undoes the failed write instead and keeps the directory: reads go on,
writes are answered KAFKA_STORAGE_ERROR while they fail, and the first write that succeeds
again ends the episode. Each episode is logged twice — when it starts and when it ends, with
how many writes and reads failed in between — never once per failed request, so a full disk
cannot flood the log. The counts are for operators (metrics).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

log = logging.getLogger(__name__)


@dataclass(slots=True)
class FailureEpisode:
    started: float  # time.monotonic()
    first_error: str
    failed_writes: int = 0
    failed_reads: int = 0


class LogDirHealth:
    def __init__(self) -> None:
        self.failing: dict[str, FailureEpisode] = {}
        self.failed_writes_total = 0
        self.failed_reads_total = 0
        self.episodes_total = 0

    def write_failed(self, log_dir: str, what: str, exc: OSError) -> None:
        self.failed_writes_total += 1
        self._episode(log_dir, what, exc).failed_writes += 1

    def read_failed(self, log_dir: str, what: str, exc: OSError) -> None:
        self.failed_reads_total += 1
        self._episode(log_dir, what, exc).failed_reads += 1

    def _episode(self, log_dir: str, what: str, exc: OSError) -> FailureEpisode:
        episode = self.failing.get(log_dir)
        if episode is None:
            episode = self.failing[log_dir] = FailureEpisode(time.monotonic(), f"{what}: {exc}")
            self.episodes_total += 1
            log.error(
                "log dir %s: %s failed: %s; failed writes are undone and answered KAFKA_STORAGE_ERROR "
                "until one succeeds again (further failures are counted, not logged)", log_dir, what, exc,
            )
        return episode

    def write_succeeded(self, log_dir: str) -> None:
        """Cheap when nothing is failing (called after every append)."""
        if self.failing:
            episode = self.failing.pop(log_dir, None)
            if episode is not None:
                log.warning(
                    "log dir %s: writes succeed again after %d failed write(s) and %d failed read(s) over %.1f s "
                    "(first: %s)", log_dir, episode.failed_writes, episode.failed_reads,
                    time.monotonic() - episode.started, episode.first_error,
                )

    def is_failing(self, log_dir: str) -> bool:
        return log_dir in self.failing
