"""TransactionCoordinator: transactional ids' producer ids, epochs and transaction states.

Every state change is appended to ``__transaction_state`` (created by FindCoordinator at first
use, like Kafka) before it takes effect or is answered. Ongoing transactions past their timeout
are aborted with a bumped epoch, which fences the old producer. Transactional ids with no
transaction in progress and no state change for transactional.id.expiration.ms are forgotten
with a tombstone.

A transactional id is coordinated by the leader of its ``__transaction_state`` partition: the
coordinator loads a partition's ids when this broker becomes its leader (finishing transactions
caught in Prepare*: a crash between PrepareCommit/PrepareAbort and the Complete record), drops
them when it stops leading, and answers NOT_COORDINATOR for ids of partitions it does not lead. Request handlers
answer only once the state record is replicated (``replicated``). Markers are then written
asynchronously by the TransactionMarkerChannelManager (Kafka's flow: EndTxn is answered after
PrepareCommit/PrepareAbort is replicated; requests meanwhile get CONCURRENT_TRANSACTIONS), and
the Complete record follows once every partition's leader has the marker on its ISR.
Deviation: the in-memory state changes when the record is appended, not when it is replicated
(Kafka keeps a pending state); a replication failure is answered with NOT_COORDINATOR /
COORDINATOR_NOT_AVAILABLE and the client retries, and a lost leadership unloads the state.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Protocol

from kbroker.coordinator_errors import coordinator_write_error
from kbroker.groups.offset_store import CONSUMER_OFFSETS_TOPIC, OffsetStore
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

REPLICATION_TIMEOUT_MS = 30000


class MarkerChannel(Protocol):
    """Writes a prepared transaction's markers, then calls ``complete``."""

    def send_markers(self, coordinator: TransactionCoordinator, metadata: TransactionMetadata) -> None: ...


MAX_EPOCH = 32767
S = TransactionState


class TransactionCoordinator:
    """The transactional ids this broker coordinates (those of the state partitions it leads).

    State machine (Kafka's; with transaction version 0/1 the epoch stays fixed within a producer
    session, with version 2 — EndTxn v5+ — every commit/abort bumps it and the markers carry
    the bumped epoch, which fences late writes of the ended transaction)::

        Empty/CompleteCommit/CompleteAbort --AddPartitions/AddOffsets--> Ongoing
        Ongoing --EndTxn(commit)--> PrepareCommit --markers--> CompleteCommit
        Ongoing --EndTxn(abort) / timeout / InitProducerId--> PrepareAbort --markers--> CompleteAbort

    Invariants: ``partitions`` is empty unless Ongoing or Prepare*; a transactional id's
    producer id only changes when its epoch would overflow; every change is logged first.
    Prepare* never survives a request: markers are written synchronously on the event loop.
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
        # The __transaction_state partitions led here -> their coordinator epoch (the
        # partition's leader epoch, as Kafka's); nothing until elected leader of one.
        self.owned: dict[int, int] = {}
        self.marker_channel = marker_channel

    # --- which ids are coordinated here ---------------------------------------------------

    def owns(self, transactional_id: str) -> bool:
        return partition_for(transactional_id, self.partitions_count()) in self.owned

    def _check_owner(self, transactional_id: str) -> None:
        if not self.owns(transactional_id):
            raise KafkaError(ErrorCode.not_coordinator, "This is not the correct coordinator.")

    def coordinator_epoch(self, transactional_id: str) -> int:
        return self.owned.get(partition_for(transactional_id, self.partitions_count()), -1)

    def on_leadership(self, index: int, leader: bool) -> None:
        """This broker became (or stopped being) the leader of ``__transaction_state`` partition
        ``index``: load its transactional ids and finish their Prepare* transactions (Kafka's
        onElection), or drop them (onResignation; marker sending for them stops)."""
        if leader:
            partition = self.replica_manager.partitions.get((TRANSACTION_STATE_TOPIC, index))
            if partition is None:
                return
            count = self.partitions_count()
            for transactional_id in [t for t in self.transactions if partition_for(t, count) == index]:
                del self.transactions[transactional_id]
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
        elif index in self.owned:
            del self.owned[index]
            count = self.partitions_count()
            for transactional_id in [t for t in self.transactions if partition_for(t, count) == index]:
                del self.transactions[transactional_id]
            log.info("no longer coordinating the transactional ids of %s-%d", TRANSACTION_STATE_TOPIC, index)

    async def replicated(self, transactional_id: str, timeout_ms: int = REPLICATION_TIMEOUT_MS) -> None:
        """Return once every state record of the id's partition is on the ISR. Raises
        NOT_COORDINATOR if leadership moved meanwhile, COORDINATOR_NOT_AVAILABLE if the ISR is
        short or time runs out (Kafka's mapping of append errors for the coordinator)."""
        index = partition_for(transactional_id, self.partitions_count())
        partition = self.replica_manager.partitions.get((TRANSACTION_STATE_TOPIC, index))
        if partition is None or index not in self.owned:
            raise KafkaError(ErrorCode.not_coordinator)
        try:
            error = await asyncio.wait_for(partition.wait_for_commit(partition.log_end_offset), timeout_ms / 1000)
        except TimeoutError:
            raise KafkaError(ErrorCode.coordinator_not_available) from None
        if error == ErrorCode.not_leader_or_follower:
            raise KafkaError(ErrorCode.not_coordinator)
        if error != ErrorCode.none:
            raise KafkaError(ErrorCode.coordinator_not_available)

    # --- the state log --------------------------------------------------------------------

    def partitions_count(self) -> int:
        info = self.controller.topics.get(TRANSACTION_STATE_TOPIC)
        return info.partitions if info is not None else self.num_partitions

    def ensure_topic(self) -> None:
        """FindCoordinator creates the topic; a write before it exists waits for it (retriable)."""
        if TRANSACTION_STATE_TOPIC not in self.controller.topics:
            raise KafkaError(ErrorCode.coordinator_not_available, f"{TRANSACTION_STATE_TOPIC} does not exist yet")

    def _persist(self, metadata: TransactionMetadata) -> None:
        self.ensure_topic()
        now = self.clock.wall_ms()
        index = partition_for(metadata.transactional_id, self.partitions_count())
        self._append_state(index, record_batch(metadata, now), now)
        self.transactions[metadata.transactional_id] = metadata

    def _append_state(self, index: int, batch: memoryview, now: int) -> None:
        if index not in self.owned:
            raise KafkaError(ErrorCode.not_coordinator, "This is not the correct coordinator.")
        try:
            partition = self.replica_manager.get_partition(TRANSACTION_STATE_TOPIC, index)
            partition.append_as_leader(batch, -1, now)
        except OSError as exc:  # its storage failed: nothing of the new state is kept
            raise KafkaError(coordinator_write_error(exc), f"{TRANSACTION_STATE_TOPIC}-{index}: {exc}") from exc
        except KafkaError as exc:
            # Kafka's coordinator maps append errors: leadership gone -> NOT_COORDINATOR, else
            # COORDINATOR_NOT_AVAILABLE (e.g. the ISR under min.insync.replicas).
            lost = exc.code in (ErrorCode.not_leader_or_follower, ErrorCode.unknown_topic_or_partition)
            raise KafkaError(ErrorCode.not_coordinator if lost else ErrorCode.coordinator_not_available,
                             exc.message) from None

    def _transition(self, metadata: TransactionMetadata, state: TransactionState, **changes: object) -> None:
        """Log the new state first; only then is it the state."""
        updated = TransactionMetadata(
            metadata.transactional_id, metadata.producer_id, metadata.producer_epoch, metadata.timeout_ms,
            state, set(metadata.partitions), self.clock.wall_ms(), metadata.start_ms, metadata.previous_producer_id,
            metadata.next_producer_id, metadata.client_transaction_version,
        )
        for name, value in changes.items():
            setattr(updated, name, value)
        self._persist(updated)

    # --- requests -------------------------------------------------------------------------

    def init_producer_id(self, transactional_id: str, timeout_ms: int, given_pid: int, given_epoch: int
                         ) -> tuple[int, int]:
        if timeout_ms <= 0 or timeout_ms > self.max_timeout_ms:
            raise KafkaError(ErrorCode.invalid_transaction_timeout,
                             f"transaction timeout {timeout_ms} is outside (0, transaction.max.timeout.ms]")
        self._check_owner(transactional_id)
        metadata = self.transactions.get(transactional_id)
        if metadata is None:
            pid = self.allocator.allocate()
            now = self.clock.wall_ms()
            self._persist(TransactionMetadata(transactional_id, pid, 0, timeout_ms, S.EMPTY, set(), now, -1))
            return pid, 0
        if given_pid >= 0 and (given_pid, given_epoch) != (metadata.producer_id, metadata.producer_epoch):
            raise KafkaError(ErrorCode.producer_fenced,
                             "There is a newer producer with the same transactionalId which fences the current one.")
        if metadata.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
            raise KafkaError(ErrorCode.concurrent_transactions, "a transaction is being completed")
        if metadata.state == S.ONGOING:
            # A new session fences the old one: bump the epoch and abort what it left open.
            self._abort_with_bump(metadata)
            metadata = self.transactions[transactional_id]
            if metadata.state == S.PREPARE_ABORT:
                # Cluster mode: the markers are on their way; the client retries (as Kafka).
                raise KafkaError(ErrorCode.concurrent_transactions, "aborting the open transaction")
        pid, epoch = metadata.producer_id, metadata.producer_epoch + 1
        if epoch >= MAX_EPOCH:
            pid, epoch = self.allocator.allocate(), 0
        self._transition(metadata, S.EMPTY, producer_id=pid, producer_epoch=epoch, timeout_ms=timeout_ms,
                         partitions=set(), start_ms=-1)
        return pid, epoch

    def _checked(self, transactional_id: str, producer_id: int, producer_epoch: int) -> TransactionMetadata:
        self._check_owner(transactional_id)
        metadata = self.transactions.get(transactional_id)
        if metadata is None or metadata.producer_id != producer_id:
            raise KafkaError(ErrorCode.invalid_producer_id_mapping,
                             "The producer attempted to use a producer id which is not currently assigned to "
                             "its transactional id.")
        if metadata.producer_epoch != producer_epoch:
            raise KafkaError(ErrorCode.producer_fenced,
                             "There is a newer producer with the same transactionalId which fences the current one.")
        if metadata.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
            raise KafkaError(ErrorCode.concurrent_transactions, "a transaction is being completed")
        return metadata

    def add_partitions(self, transactional_id: str, producer_id: int, producer_epoch: int,
                       partitions: list[tuple[str, int]], verify_only: bool = False
                       ) -> dict[tuple[str, int], ErrorCode]:
        """AddPartitionsToTxn; an error for the whole request raises KafkaError."""
        metadata = self._checked(transactional_id, producer_id, producer_epoch)
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
                                  tp: tuple[str, int], add: bool) -> ErrorCode:
        """KIP-890: a leader asks before the first transactional batch of a producer on a partition.

        ``add`` (Produce v12+) adds the partition to the transaction like
        AddPartitionsToTxn; otherwise it is only verified. The error is the coordinator's, as
        Kafka's AddPartitionsToTxnManager hands it to the leader (PRODUCER_FENCED becomes
        INVALID_PRODUCER_EPOCH, which producers expect here).
        """
        try:
            self._check_owner(transactional_id)
            if transactional_id not in self.transactions:
                raise KafkaError(ErrorCode.invalid_producer_id_mapping)
            error = self.add_partitions(transactional_id, producer_id, producer_epoch, [tp], not add)[tp]
        except KafkaError as exc:
            error = exc.code
        return ErrorCode.invalid_producer_epoch if error == ErrorCode.producer_fenced else error

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

    def check_txn_offset_commit(self, transactional_id: str, producer_id: int, producer_epoch: int, group: str,
                                abortable: bool = False) -> None:
        """TxnOffsetCommit is accepted only inside an ongoing transaction of this producer that
        holds the group's offsets partition (KIP-890 verification); else INVALID_TXN_STATE, or
        TRANSACTION_ABORTABLE for clients that know it (TxnOffsetCommit v4+)."""
        metadata = self._checked(transactional_id, producer_id, producer_epoch)
        tp = (CONSUMER_OFFSETS_TOPIC, self.offset_store.partition_for(group))
        if metadata.state != S.ONGOING or tp not in metadata.partitions:
            raise KafkaError(ErrorCode.transaction_abortable if abortable else ErrorCode.invalid_txn_state,
                             "the group's offsets partition is not in the transaction (AddOffsetsToTxn first)")

    def end_txn(self, transactional_id: str, producer_id: int, producer_epoch: int, commit: bool,
                transaction_version: int = 1) -> tuple[int, int]:
        """EndTxn; the producer id and epoch the client continues with. Transaction version 2
        (EndTxn v5+) bumps the epoch on every commit and abort."""
        if transaction_version >= 2:
            return self._end_txn_v2(transactional_id, producer_id, producer_epoch, commit)
        metadata = self._checked(transactional_id, producer_id, producer_epoch)
        if metadata.state == S.ONGOING:
            self._transition(metadata, S.PREPARE_COMMIT if commit else S.PREPARE_ABORT)
            self._write_markers_and_complete(self.transactions[transactional_id])
        elif metadata.state == (S.COMPLETE_COMMIT if commit else S.COMPLETE_ABORT):
            pass  # a retry of the EndTxn that did it
        elif metadata.state == (S.PREPARE_COMMIT if commit else S.PREPARE_ABORT):
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
        if state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
            # Markers on their way (Kafka: CONCURRENT_TRANSACTIONS, the client retries).
            if state != (S.PREPARE_COMMIT if commit else S.PREPARE_ABORT):
                raise KafkaError(ErrorCode.invalid_txn_state,
                                 f"cannot {'commit' if commit else 'abort'} in state {state.display}")
            raise KafkaError(ErrorCode.concurrent_transactions, "a transaction is being completed")
        retry = retry_on_bump or retry_on_overflow
        done = S.COMPLETE_COMMIT if commit else S.COMPLETE_ABORT
        if state == S.ONGOING:
            self._complete_with_bump(metadata, commit)
        elif state == done and retry:
            pass  # a retry of the EndTxn that did it: NONE with the current id and epoch
        elif not commit and (state == S.EMPTY or (state in (S.COMPLETE_COMMIT, S.COMPLETE_ABORT) and not retry)):
            self._complete_with_bump(metadata, False)
        else:
            raise KafkaError(ErrorCode.invalid_txn_state,
                             f"cannot {'commit' if commit else 'abort'} in state {state.display}")
        current = self.transactions[transactional_id]
        if current.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT) and current.next_producer_id >= 0:
            return current.next_producer_id, 0  # markers pending: the id it continues with after them
        return current.producer_id, current.producer_epoch

    def _complete_with_bump(self, metadata: TransactionMetadata, commit: bool) -> None:
        """PrepareCommit/PrepareAbort with epoch + 1 (markers carry it), then Complete; an
        exhausted epoch continues with a new producer id at epoch 0."""
        next_pid = self.allocator.allocate() if metadata.producer_epoch >= MAX_EPOCH - 1 else -1
        start = metadata.start_ms if metadata.state == S.ONGOING else self.clock.wall_ms()
        self._transition(metadata, S.PREPARE_COMMIT if commit else S.PREPARE_ABORT,
                         producer_epoch=metadata.producer_epoch + 1, next_producer_id=next_pid,
                         client_transaction_version=2, start_ms=start)
        self._write_markers_and_complete(self.transactions[metadata.transactional_id])

    def _abort_with_bump(self, metadata: TransactionMetadata) -> None:
        epoch = metadata.producer_epoch + 1 if metadata.producer_epoch + 1 < MAX_EPOCH else metadata.producer_epoch
        self._transition(metadata, S.PREPARE_ABORT, producer_epoch=epoch)
        self._write_markers_and_complete(self.transactions[metadata.transactional_id])

    def _write_markers_and_complete(self, metadata: TransactionMetadata) -> None:
        self.marker_channel.send_markers(self, metadata)  # complete() follows the markers

    def complete(self, metadata: TransactionMetadata) -> None:
        """Every marker of the prepared ``metadata`` is written: log CompleteCommit/CompleteAbort."""
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
                   if m.state == S.ONGOING and m.start_ms >= 0 and now_ms - m.start_ms > m.timeout_ms]
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
        the cache. Ongoing and Prepare* ids never expire (an ongoing one times out first).
        A later InitProducerId for the id starts afresh with a new producer id at epoch 0."""
        expired = [m for m in self.transactions.values()
                   if m.state in EXPIRABLE and m.last_update_ms <= now_ms - expiration_ms]
        removed: list[str] = []
        for metadata in expired:
            self.ensure_topic()
            index = partition_for(metadata.transactional_id, self.partitions_count())
            try:
                self._append_state(index, tombstone_batch(metadata.transactional_id, now_ms), now_ms)
            except KafkaError as exc:
                log.info("cannot expire %r here: %s", metadata.transactional_id, exc.code.name)
                continue
            del self.transactions[metadata.transactional_id]
            removed.append(metadata.transactional_id)
            log.info("transactional id %r expired: idle since %d", metadata.transactional_id, metadata.last_update_ms)
        return removed


EXPIRABLE = (S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT)
