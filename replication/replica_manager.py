"""ReplicaManager: the partitions this broker hosts, and produce/fetch across them.

Handlers call it with topic-partitions; it finds the Partition, turns ``KafkaError`` into
per-partition error codes at one boundary, and runs Kafka's delayed fetch: read once, and if
fewer than ``min_bytes`` are ready, wait on the partitions' futures (one timer for the whole
request) and read again.
"""

from __future__ import annotations

import asyncio
import base64
import logging
import time
import uuid
from dataclasses import dataclass, field

from kbroker.protocol.errors import ErrorCode, InvalidRecordError, KafkaError
from kbroker.storage.log import FetchSlice
from kbroker.storage.log_manager import LogManager
from kbroker.storage.transaction_index import AbortedTxn

from .partition import Partition

log = logging.getLogger(__name__)

READ_UNCOMMITTED = 0
READ_COMMITTED = 1


@dataclass(slots=True)
class ProduceResult:
    error: ErrorCode = ErrorCode.none
    base_offset: int = -1
    log_append_time: int = -1
    log_start_offset: int = -1
    error_message: str | None = None
    record_errors: list[tuple[int, str | None]] = field(default_factory=list)


@dataclass(slots=True)
class FetchRequestPartition:
    topic: str
    partition: int
    fetch_offset: int
    max_bytes: int
    current_leader_epoch: int = -1


@dataclass(slots=True)
class FetchResult:
    error: ErrorCode = ErrorCode.none
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1
    records: FetchSlice | None = None
    aborted_transactions: list[AbortedTxn] = field(default_factory=list)  # read_committed only


class ReplicaManager:
    def __init__(self, log_manager: LogManager, broker_id: int) -> None:
        self.log_manager = log_manager
        self.broker_id = broker_id
        self.partitions: dict[tuple[str, int], Partition] = {}

    # --- partition lifecycle (driven by the controller) -----------------------------------

    def make_leader(self, topic: str, index: int, topic_id: uuid.UUID) -> Partition:
        partition = self.partitions.get((topic, index))
        if partition is None:
            plog = self.log_manager.get(topic, index) or self.log_manager.create(topic, index, _id_text(topic_id))
            partition = Partition(topic, index, topic_id, plog, self.broker_id)
            self.partitions[(topic, index)] = partition
        return partition

    def remove_partition(self, topic: str, index: int) -> None:
        partition = self.partitions.pop((topic, index), None)
        if partition is not None:
            partition.wake_waiters()
        self.log_manager.delete(topic, index)

    def get_partition(self, topic: str, index: int) -> Partition:
        partition = self.partitions.get((topic, index))
        if partition is None:
            raise KafkaError(ErrorCode.unknown_topic_or_partition, "This server does not host this topic-partition.")
        return partition

    # --- produce --------------------------------------------------------------------------

    def append_records(self, topic: str, index: int, records: memoryview, required_acks: int) -> ProduceResult:
        try:
            partition = self.get_partition(topic, index)
            info = partition.append_as_leader(records, required_acks, int(time.time() * 1000))
        except InvalidRecordError as exc:
            return ProduceResult(exc.code, error_message=exc.message, record_errors=exc.record_errors)
        except KafkaError as exc:
            # As Kafka: only record validation errors (above) carry a message; for the rest
            # (MESSAGE_TOO_LARGE, NOT_ENOUGH_REPLICAS, unknown partition, ...) the error message
            # is null and clients show the error code's standard text.
            log.debug("append to %s-%d refused: %s", topic, index, exc.message)
            return ProduceResult(exc.code)
        except OSError as exc:
            log.error("append to %s-%d failed: %s", topic, index, exc)
            return ProduceResult(ErrorCode.kafka_storage_error)
        return ProduceResult(ErrorCode.none, info.first_offset, info.log_append_time, info.log_start_offset)

    # --- fetch ----------------------------------------------------------------------------

    async def fetch(
        self,
        requests: list[FetchRequestPartition],
        max_wait_ms: int,
        min_bytes: int,
        max_bytes: int,
        isolation_level: int,
    ) -> list[FetchResult]:
        """Kafka's delayed fetch: answer now if ``min_bytes`` are ready, else wait and re-read."""
        results, ready = self._read_all(requests, max_bytes, isolation_level)
        if ready >= min_bytes or max_wait_ms <= 0 or any(r.error for r in results):
            return results
        waiters = [
            self.partitions[(r.topic, r.partition)].wait_for_data()
            for r in requests
            if (r.topic, r.partition) in self.partitions
        ]
        if not waiters:
            return results
        deadline = time.monotonic() + max_wait_ms / 1000
        pending = set(waiters)
        while pending:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            _done, pending = await asyncio.wait(pending, timeout=remaining, return_when=asyncio.FIRST_COMPLETED)
            if not _done:
                break
            results, ready = self._read_all(requests, max_bytes, isolation_level)
            if ready >= min_bytes or any(r.error for r in results):
                break
            pending |= {
                self.partitions[(r.topic, r.partition)].wait_for_data()
                for r in requests
                if (r.topic, r.partition) in self.partitions
            }
        for waiter in waiters:
            waiter.cancel()
        for waiter in pending:
            waiter.cancel()
        return self._read_all(requests, max_bytes, isolation_level)[0]

    def _read_all(
        self, requests: list[FetchRequestPartition], max_bytes: int, isolation_level: int
    ) -> tuple[list[FetchResult], int]:
        results: list[FetchResult] = []
        remaining = max_bytes
        total = 0
        for request in requests:
            result = self._read_one(request, remaining, isolation_level, min_one_batch=total == 0)
            if result.records is not None:
                total += result.records.length
                remaining = max(0, remaining - result.records.length)
            results.append(result)
        return results, total

    def _read_one(
        self, request: FetchRequestPartition, remaining: int, isolation_level: int, min_one_batch: bool
    ) -> FetchResult:
        try:
            partition = self.get_partition(request.topic, request.partition)
        except KafkaError as exc:
            return FetchResult(exc.code)
        result = FetchResult(
            high_watermark=partition.high_watermark,
            last_stable_offset=partition.last_stable_offset,
            log_start_offset=partition.log_start_offset,
        )
        result.error = partition.leader_epoch_error(request.current_leader_epoch)
        if result.error:
            return result
        bound = partition.last_stable_offset if isolation_level == READ_COMMITTED else partition.high_watermark
        limit = min(request.max_bytes, remaining)
        try:
            result.records = partition.read(request.fetch_offset, limit, bound, min_one_batch)
        except KafkaError as exc:
            result.error = exc.code
        if result.records is not None and isolation_level == READ_COMMITTED:
            result.aborted_transactions = partition.log.collect_aborted_txns(request.fetch_offset, bound)
        return result


def _id_text(topic_id: uuid.UUID) -> str:
    """Kafka's text form of a topic id: URL-safe base64 without padding."""
    return base64.urlsafe_b64encode(topic_id.bytes).rstrip(b"=").decode()
