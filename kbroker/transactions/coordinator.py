"""TransactionCoordinator: transactional ids' producer ids, epochs and transaction states.

Every state change is appended to ``__transaction_state`` (created by FindCoordinator at first
use, like Kafka) and takes effect only once that record is replicated. Ongoing transactions past their timeout
are aborted with a bumped epoch, which fences the old producer. Transactional ids with no
transaction in progress and no state change for transactional.id.expiration.ms are forgotten
with a tombstone.

A transactional id is coordinated by the leader of its ``__transaction_state`` partition: the
coordinator loads a partition's ids when this broker becomes its leader (finishing transactions
caught in Prepare*: a crash between PrepareCommit/PrepareAbort and the Complete record), drops
them when it stops leading, and answers NOT_COORDINATOR for ids of partitions it does not lead.
Kafka's pendingState: a change is *pending* from its append until its record is on the ISR
(acks=all, min ISR met), for at most the transaction's timeout (Kafka's append timeout);
meanwhile other requests for the id get CONCURRENT_TRANSACTIONS, and the in-memory state is the
old one. Replicated, the change becomes the state (if this broker
still coordinates the id at the same coordinator epoch, else NOT_COORDINATOR); failed, it is
dropped and the request that made it gets Kafka's mapping of the append error
(NOT_LEADER_OR_FOLLOWER and storage errors: NOT_COORDINATOR; NOT_ENOUGH_REPLICAS, a timeout:
COORDINATOR_NOT_AVAILABLE). Request handlers await that outcome (``replicated``).
Markers are then written asynchronously by the TransactionMarkerChannelManager (Kafka's flow:
EndTxn is answered once PrepareCommit/PrepareAbort is the state; requests meanwhile get
CONCURRENT_TRANSACTIONS), and the Complete record follows once every partition's leader has
the marker on its ISR.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from kbroker.coordinator_errors import coordinator_write_error
from kbroker.groups.offset_store import CONSUMER_OFFSETS_TOPIC, OffsetStore
from kbroker.metrics.topic_metrics import BROKER_TOPIC_METRICS
from kbroker.protocol.errors import ErrorCode, KafkaError
from kbroker.storage.clock import SYSTEM_CLOCK, Clock
from kbroker.transactions.transaction_log import (
    TRANSACTION_STATE_TOPIC,
    TransactionMetadata,
    TransactionState,
    decode,
    partition_for,
    read_log,
    record_batch,
    tombstone_batch,
)

if TYPE_CHECKING:
    from kbroker.replication.forwarding_controller import ForwardingController
    from kbroker.replication.quorum.producer_ids import ControllerProducerIdManager
    from kbroker.replication.replica_manager import ReplicaManager

log = logging.getLogger(__name__)

# How long a tombstone's append may wait for the ISR: Kafka's request.timeout.ms default. A state
# change waits up to its transaction's timeout (transaction.timeout.ms), as Kafka's coordinator.
TOMBSTONE_TIMEOUT_MS = 30000


class MarkerChannel(Protocol):
    """Writes a prepared transaction's markers, then calls ``complete``."""

    def send_markers(self, coordinator: TransactionCoordinator, metadata: TransactionMetadata) -> None: ...


MAX_EPOCH = 32767
S = TransactionState


@dataclass(slots=True)
class PendingTransition:
    """A state record appended but not yet replicated (Kafka's TransactionMetadata.pendingState).

    ``metadata`` is the state it records (None: a tombstone, the id is forgotten);
    ``then`` runs once it is the state (e.g. sending the markers of a Prepare* state);
    ``outcome`` is answered with NONE or the error the request that made it gets.
    """

    metadata: TransactionMetadata | None
    coordinator_epoch: int
    outcome: asyncio.Future[ErrorCode]
    then: Callable[[TransactionMetadata], None] | None = None


class TransactionCoordinator:
    """The transactional ids this broker coordinates (those of the state partitions it leads).

    State machine (Kafka's; with transaction version 0/1 the epoch stays fixed within a producer
    session, with version 2 — EndTxn v5+ — every commit/abort bumps it and the markers carry
    the bumped epoch, which fences late writes of the ended transaction)::

        Empty/CompleteCommit/CompleteAbort --AddPartitions/AddOffsets--> Ongoing
        Ongoing --EndTxn(commit)--> PrepareCommit --markers--> CompleteCommit
        Ongoing --EndTxn(abort) / timeout / InitProducerId--> PrepareAbort --markers--> CompleteAbort

    Invariants: ``partitions`` is empty unless Ongoing or Prepare*; a transactional id's
    producer id only changes when its epoch would overflow; ``transactions`` holds only
    replicated states; an id has at most one change in ``pending``, and none is made while one is.
    """

    def __init__(self, controller: ForwardingController, replica_manager: ReplicaManager, offset_store: OffsetStore,
                 allocator: ControllerProducerIdManager, marker_channel: MarkerChannel, num_partitions: int,
                 max_timeout_ms: int, clock: Clock = SYSTEM_CLOCK) -> None:
        self.controller = controller
        self.clock = clock
        self.replica_manager = replica_manager
        self.offset_store = offset_store
        self.allocator = allocator
        self.num_partitions = num_partitions
        self.max_timeout_ms = max_timeout_ms
        self.transactions: dict[str, TransactionMetadata] = {}
        self.pending: dict[str, PendingTransition] = {}
        # The __transaction_state partitions led here -> their coordinator epoch (the
        # partition's leader epoch, as Kafka's); nothing until elected leader of one.
        self.owned: dict[int, int] = {}
        self.marker_channel = marker_channel
        self._waits: set[asyncio.Task[None]] = set()  # held: the loop keeps only weak references

    # --- which ids are coordinated here ---------------------------------------------------

    def owns(self, transactional_id: str) -> bool:
        return partition_for(transactional_id, self.partitions_count()) in self.owned

    def _check_owner(self, transactional_id: str) -> None:
        if not self.owns(transactional_id):
            raise KafkaError(ErrorCode.not_coordinator, "This is not the correct coordinator.")

    def coordinator_epoch(self, transactional_id: str) -> int:
        return self.owned.get(partition_for(transactional_id, self.partitions_count()), -1)

    def describe(self, transactional_id: str) -> TransactionMetadata | None:
        """DescribeTransactions: the id's state here (None: unknown id); NOT_COORDINATOR if
        another broker coordinates it (Kafka's getTransactionState)."""
        self._check_owner(transactional_id)
        return self.transactions.get(transactional_id)

    def on_leadership(self, index: int, leader: bool) -> None:
        """This broker became (or stopped being) the leader of ``__transaction_state`` partition
        ``index``: load its transactional ids and finish their Prepare* transactions (Kafka's
        onElection), or drop them (onResignation; marker sending for them stops)."""
        self._drop_partition(index)
        if leader:
            partition = self.replica_manager.partitions.get((TRANSACTION_STATE_TOPIC, index))
            if partition is None:
                return
            loaded: dict[str, TransactionMetadata] = {}
            for key, value in read_log(partition.log):
                if key is not None:
                    transactional_id, metadata = decode(key, value)
                    if metadata is None:
                        loaded.pop(transactional_id, None)
                    else:
                        loaded[transactional_id] = metadata
            self.transactions.update(loaded)
            self.owned[index] = partition.leader_epoch
            log.info("coordinating %d transactional ids of %s-%d (coordinator epoch %d)", len(loaded),
                     TRANSACTION_STATE_TOPIC, index, partition.leader_epoch)
            for metadata in loaded.values():
                if metadata.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
                    log.info("completing transaction of %r left in %s", metadata.transactional_id,
                             metadata.state.display)
                    self._write_markers_and_complete(metadata)
        elif self.owned.pop(index, None) is not None:
            log.info("no longer coordinating the transactional ids of %s-%d", TRANSACTION_STATE_TOPIC, index)

    def _drop_partition(self, index: int) -> None:
        """Forget the ids of partition ``index``; their pending changes end NOT_COORDINATOR."""
        count = self.partitions_count()
        for transactional_id in [t for t in self.transactions if partition_for(t, count) == index]:
            del self.transactions[transactional_id]
        for transactional_id in [t for t in self.pending if partition_for(t, count) == index]:
            self._resolve(transactional_id, self.pending.pop(transactional_id), ErrorCode.not_coordinator)

    async def replicated(self, transactional_id: str) -> None:
        """Return once the id's pending change (if any) is the state. Raises the error the
        change ended with: NOT_COORDINATOR if leadership moved or the write failed in storage,
        COORDINATOR_NOT_AVAILABLE if the ISR was short or time ran out (Kafka's mapping)."""
        pending = self.pending.get(transactional_id)
        if pending is None:
            self._check_owner(transactional_id)
            return
        error = await asyncio.shield(pending.outcome)
        if error != ErrorCode.none:
            raise KafkaError(error)

    # --- the state log --------------------------------------------------------------------

    def partitions_count(self) -> int:
        info = self.controller.topics.get(TRANSACTION_STATE_TOPIC)
        return info.partitions if info is not None else self.num_partitions

    def ensure_topic(self) -> None:
        """FindCoordinator creates the topic; a write before it exists waits for it (retriable)."""
        if TRANSACTION_STATE_TOPIC not in self.controller.topics:
            raise KafkaError(ErrorCode.coordinator_not_available, f"{TRANSACTION_STATE_TOPIC} does not exist yet")

    def _check_not_pending(self, transactional_id: str) -> None:
        if transactional_id in self.pending:
            raise KafkaError(ErrorCode.concurrent_transactions,
                             "a state change of this transactional id is being replicated")

    def _append_transaction_to_log(self, transactional_id: str, metadata: TransactionMetadata | None,
                                   then: Callable[[TransactionMetadata], None] | None = None) -> None:
        """Append the id's new state (None: a tombstone) and keep it pending until replicated
        (Kafka's TransactionStateManager.appendTransactionToLog). Raises the mapped error if the
        append itself fails; nothing changes then."""
        self.ensure_topic()
        if transactional_id in self.pending:
            raise KafkaError(ErrorCode.concurrent_transactions)
        index = partition_for(transactional_id, self.partitions_count())
        coordinator_epoch = self.owned.get(index)
        if coordinator_epoch is None:
            raise KafkaError(ErrorCode.not_coordinator, "This is not the correct coordinator.")
        now = self.clock.wall_ms()
        batch = record_batch(metadata, now) if metadata is not None else tombstone_batch(transactional_id, now)
        try:
            partition = self.replica_manager.get_partition(TRANSACTION_STATE_TOPIC, index)
            # acks=all: refused (NOT_ENOUGH_REPLICAS) while the ISR is under min.insync.replicas.
            partition.append_as_leader(batch, -1, now)
        except (OSError, KafkaError) as exc:  # nothing of the new state is kept
            BROKER_TOPIC_METRICS.produced(TRANSACTION_STATE_TOPIC, batch, exc.code if isinstance(exc, KafkaError)
                                          else ErrorCode.kafka_storage_error)
            raise KafkaError(coordinator_write_error(exc), f"{TRANSACTION_STATE_TOPIC}-{index}: {exc}") from exc
        BROKER_TOPIC_METRICS.produced(TRANSACTION_STATE_TOPIC, batch, ErrorCode.none)  # as Kafka counts it
        pending = PendingTransition(metadata, coordinator_epoch, asyncio.get_running_loop().create_future(), then)
        self.pending[transactional_id] = pending
        end = partition.log_end_offset
        status = partition.commit_status(end)
        if status is not None:  # already on the ISR (a single replica): the state at once
            self._finish(transactional_id, pending, status)
            return
        timeout_ms = metadata.timeout_ms if metadata is not None else TOMBSTONE_TIMEOUT_MS
        task = asyncio.get_running_loop().create_task(self._await_replication(
            transactional_id, pending, partition.wait_for_commit(end), timeout_ms))
        self._waits.add(task)
        task.add_done_callback(self._waits.discard)

    async def _await_replication(self, transactional_id: str, pending: PendingTransition,
                                 committed: asyncio.Future[ErrorCode], timeout_ms: int) -> None:
        try:
            status = await asyncio.wait_for(committed, timeout_ms / 1000)
        except TimeoutError:
            status = ErrorCode.request_timed_out
        self._finish(transactional_id, pending, status)

    def _finish(self, transactional_id: str, pending: PendingTransition, status: ErrorCode) -> None:
        """The append of ``pending`` is replicated (NONE) or failed: make it the state, or drop it."""
        if self.pending.get(transactional_id) is not pending:
            return  # already ended (leadership moved meanwhile)
        del self.pending[transactional_id]
        error = ErrorCode.none if status == ErrorCode.none else coordinator_write_error(KafkaError(status))
        index = partition_for(transactional_id, self.partitions_count())
        if error == ErrorCode.none and self.owned.get(index) != pending.coordinator_epoch:
            error = ErrorCode.not_coordinator  # the partition moved away and maybe back meanwhile
        if error != ErrorCode.none:
            log.info("state change of %r not made: its record was not replicated (%s)", transactional_id,
                     error.name)
        elif pending.metadata is None:
            self.transactions.pop(transactional_id, None)
        else:
            self.transactions[transactional_id] = pending.metadata
        self._resolve(transactional_id, pending, error)

    def _resolve(self, transactional_id: str, pending: PendingTransition, error: ErrorCode) -> None:
        if not pending.outcome.done():
            pending.outcome.set_result(error)
        if error == ErrorCode.none and pending.then is not None and pending.metadata is not None:
            pending.then(pending.metadata)

    def _transition(self, metadata: TransactionMetadata, state: TransactionState,
                    then: Callable[[TransactionMetadata], None] | None = None, **changes: object
                    ) -> TransactionMetadata:
        """Log the new state; it is the state once replicated. Returns the new state."""
        updated = TransactionMetadata(
            metadata.transactional_id, metadata.producer_id, metadata.producer_epoch, metadata.timeout_ms,
            state, set(metadata.partitions), self.clock.wall_ms(), metadata.start_ms, metadata.previous_producer_id,
            metadata.next_producer_id, metadata.client_transaction_version,
        )
        for name, value in changes.items():
            setattr(updated, name, value)
        self._append_transaction_to_log(updated.transactional_id, updated, then)
        return updated

    # --- requests -------------------------------------------------------------------------

    def init_producer_id(self, transactional_id: str, timeout_ms: int, given_pid: int, given_epoch: int
                         ) -> tuple[int, int]:
        if timeout_ms <= 0 or timeout_ms > self.max_timeout_ms:
            raise KafkaError(ErrorCode.invalid_transaction_timeout,
                             f"transaction timeout {timeout_ms} is outside (0, transaction.max.timeout.ms]")
        self._check_owner(transactional_id)
        self._check_not_pending(transactional_id)  # Kafka checks this first here
        metadata = self.transactions.get(transactional_id)
        if metadata is None:
            pid = self.allocator.allocate()
            now = self.clock.wall_ms()
            self._append_transaction_to_log(
                transactional_id, TransactionMetadata(transactional_id, pid, 0, timeout_ms, S.EMPTY, set(), now, -1))
            return pid, 0
        if given_pid >= 0 and (given_pid, given_epoch) != (metadata.producer_id, metadata.producer_epoch):
            raise KafkaError(ErrorCode.producer_fenced,
                             "There is a newer producer with the same transactionalId which fences the current one.")
        if metadata.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
            raise KafkaError(ErrorCode.concurrent_transactions, "a transaction is being completed")
        if metadata.state == S.ONGOING:
            # A new session fences the old one: bump the epoch and abort what it left open;
            # the client retries (CONCURRENT_TRANSACTIONS) until the abort is complete (as Kafka).
            self._abort_with_bump(metadata)
            raise KafkaError(ErrorCode.concurrent_transactions, "aborting the open transaction")
        pid, epoch = metadata.producer_id, metadata.producer_epoch + 1
        if epoch >= MAX_EPOCH:
            pid, epoch = self.allocator.allocate(), 0
        self._transition(metadata, S.EMPTY, producer_id=pid, producer_epoch=epoch, timeout_ms=timeout_ms,
                         partitions=set(), start_ms=-1)
        return pid, epoch

    def _checked(self, transactional_id: str, producer_id: int, producer_epoch: int,
                 verify_only: bool = False) -> TransactionMetadata:
        self._check_owner(transactional_id)
        metadata = self.transactions.get(transactional_id)
        if metadata is None or metadata.producer_id != producer_id:
            raise KafkaError(ErrorCode.invalid_producer_id_mapping,
                             "The producer attempted to use a producer id which is not currently assigned to "
                             "its transactional id.")
        if metadata.producer_epoch != producer_epoch:
            raise KafkaError(ErrorCode.producer_fenced,
                             "There is a newer producer with the same transactionalId which fences the current one.")
        if not verify_only:  # Kafka's verification does not look at the pending state
            self._check_not_pending(transactional_id)
        if metadata.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
            raise KafkaError(ErrorCode.concurrent_transactions, "a transaction is being completed")
        return metadata

    def add_partitions(self, transactional_id: str, producer_id: int, producer_epoch: int,
                       partitions: list[tuple[str, int]], verify_only: bool = False
                       ) -> dict[tuple[str, int], ErrorCode]:
        """AddPartitionsToTxn; an error for the whole request raises KafkaError."""
        metadata = self._checked(transactional_id, producer_id, producer_epoch, verify_only)
        unknown = [tp for tp in partitions if not self._exists(tp)]
        if unknown:
            return {tp: ErrorCode.unknown_topic_or_partition if tp in unknown else ErrorCode.operation_not_attempted
                    for tp in partitions}
        if verify_only:
            # Kafka's handleVerifyPartitionsInTransaction: a partition outside the transaction
            # is TRANSACTION_ABORTABLE (the leader maps it for older Produce versions).
            return {tp: ErrorCode.none if tp in metadata.partitions else ErrorCode.transaction_abortable
                    for tp in partitions}
        new = set(partitions) - metadata.partitions
        if new or metadata.state != S.ONGOING:
            start = metadata.start_ms if metadata.state == S.ONGOING else self.clock.wall_ms()
            self._transition(metadata, S.ONGOING, partitions=metadata.partitions | set(partitions), start_ms=start)
        return {tp: ErrorCode.none for tp in partitions}

    def verify_or_add_for_produce(self, transactional_id: str, producer_id: int, producer_epoch: int,
                                  partitions: list[tuple[str, int]], add: bool) -> dict[tuple[str, int], ErrorCode]:
        """KIP-890: a leader asks before the first transactional batch of a producer on its
        partitions (one question for all partitions of a produce request).

        ``add`` (Produce v12+) adds the partitions to the transaction like
        AddPartitionsToTxn; otherwise they are only verified. The errors are the coordinator's,
        as Kafka's AddPartitionsToTxnManager hands them to the leader (PRODUCER_FENCED becomes
        INVALID_PRODUCER_EPOCH, which producers expect here).
        """
        try:
            errors = self.add_partitions(transactional_id, producer_id, producer_epoch, partitions, not add)
        except KafkaError as exc:
            errors = dict.fromkeys(partitions, exc.code)
        return {tp: ErrorCode.invalid_producer_epoch if error == ErrorCode.producer_fenced else error
                for tp, error in errors.items()}

    def _exists(self, tp: tuple[str, int]) -> bool:
        info = self.controller.topics.get(tp[0])
        return info is not None and 0 <= tp[1] < info.partitions

    def add_offsets(self, transactional_id: str, producer_id: int, producer_epoch: int, group: str) -> None:
        self._checked(transactional_id, producer_id, producer_epoch)
        self.offset_store.ensure_topic()
        tp = (CONSUMER_OFFSETS_TOPIC, self.offset_store.partition_for(group))
        errors = self.add_partitions(transactional_id, producer_id, producer_epoch, [tp])
        if errors[tp] != ErrorCode.none:
            raise KafkaError(errors[tp])

    def end_txn(self, transactional_id: str, producer_id: int, producer_epoch: int, commit: bool,
                transaction_version: int = 1) -> tuple[int, int]:
        """EndTxn; the producer id and epoch the client continues with. Transaction version 2
        (EndTxn v5+) bumps the epoch on every commit and abort."""
        if transaction_version >= 2:
            return self._end_txn_v2(transactional_id, producer_id, producer_epoch, commit)
        self._check_owner(transactional_id)
        metadata = self.transactions.get(transactional_id)
        if metadata is None or metadata.producer_id != producer_id:
            raise KafkaError(ErrorCode.invalid_producer_id_mapping)
        if metadata.producer_epoch != producer_epoch:
            raise KafkaError(ErrorCode.producer_fenced,
                             "There is a newer producer with the same transactionalId which fences the current one.")
        self._check_not_pending(transactional_id)
        if metadata.state == S.ONGOING:
            self._transition(metadata, S.PREPARE_COMMIT if commit else S.PREPARE_ABORT,
                             then=self._write_markers_and_complete)
        elif metadata.state == (S.COMPLETE_COMMIT if commit else S.COMPLETE_ABORT):
            pass  # a retry of the EndTxn that did it
        elif metadata.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
            if metadata.state != (S.PREPARE_COMMIT if commit else S.PREPARE_ABORT):
                raise KafkaError(ErrorCode.invalid_txn_state,
                                 f"cannot {'commit' if commit else 'abort'} in state {metadata.state.display}")
            # A retry while the markers are on their way (Kafka: the client retries).
            raise KafkaError(ErrorCode.concurrent_transactions, "a transaction is being completed")
        elif metadata.state == S.EMPTY and not commit:
            pass  # aborting nothing: nothing to do
        else:
            raise KafkaError(ErrorCode.invalid_txn_state,
                             f"cannot {'commit' if commit else 'abort'} in state {metadata.state.display}")
        return producer_id, producer_epoch

    def _end_txn_v2(self, transactional_id: str, producer_id: int, producer_epoch: int, commit: bool
                    ) -> tuple[int, int]:
        """Kafka's TV2 endTransaction: a retry carries the epoch before the bump (or, after an
        epoch overflow, the previous producer id and the last epoch); the same epoch in a
        Complete state is the next EndTxn. Aborting with no partitions still bumps the epoch."""
        self._check_owner(transactional_id)
        metadata = self.transactions.get(transactional_id)
        if metadata is None:
            raise KafkaError(ErrorCode.invalid_producer_id_mapping)
        state = metadata.state
        retry_on_overflow = (metadata.previous_producer_id == producer_id and producer_epoch == MAX_EPOCH - 1
                             and metadata.producer_epoch == 0)
        retry_on_bump = metadata.producer_epoch == producer_epoch + 1
        if state in (S.COMPLETE_COMMIT, S.COMPLETE_ABORT):
            valid_epoch = retry_on_bump or retry_on_overflow or producer_epoch == metadata.producer_epoch
        elif state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
            valid_epoch = retry_on_bump  # the prepared state holds the bumped epoch: only a retry
        else:
            valid_epoch = producer_epoch == metadata.producer_epoch
        if metadata.producer_id != producer_id and not retry_on_overflow:
            raise KafkaError(ErrorCode.invalid_producer_id_mapping)
        if not valid_epoch:
            raise KafkaError(ErrorCode.producer_fenced,
                             "There is a newer producer with the same transactionalId which fences the current one.")
        self._check_not_pending(transactional_id)
        if state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
            # Markers on their way (Kafka: CONCURRENT_TRANSACTIONS, the client retries).
            if state != (S.PREPARE_COMMIT if commit else S.PREPARE_ABORT):
                raise KafkaError(ErrorCode.invalid_txn_state,
                                 f"cannot {'commit' if commit else 'abort'} in state {state.display}")
            raise KafkaError(ErrorCode.concurrent_transactions, "a transaction is being completed")
        retry = retry_on_bump or retry_on_overflow
        done = S.COMPLETE_COMMIT if commit else S.COMPLETE_ABORT
        current = metadata
        if state == S.ONGOING:
            current = self._complete_with_bump(metadata, commit)
        elif state == done and retry:
            pass  # a retry of the EndTxn that did it: NONE with the current id and epoch
        elif not commit and (state == S.EMPTY or (state in (S.COMPLETE_COMMIT, S.COMPLETE_ABORT) and not retry)):
            current = self._complete_with_bump(metadata, False)
        else:
            raise KafkaError(ErrorCode.invalid_txn_state,
                             f"cannot {'commit' if commit else 'abort'} in state {state.display}")
        if current.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT) and current.next_producer_id >= 0:
            return current.next_producer_id, 0  # markers pending: the id it continues with after them
        return current.producer_id, current.producer_epoch

    def _complete_with_bump(self, metadata: TransactionMetadata, commit: bool) -> TransactionMetadata:
        """PrepareCommit/PrepareAbort with epoch + 1 (markers carry it), then Complete; an
        exhausted epoch continues with a new producer id at epoch 0."""
        next_pid = self.allocator.allocate() if metadata.producer_epoch >= MAX_EPOCH - 1 else -1
        start = metadata.start_ms if metadata.state == S.ONGOING else self.clock.wall_ms()
        return self._transition(metadata, S.PREPARE_COMMIT if commit else S.PREPARE_ABORT,
                                then=self._write_markers_and_complete, producer_epoch=metadata.producer_epoch + 1,
                                next_producer_id=next_pid, client_transaction_version=2, start_ms=start)

    def _abort_with_bump(self, metadata: TransactionMetadata) -> None:
        epoch = metadata.producer_epoch + 1 if metadata.producer_epoch + 1 < MAX_EPOCH else metadata.producer_epoch
        self._transition(metadata, S.PREPARE_ABORT, then=self._write_markers_and_complete, producer_epoch=epoch)

    def _write_markers_and_complete(self, metadata: TransactionMetadata) -> None:
        self.marker_channel.send_markers(self, metadata)  # complete() follows the markers

    def complete(self, metadata: TransactionMetadata) -> None:
        """Every marker of the prepared ``metadata`` is written: log CompleteCommit/CompleteAbort
        (the caller awaits ``replicated`` and retries a COORDINATOR_NOT_AVAILABLE, as Kafka's
        marker channel keeps retrying that append)."""
        commit = metadata.state == S.PREPARE_COMMIT
        changes: dict[str, object] = {}
        if metadata.client_transaction_version >= 2:
            changes["previous_producer_id"] = metadata.producer_id
            if metadata.next_producer_id >= 0:
                changes.update(producer_id=metadata.next_producer_id, producer_epoch=0, next_producer_id=-1)
        self._transition(metadata, S.COMPLETE_COMMIT if commit else S.COMPLETE_ABORT, partitions=set(), **changes)

    def abort_timed_out(self, now_ms: int) -> int:
        """Abort (with an epoch bump that fences the producer) transactions past their timeout."""
        expired = [m for m in self.transactions.values()
                   if m.state == S.ONGOING and m.start_ms >= 0 and now_ms - m.start_ms > m.timeout_ms
                   and m.transactional_id not in self.pending]
        for metadata in expired:
            log.info("aborting transaction of %r: timed out after %d ms",
                     metadata.transactional_id, metadata.timeout_ms)
            try:
                self._abort_with_bump(metadata)
            except KafkaError as exc:  # leadership moved; the new coordinator aborts it
                log.info("cannot abort the transaction of %r here: %s", metadata.transactional_id, exc.code.name)
        return len(expired)

    def remove_expired_transactional_ids(self, now_ms: int, expiration_ms: int) -> list[str]:
        """Forget transactional ids (Kafka's TransactionStateManager.removeExpiredTransactionalIds):
        an id whose state is Empty, CompleteCommit or CompleteAbort and whose last state change
        is at least ``expiration_ms`` old gets a tombstone in ``__transaction_state`` and leaves
        the cache once that is replicated. Ongoing and Prepare* ids never expire (an ongoing one
        times out first), nor ids with a pending change. Returns the ids whose tombstones were
        written. A later InitProducerId for the id starts afresh with a new producer id at epoch 0."""
        expired = [m for m in self.transactions.values()
                   if m.state in EXPIRABLE and m.last_update_ms <= now_ms - expiration_ms
                   and m.transactional_id not in self.pending]
        removed: list[str] = []
        for metadata in expired:
            try:
                self._append_transaction_to_log(metadata.transactional_id, None)
            except KafkaError as exc:
                log.info("cannot expire %r here: %s", metadata.transactional_id, exc.code.name)
                continue
            removed.append(metadata.transactional_id)
            log.info("transactional id %r expired: idle since %d", metadata.transactional_id, metadata.last_update_ms)
        return removed


EXPIRABLE = (S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT)
