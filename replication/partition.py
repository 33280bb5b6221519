"""Partition: one topic-partition's replica state on this broker, and its waiters.

As leader it owns the log, the leader epoch, the ISR and the high watermark. Invariants:
``log_start_offset <= high_watermark <= log_end_offset``; the high watermark never moves
backwards while this broker stays leader. Consumers read below the high watermark only
(read_committed: below the LastStableOffset, the first offset of a still open transaction).
Long-poll fetches wait on a ``DataWaiter``, completed when the log end offset or the
high watermark moves; acks=all produces wait on ``wait_for_commit`` futures, completed when the
high watermark passes their records; nothing polls.

Replication (cluster mode) follows Kafka's ``Partition``: the leader tracks each follower's
fetch position (``ReplicaState``); the high watermark is the smallest log end offset over the
"maximal" ISR (the committed ISR plus any member an in-flight AlterPartition adds, KIP-497),
and does not advance while the ISR is smaller than the effective min.insync.replicas (Kafka 4
strict min ISR, KIP-966). ISR changes are proposed to the controller one at a time and applied
only from its answer (the partition epoch orders them); a proposal whose fate is unknown (no
answer) stays in flight, counted, and is sent again, as Kafka's AlterPartitionManager does.
A follower never serves producers or consumers (NOT_LEADER_OR_FOLLOWER); its log is written by
the replica fetcher.
A single-node partition is a leader whose only replica is itself: every append is committed.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable

from kbroker.protocol.errors import ErrorCode, KafkaError
from kbroker.protocol.records import HEADER_SIZE, read_header
from kbroker.storage.clock import SYSTEM_CLOCK, Clock
from kbroker.storage.log import AppendInfo, FetchSlice, PartitionLog

from .quorum.partition_registration import NO_LEADER, PartitionRegistration
from .replica_state import ReplicaState
from .replication_settings import AlterPartition
from .stage_trace import DEBUG, TRACE, stage

log = logging.getLogger(__name__)

DEFAULT_LAG_TIME_MAX_MS = 30000
ALTER_PARTITION_RETRY_MS = 100  # Kafka's AlterPartitionManager resends after retry.backoff.ms
# AlterPartition refusals that say the controller did not apply the change and the leader's view
# is current (Kafka's handleAlterPartitionError resets to the committed ISR on these only).
_NOT_APPLIED = frozenset({ErrorCode.operation_not_attempted, ErrorCode.ineligible_replica,
                          ErrorCode.invalid_request})
# Answers that leave it unknown whether the controller applied the change: sent again.
_OUTCOME_UNKNOWN = frozenset({ErrorCode.not_controller, ErrorCode.request_timed_out})


class DataWaiter:
    """One long-polling fetch waiting on many partitions: the first wake completes ``future``;
    ``woken`` collects which partitions moved, so only those are read again."""

    __slots__ = ("future", "woken")

    def __init__(self) -> None:
        self.future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.woken: set[tuple[str, int]] = set()

    def wake(self, key: tuple[str, int]) -> None:
        self.woken.add(key)
        if not self.future.done():
            self.future.set_result(None)

    def rearm(self) -> set[tuple[str, int]]:
        """The partitions that woke it since the last call; waits anew."""
        woken, self.woken = self.woken, set()
        self.future = asyncio.get_running_loop().create_future()
        return woken


class Partition:
    def __init__(self, topic: str, index: int, topic_id: uuid.UUID, log: PartitionLog, broker_id: int,
                 clock: Clock = SYSTEM_CLOCK) -> None:
        self.clock = clock
        self.topic = topic
        self.index = index
        self.topic_id = topic_id
        self.log = log
        self.broker_id = broker_id
        self.leader_id = broker_id
        self.replicas = [broker_id]
        self.isr = [broker_id]
        self.leader_epoch = max(log.leader_epoch_cache.latest_epoch, 0)
        self.partition_epoch = 0
        self.registration: PartitionRegistration | None = None  # None: single-node leadership
        self.high_watermark = log.log_end_offset
        self.leader_epoch_start_offset = 0
        self.remote_replicas: dict[int, ReplicaState] = {}
        self.pending_isr: list[int] | None = None  # an AlterPartition in flight proposes this ISR
        self._alter_retry_at_ms: int | None = None  # when to send ``pending_isr`` again (outcome unknown)
        self.lag_time_max_ms = DEFAULT_LAG_TIME_MAX_MS
        self.alter_partition: AlterPartition | None = None
        self.replica_eligible: Callable[[int, int], bool] | None = None
        self._waiters: set[DataWaiter] = set()
        self._commit_waiters: list[tuple[int, asyncio.Future[ErrorCode]]] = []
        self._alter_task: asyncio.Task[None] | None = None  # held: the loop keeps only weak references

    @property
    def is_leader(self) -> bool:
        return self.leader_id == self.broker_id

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

    @property
    def maximal_isr(self) -> list[int]:
        """The ISR the high watermark waits for: an expansion in flight counts already, a
        shrink in flight does not yet (both the larger set: safe whatever the controller says)."""
        if self.pending_isr is None:
            return self.isr
        return sorted(set(self.isr) | set(self.pending_isr))

    def effective_min_isr(self) -> int:
        """min.insync.replicas, capped at the replication factor (Kafka's effectiveMinIsr)."""
        return min(self.log.config.min_insync_replicas, len(self.remote_replicas) + 1)

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

    def check_leader(self) -> None:
        if not self.is_leader:
            raise KafkaError(ErrorCode.not_leader_or_follower,
                             f"broker {self.broker_id} is not the leader of {self.topic}-{self.index}")

    # --- leadership (cluster mode) -----------------------------------------------------------

    def become_leader(self, registration: PartitionRegistration, now_ms: int) -> bool:
        """Lead at ``registration.leader_epoch``; True if this is a new leadership (new epoch).

        A new epoch starts at the log end offset in the epoch cache; every follower is unknown
        until it fetches (so the high watermark stays where this replica had it). The same
        epoch with a newer partition epoch only updates replicas and ISR in place.
        """
        new_leadership = not self.is_leader or self.registration is None or \
            registration.leader_epoch != self.leader_epoch
        self._apply_assignment(registration)
        if new_leadership:
            self.leader_id = self.broker_id
            self.leader_epoch = registration.leader_epoch
            self.leader_epoch_start_offset = self.log_end_offset
            self.log.leader_epoch_cache.assign(registration.leader_epoch, self.log_end_offset)
            self.remote_replicas = {}
            self.high_watermark = min(self.high_watermark, self.log_end_offset)
            log.info("%s-%d: leader at epoch %d from offset %d, ISR %s", self.topic, self.index,
                     self.leader_epoch, self.leader_epoch_start_offset, self.isr)
        for replica in registration.replicas:
            if replica != self.broker_id and replica not in self.remote_replicas:
                state = ReplicaState(replica)
                state.reset(now_ms, replica in self.isr)
                self.remote_replicas[replica] = state
        for replica in list(self.remote_replicas):
            if replica not in registration.replicas:
                del self.remote_replicas[replica]
        self.wake_waiters()  # fetches parked under the old epoch re-check it
        self._maybe_increment_high_watermark(now_ms)
        return new_leadership

    def become_follower(self, registration: PartitionRegistration) -> bool:
        """Follow ``registration.leader`` (NO_LEADER: nobody to fetch from). True if the leader
        or the leader epoch changed, i.e. the fetcher must (re)start for this partition."""
        changed = self.is_leader or self.registration is None or \
            registration.leader_epoch != self.leader_epoch or registration.leader != self.leader_id
        self._apply_assignment(registration)
        self.leader_id = registration.leader if registration.leader != self.broker_id else NO_LEADER
        self.leader_epoch = registration.leader_epoch
        self.remote_replicas = {}
        self.high_watermark = min(self.high_watermark, self.log_end_offset)
        self.fail_commit_waiters(ErrorCode.not_leader_or_follower)
        self.wake_waiters()
        return changed

    def _apply_assignment(self, registration: PartitionRegistration) -> None:
        self.registration = registration
        self.replicas = list(registration.replicas)
        self.isr = list(registration.isr)
        self.partition_epoch = registration.partition_epoch
        self.pending_isr = None  # the controller's word replaces any proposal in flight
        self._alter_retry_at_ms = None

    # --- leader: follower tracking and the ISR ------------------------------------------------

    def update_follower_fetch_state(self, replica_id: int, fetch_offset: int, log_start_offset: int,
                                    now_ms: int, leader_end_offset: int, broker_epoch: int) -> None:
        """A follower fetched from ``fetch_offset``: it holds everything below it."""
        state = self.remote_replicas.get(replica_id)
        if state is None:
            raise KafkaError(ErrorCode.not_leader_or_follower,
                             f"broker {replica_id} is not a replica of {self.topic}-{self.index}")
        # traced only when it moves: a line per partition of every sessionless follower fetch
        # cost the traced broker ~20 µs each, ~0.7 ms per fetch, inside the timeline it measures
        traced = TRACE.isEnabledFor(DEBUG) and fetch_offset != state.log_end_offset
        state.update_fetch_state(fetch_offset, log_start_offset, now_ms, leader_end_offset, broker_epoch)
        self._maybe_resend_alter_partition(now_ms)
        self._maybe_expand_isr(state)
        self._maybe_increment_high_watermark(now_ms)
        if traced:
            stage("follower_position", tp=f"{self.topic}-{self.index}", replica=replica_id, fetch_offset=fetch_offset,
                  hw=self.high_watermark, leo=self.log_end_offset)

    def replica_broker_changed(self, now_ms: int) -> None:
        """A replica's broker registration changed (fenced, unfenced, a new incarnation). A
        follower outside the ISR holds the high watermark back only while it is eligible to join
        (Kafka's shouldWaitForReplicaToJoinIsr), so the high watermark is looked at again (the
        controller's ISR change may have been applied before the fencing that came with it);
        and a follower that caught up may now join."""
        if not self.is_leader:
            return
        self._maybe_increment_high_watermark(now_ms)
        self.recheck_isr_expansion(now_ms)

    def recheck_isr_expansion(self, now_ms: int) -> None:
        """Propose adding any follower out of the ISR that qualifies by its last fetch, if that
        fetch is recent (within replica.lag.time.max.ms). Kafka looks only on a fetch; but an
        incremental fetch session (KIP-227) reads an idle partition only when something in it
        changed, so a follower that caught up while it could not yet join (its new broker epoch
        not yet replayed here, or another ISR change in flight) is looked at again when that
        reason goes away. A follower not heard from lately is not: it may be cut off."""
        if not self.is_leader:
            return
        for replica, state in self.remote_replicas.items():
            if replica not in self.isr and now_ms - state.last_fetch_time_ms <= self.lag_time_max_ms:
                self._maybe_expand_isr(state)

    def _maybe_expand_isr(self, state: ReplicaState) -> None:
        # Kafka's isFollowerInSync: at or past the high watermark and past the start of this
        # leader's epoch (so it has truncated any divergent tail).
        if (self.alter_partition is None or self.pending_isr is not None or state.broker_id in self.isr
                or state.log_end_offset < self.high_watermark
                or state.log_end_offset < self.leader_epoch_start_offset
                or not self._is_eligible(state)):
            return
        self._propose_isr(sorted([*self.isr, state.broker_id]))

    def _is_eligible(self, state: ReplicaState) -> bool:
        return self.replica_eligible is None or self.replica_eligible(state.broker_id, state.broker_epoch)

    def maybe_shrink_isr(self, now_ms: int) -> None:
        """Propose dropping followers not caught up within replica.lag.time.max.ms."""
        self._maybe_resend_alter_partition(now_ms)
        if self.is_leader and self.high_watermark < self.log_end_offset:
            # A follower outside the ISR stops holding the high watermark back once it has not
            # been caught up for replica.lag.time.max.ms; no fetch may come to notice that (an
            # incremental fetch session does not read an idle partition), so this round does.
            self._maybe_increment_high_watermark(now_ms)
        if not self.is_leader or self.alter_partition is None or self.pending_isr is not None:
            return
        end = self.log_end_offset
        out = [
            r for r in self.isr
            if r != self.broker_id and not (
                (state := self.remote_replicas.get(r)) is not None
                and state.is_caught_up(end, now_ms, self.lag_time_max_ms)
            )
        ]
        if out:
            log.info("%s-%d: shrinking ISR %s: %s not caught up in %d ms (leader end offset %d, HW %d)",
                     self.topic, self.index, self.isr, out, self.lag_time_max_ms, end, self.high_watermark)
            self._propose_isr([r for r in self.isr if r not in out])
        elif len(self.isr) < len(self.replicas):
            self.recheck_isr_expansion(now_ms)  # e.g. a refused expansion, proposed again after this round's wait

    def _propose_isr(self, new_isr: list[int]) -> None:
        self.pending_isr = new_isr
        self._send_proposal()

    def _send_proposal(self) -> None:
        assert self.pending_isr is not None
        # The epochs are those the proposal was made against (any registration applied since
        # would have replaced the proposal), not whatever holds when the answer comes.
        self._alter_task = asyncio.get_running_loop().create_task(
            self._send_alter_partition(self.pending_isr, self.leader_epoch, self.partition_epoch))

    def _maybe_resend_alter_partition(self, now_ms: int) -> None:
        if self._alter_retry_at_ms is not None and now_ms >= self._alter_retry_at_ms and self.pending_isr is not None:
            self._alter_retry_at_ms = None
            self._send_proposal()

    async def _send_alter_partition(self, proposal: list[int], leader_epoch: int, partition_epoch: int) -> None:
        assert self.alter_partition is not None
        try:
            answer = await self.alter_partition(
                self.topic, self.index, self.topic_id, leader_epoch, partition_epoch, proposal)
        except (KafkaError, ConnectionError, OSError) as exc:
            log.info("%s-%d: AlterPartition to ISR %s failed: %s", self.topic, self.index, proposal, exc)
            if self.pending_isr is not proposal:
                return
            code = exc.code if isinstance(exc, KafkaError) else None
            if code in _NOT_APPLIED:
                self.pending_isr = None  # the next fetch or ISR check proposes again
            elif code is None or code in _OUTCOME_UNKNOWN:
                # The controller may have applied it (only the answer was lost): the proposal
                # stays in flight — an expansion keeps counting for the high watermark — and is
                # sent again (the next fetch or ISR check after the backoff).
                self._alter_retry_at_ms = self.clock.wall_ms() + ALTER_PARTITION_RETRY_MS
            # Any other refusal (INVALID_UPDATE_VERSION, FENCED_LEADER_EPOCH, ...) means this
            # leader's view is stale: the proposal stands until the controller's registration,
            # on its way, replaces it.
            return
        if self.pending_isr is not proposal:
            return  # leadership or assignment changed meanwhile: the answer is stale
        self.pending_isr = None
        if answer.leader_epoch != self.leader_epoch or answer.partition_epoch < self.partition_epoch:
            return
        self.isr = list(answer.isr)
        self.partition_epoch = answer.partition_epoch
        self.registration = answer
        log.info("%s-%d: ISR now %s (partition epoch %d)", self.topic, self.index, self.isr, self.partition_epoch)
        self._maybe_increment_high_watermark(self.clock.wall_ms())
        self.recheck_isr_expansion(self.clock.wall_ms())  # followers that caught up while this change was in flight

    # --- produce --------------------------------------------------------------------------

    def append_as_leader(self, records: memoryview, required_acks: int, now_ms: int,
                         from_coordinator: bool = False) -> AppendInfo:
        self.check_leader()
        if required_acks == -1 and len(self.isr) < self.effective_min_isr():
            # Kafka 4 compares with the effective min ISR: an RF-1 topic accepts acks=all even
            # where min.insync.replicas is 2.
            raise KafkaError(
                ErrorCode.not_enough_replicas,
                f"ISR size {len(self.isr)} is below min.insync.replicas {self.effective_min_isr()}",
            )
        info = self.log.append_as_leader(records, self.leader_epoch, now_ms, from_coordinator)
        if TRACE.isEnabledFor(DEBUG):
            stage("leader_append", tp=f"{self.topic}-{self.index}", first=info.first_offset, last=info.last_offset,
                  hw=self.high_watermark, fetches_parked=len(self._waiters))
        self._after_leader_append(now_ms)
        return info

    def append_end_txn_marker(self, producer_id: int, producer_epoch: int, commit: bool,
                              coordinator_epoch: int, now_ms: int) -> int:
        self.check_leader()
        offset = self.log.append_end_txn_marker(
            producer_id, producer_epoch, commit, coordinator_epoch, self.leader_epoch, now_ms
        )
        self._after_leader_append(now_ms)
        return offset

    def _after_leader_append(self, now_ms: int) -> None:
        if not self._maybe_increment_high_watermark(now_ms) and self.remote_replicas:
            self.wake_waiters()  # followers' long polls read up to the log end offset

    def _maybe_increment_high_watermark(self, now_ms: int) -> bool:
        """Kafka's maybeIncrementLeaderHW: the smallest log end offset over the maximal ISR (and
        over followers caught up enough to be about to join it); never under min ISR."""
        if not self.is_leader or len(self.isr) < self.effective_min_isr():
            return False
        new_hw = self.log_end_offset
        maximal = self.maximal_isr
        for replica, state in self.remote_replicas.items():
            if state.log_end_offset < new_hw and (replica in maximal or (
                state.is_caught_up(self.log_end_offset, now_ms, self.lag_time_max_ms) and self._is_eligible(state)
            )):
                new_hw = state.log_end_offset
        if new_hw <= self.high_watermark:
            return False
        self.high_watermark = new_hw
        if TRACE.isEnabledFor(DEBUG):
            stage("hw_advance", tp=f"{self.topic}-{self.index}", hw=new_hw, commit_waiters=len(self._commit_waiters))
        # The delayed produces first: their tasks then resume before the long polls woken here
        # (asyncio runs callbacks in the order scheduled), so an acks=all answer does not wait
        # behind a follower's fetch being re-read and answered in the same loop turns.
        self._complete_commit_waiters()
        self.wake_waiters()
        return True

    def wait_for_commit(self, required_offset: int) -> asyncio.Future[ErrorCode]:
        """acks=all: a future answered once the high watermark reaches ``required_offset``
        (NONE, or NOT_ENOUGH_REPLICAS_AFTER_APPEND if the ISR is then under min ISR), or with
        NOT_LEADER_OR_FOLLOWER if leadership is lost first."""
        future: asyncio.Future[ErrorCode] = asyncio.get_running_loop().create_future()
        status = self.commit_status(required_offset)
        if status is not None:
            future.set_result(status)
        else:
            self._commit_waiters.append((required_offset, future))
        return future

    def commit_status(self, required_offset: int) -> ErrorCode | None:
        """The acks=all answer for records below ``required_offset`` if known now, else None."""
        if not self.is_leader:
            return ErrorCode.not_leader_or_follower
        if self.high_watermark >= required_offset:
            return self._commit_error()
        return None

    def _commit_error(self) -> ErrorCode:
        # Kafka's checkEnoughReplicasReachOffset: committed, but the (maximal) ISR has since
        # fallen under min ISR: the write is durable on fewer replicas than asked for.
        if len(self.maximal_isr) >= self.effective_min_isr():
            return ErrorCode.none
        return ErrorCode.not_enough_replicas_after_append

    def _complete_commit_waiters(self) -> None:
        if not self._commit_waiters:
            return
        keep = []
        for required, future in self._commit_waiters:
            if future.done():
                continue
            if self.high_watermark >= required:
                future.set_result(self._commit_error())
            else:
                keep.append((required, future))
        self._commit_waiters = keep

    def fail_commit_waiters(self, error: ErrorCode) -> None:
        waiters, self._commit_waiters = self._commit_waiters, []
        for _required, future in waiters:
            if not future.done():
                future.set_result(error)

    # --- follower -------------------------------------------------------------------------

    def append_as_follower(self, records: memoryview, now_ms: int) -> AppendInfo:
        if self.is_leader:
            raise KafkaError(ErrorCode.not_leader_or_follower, f"{self.topic}-{self.index} is led here")
        plog = self.log
        if plog.log_end_offset == plog.log_start_offset and len(records) >= HEADER_SIZE:
            first = read_header(records).base_offset
            if plog.log_start_offset > first:
                # Kafka's UnexpectedAppendOffsetException case: an empty log restarted at a
                # log start offset inside a batch; it restarts at that batch instead (the
                # leader's log start offset then moves it forward again).
                plog.truncate_fully_and_start_at(first)
        info = plog.append_as_follower(records, now_ms)
        self.wake_waiters()  # nobody reads a follower but those watching it replicate
        return info

    def update_follower_high_watermark(self, leader_high_watermark: int, leader_log_start_offset: int) -> None:
        """A follower's high watermark is the leader's, capped at its own log end offset; its
        log start offset follows the leader's (DeleteRecords, retention) up to that mark."""
        new_hw = min(leader_high_watermark, self.log_end_offset)
        if new_hw != self.high_watermark:
            self.high_watermark = new_hw
            self.wake_waiters()
        target = min(leader_log_start_offset, self.high_watermark)
        if target > self.log.log_start_offset:
            self.log.delete_records_before(target, self.high_watermark)

    def truncate_to(self, offset: int) -> None:
        """Follower divergence: drop this replica's records at and after ``offset``."""
        self.log.truncate_to(offset)
        self.after_truncation()

    # --- reads and waits ------------------------------------------------------------------

    def read(self, offset: int, max_bytes: int, max_offset: int, min_one_batch: bool) -> FetchSlice | None:
        return self.log.read(offset, max_bytes, max_offset, min_one_batch)

    def add_waiter(self, waiter: DataWaiter) -> None:
        """Wake ``waiter`` the next time the high watermark (or, on a leader with followers,
        the log end offset) moves."""
        self._waiters.add(waiter)

    def remove_waiter(self, waiter: DataWaiter) -> None:
        self._waiters.discard(waiter)

    def wake_waiters(self) -> None:
        """Wake every pending wait once (data arrived, or the partition is going away)."""
        waiters, self._waiters = self._waiters, set()
        key = (self.topic, self.index)
        for waiter in waiters:
            waiter.wake(key)

    def delete_records(self, offset: int) -> int:
        """DeleteRecords: -1 means up to the high watermark. Returns the new low watermark."""
        self.check_leader()
        target = self.high_watermark if offset == -1 else offset
        return self.log.delete_records_before(target, self.high_watermark)

    def after_truncation(self) -> None:
        self.high_watermark = min(self.high_watermark, self.log_end_offset)
