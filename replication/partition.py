"""Partition: one topic-partition's replica state on this broker, and its waiters.

As leader it owns the log, the leader epoch, the ISR and the high watermark. Invariants:
``log_start_offset <= high_watermark <= log_end_offset``; the high watermark never moves
backwards while this broker stays leader. Consumers read below the high watermark only
(read_committed: below the LastStableOffset, the first offset of a still open transaction).
Long-poll fetches wait on ``wait_for_data`` futures, completed when the high watermark moves;
nothing polls.
"""

from __future__ import annotations

import asyncio
import uuid

from kbroker.protocol.errors import ErrorCode, KafkaError
from kbroker.storage.log import AppendInfo, FetchSlice, PartitionLog


class Partition:
    def __init__(self, topic: str, index: int, topic_id: uuid.UUID, log: PartitionLog, broker_id: int) -> None:
        self.topic = topic
        self.index = index
        self.topic_id = topic_id
        self.log = log
        self.leader_id = broker_id
        self.replicas = [broker_id]
        self.isr = [broker_id]
        self.leader_epoch = max(log.leader_epoch_cache.latest_epoch, 0)
        self.partition_epoch = 0
        self.high_watermark = log.log_end_offset
        self._waiters: set[asyncio.Future[None]] = set()

    @property
    def log_end_offset(self) -> int:
        return self.log.log_end_offset

    @property
    def log_start_offset(self) -> int:
        return self.log.log_start_offset

    @property
    def last_stable_offset(self) -> int:
        """LastStableOffset: below the first offset of any open transaction and the high watermark."""
        first_unstable = self.log.producer_state.first_unstable_offset()
        if first_unstable is None:
            return self.high_watermark
        return min(first_unstable, self.high_watermark)

    def leader_epoch_error(self, current_leader_epoch: int) -> ErrorCode:
        """KIP-320: a client naming the leader epoch it believes in must agree with ours.

        Older than ours: the client's metadata is stale (FENCED_LEADER_EPOCH); newer: ours is
        (UNKNOWN_LEADER_EPOCH). -1 means the client does not know, and is never an error.
        """
        if current_leader_epoch < 0 or current_leader_epoch == self.leader_epoch:
            return ErrorCode.none
        if current_leader_epoch > self.leader_epoch:
            return ErrorCode.unknown_leader_epoch
        return ErrorCode.fenced_leader_epoch

    def append_as_leader(self, records: memoryview, required_acks: int, now_ms: int,
                         from_coordinator: bool = False) -> AppendInfo:
        if required_acks == -1 and len(self.isr) < self.log.config.min_insync_replicas:
            raise KafkaError(
                ErrorCode.not_enough_replicas,
                f"ISR size {len(self.isr)} is below min.insync.replicas "
                f"{self.log.config.min_insync_replicas}",
            )
        info = self.log.append_as_leader(records, self.leader_epoch, now_ms, from_coordinator)
        self._maybe_increment_high_watermark()
        return info

    def _maybe_increment_high_watermark(self) -> None:
        # With the leader as the only in-sync replica, everything written is committed.
        if self.isr == [self.leader_id] and self.log_end_offset > self.high_watermark:
            self.high_watermark = self.log_end_offset
            self.wake_waiters()

    def append_end_txn_marker(self, producer_id: int, producer_epoch: int, commit: bool,
                              coordinator_epoch: int, now_ms: int) -> int:
        offset = self.log.append_end_txn_marker(
            producer_id, producer_epoch, commit, coordinator_epoch, self.leader_epoch, now_ms
        )
        self._maybe_increment_high_watermark()
        return offset

    def read(self, offset: int, max_bytes: int, max_offset: int, min_one_batch: bool) -> FetchSlice | None:
        return self.log.read(offset, max_bytes, max_offset, min_one_batch)

    def wait_for_data(self) -> asyncio.Future[None]:
        """A future completed the next time the high watermark moves."""
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.add(future)
        # A fetch that times out cancels its future: forget it, or idle partitions would
        # collect one dead future per long poll.
        future.add_done_callback(self._waiters.discard)
        return future

    def wake_waiters(self) -> None:
        """Complete every pending wait (data arrived, or the partition is going away)."""
        waiters, self._waiters = self._waiters, set()
        for future in waiters:
            if not future.done():
                future.set_result(None)

    def delete_records(self, offset: int) -> int:
        """DeleteRecords: -1 means up to the high watermark. Returns the new low watermark."""
        target = self.high_watermark if offset == -1 else offset
        return self.log.delete_records_before(target, self.high_watermark)

    def after_truncation(self) -> None:
        self.high_watermark = min(self.high_watermark, self.log_end_offset)
