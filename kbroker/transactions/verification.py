"""AddPartitionsToTxnManager: a partition leader asks the transaction coordinator (KIP-890).

Before the first transactional batch of a producer epoch on a partition (and for TxnOffsetCommit
on the group coordinator) the leader asks the coordinator of the transactional id whether the
partitions are in the ongoing transaction (``add=False``: AddPartitionsToTxn v4+ with
verify_only) or has them added (``add=True``, transaction version 2: Produce v12+ and
TxnOffsetCommit v5+). A produce request asks once for all its partitions that need it (one
AddPartitionsToTxn transaction entry naming them all), as Kafka's ReplicaManager does.
The coordinator is the leader of the id's ``__transaction_state`` partition; when that is
this broker the coordinator is asked in-process, else over the wire.
The answer is the coordinator's error for the partition, as Kafka's manager hands it to the
leader: PRODUCER_FENCED becomes INVALID_PRODUCER_EPOCH, a coordinator that cannot be found
COORDINATOR_NOT_AVAILABLE, a failed link NETWORK_EXCEPTION (the caller maps these for clients).
Nothing is cached here: the partition's own producer state (an open transaction of that epoch)
is what lets later batches skip the question, as in Kafka. ``verification_guard`` /
``ended_during_verification`` are Kafka's VerificationGuard: a marker for the producer written
on the partition while the coordinator was asked ended the transaction the answer was about,
and the write must then be refused (else it would open a transaction no coordinator knows).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from kio.schema.add_partitions_to_txn.v5 import request as add_partitions_v5

from kbroker.protocol.errors import ErrorCode, KafkaError
from kbroker.transactions.transaction_log import TRANSACTION_STATE_TOPIC, partition_for

if TYPE_CHECKING:
    from kbroker.replication.forwarding_controller import ForwardingController
    from kbroker.replication.partition import Partition
    from kbroker.transactions.coordinator import TransactionCoordinator
    from kbroker.transactions.marker_channel import BrokerClients

log = logging.getLogger(__name__)

ADD_PARTITIONS_TO_TXN = 24
REQUEST_TIMEOUT_S = 30.0


def in_transaction(partition: Partition, producer_id: int, producer_epoch: int) -> bool:
    """The producer's transaction of this epoch is open on the partition: nothing to ask."""
    entry = partition.log.producer_state.producers.get(producer_id)
    return entry is not None and entry.current_txn_first_offset >= 0 and entry.producer_epoch == producer_epoch


def verification_guard(partition: Partition, producer_id: int) -> tuple | None:
    """What a marker for the producer changes in its state on the partition, before asking."""
    entry = partition.log.producer_state.producers.get(producer_id)
    if entry is None:
        return None
    return (id(entry), entry.producer_epoch, entry.coordinator_epoch, entry.last_timestamp)


def ended_during_verification(partition: Partition, producer_id: int, guard: tuple | None) -> bool:
    entry = partition.log.producer_state.producers.get(producer_id)
    return entry is not None and entry.current_txn_first_offset < 0 and verification_guard(
        partition, producer_id) != guard


class AddPartitionsToTxnManager:
    def __init__(self, node_id: int, controller: ForwardingController, coordinator: TransactionCoordinator,
                 clients: BrokerClients | None) -> None:
        self.node_id = node_id
        self.controller = controller
        self.coordinator = coordinator
        self.clients = clients  # None: a single node, whose coordinator is always in-process

    async def verify_or_add(self, transactional_id: str, producer_id: int, producer_epoch: int,
                            partitions: list[tuple[str, int]], add: bool) -> dict[tuple[str, int], ErrorCode]:
        """One question for all ``partitions`` (those of one produce request), as Kafka's
        ReplicaManager asks once per request; the error of each partition (NONE: verified)."""
        if self.clients is None or self.coordinator.owns(transactional_id):
            errors = self.coordinator.verify_or_add_for_produce(transactional_id, producer_id, producer_epoch,
                                                                partitions, add)
            if add and all(error == ErrorCode.none for error in errors.values()):
                try:
                    await self.coordinator.replicated(transactional_id)
                except KafkaError as exc:
                    errors = dict.fromkeys(partitions, exc.code)
            return errors
        return await self._ask_coordinator(transactional_id, producer_id, producer_epoch, partitions, add)

    async def _ask_coordinator(self, transactional_id: str, producer_id: int, producer_epoch: int,
                               partitions: list[tuple[str, int]], add: bool) -> dict[tuple[str, int], ErrorCode]:
        assert self.clients is not None
        info = self.controller.topics.get(TRANSACTION_STATE_TOPIC)
        registration = None if info is None else self.controller.partition_registration(
            TRANSACTION_STATE_TOPIC, partition_for(transactional_id, info.partitions))
        client = None if registration is None or registration.leader < 0 else self.clients.get(registration.leader)
        if client is None:
            return dict.fromkeys(partitions, ErrorCode.coordinator_not_available)
        by_topic: dict[str, list[int]] = {}
        for topic, index in partitions:
            by_topic.setdefault(topic, []).append(index)
        m = add_partitions_v5
        request = m.AddPartitionsToTxnRequest(transactions=(m.AddPartitionsToTxnTransaction(
            transactional_id=transactional_id, producer_id=producer_id, producer_epoch=producer_epoch,
            verify_only=not add, topics=tuple(m.AddPartitionsToTxnTopic(name=topic, partitions=tuple(indexes))
                                              for topic, indexes in by_topic.items())),))
        try:
            response = await client.request(ADD_PARTITIONS_TO_TXN, 5, request, timeout_s=REQUEST_TIMEOUT_S)
        except (ConnectionError, TimeoutError) as exc:
            log.info("AddPartitionsToTxn to broker %d failed: %s", registration.leader, exc)
            return dict.fromkeys(partitions, ErrorCode.network_exception)
        if response.error_code != ErrorCode.none:
            return dict.fromkeys(partitions, ErrorCode(response.error_code))
        errors = dict.fromkeys(partitions, ErrorCode.none)
        for result in response.results_by_transaction:
            for topic_result in result.topic_results:
                for p in topic_result.results_by_partition:
                    tp = (topic_result.name, p.partition_index)
                    if tp in errors:
                        error = ErrorCode(p.partition_error_code)
                        errors[tp] = ErrorCode.invalid_producer_epoch if error == ErrorCode.producer_fenced else error
        return errors
