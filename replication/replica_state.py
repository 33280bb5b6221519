"""ReplicaState: what a partition leader knows about one follower (Kafka's ``Replica``).

Updated from each follower Fetch. ``last_caught_up_time_ms`` follows Kafka's rule: a fetch at or
past the leader's log end offset makes the follower caught up as of that fetch; a fetch at or
past the leader's log end offset *as of the previous fetch* makes it caught up as of the
previous fetch. A follower not caught up for replica.lag.time.max.ms leaves the ISR.
"""

from __future__ import annotations

from dataclasses import dataclass

UNKNOWN_OFFSET = -1


@dataclass(slots=True)
class ReplicaState:
    broker_id: int
    log_end_offset: int = UNKNOWN_OFFSET
    log_start_offset: int = UNKNOWN_OFFSET
    last_fetch_leader_log_end_offset: int = UNKNOWN_OFFSET
    last_fetch_time_ms: int = 0
    last_caught_up_time_ms: int = 0
    broker_epoch: int = -1
    high_watermark_sent: int = UNKNOWN_OFFSET  # in the last fetch answer read for this follower

    def update_fetch_state(self, fetch_offset: int, log_start_offset: int, fetch_time_ms: int,
                           leader_end_offset: int, broker_epoch: int) -> None:
        if fetch_offset >= leader_end_offset:
            self.last_caught_up_time_ms = max(self.last_caught_up_time_ms, fetch_time_ms)
        elif fetch_offset >= self.last_fetch_leader_log_end_offset:
            self.last_caught_up_time_ms = max(self.last_caught_up_time_ms, self.last_fetch_time_ms)
        self.log_start_offset = log_start_offset
        self.log_end_offset = fetch_offset
        self.last_fetch_leader_log_end_offset = leader_end_offset
        self.last_fetch_time_ms = fetch_time_ms
        self.broker_epoch = broker_epoch

    def reset(self, now_ms: int, in_sync: bool) -> None:
        """A new leadership: nothing is known of the follower's log until it fetches; an ISR
        member counts as caught up now, so it is not dropped before it had a chance to fetch."""
        self.log_end_offset = UNKNOWN_OFFSET
        self.log_start_offset = UNKNOWN_OFFSET
        self.last_fetch_leader_log_end_offset = UNKNOWN_OFFSET
        self.last_fetch_time_ms = 0
        self.last_caught_up_time_ms = now_ms if in_sync else 0
        self.broker_epoch = -1
        self.high_watermark_sent = UNKNOWN_OFFSET

    def is_caught_up(self, leader_end_offset: int, now_ms: int, lag_time_max_ms: int) -> bool:
        return leader_end_offset == self.log_end_offset or now_ms - self.last_caught_up_time_ms <= lag_time_max_ms
