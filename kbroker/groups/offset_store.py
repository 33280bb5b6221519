"""OffsetStore: consumer groups' committed offsets, kept in the ``__consumer_offsets`` topic.

The one place offsets are written and read: TxnOffsetCommit, OffsetCommit, OffsetFetch,
OffsetDelete and DeleteGroups go through it. It is also the one writer of that topic, so the
group coordinator's group metadata and consumer group records are appended here too, and
replayed here into ``loaded_groups`` when this broker comes to lead a partition. The records'
layouts, Kafka's, are in ``protocol/internal_records.py``. A group's offsets live in partition
``abs(javaHashCode(group)) % offsets.topic.num.partitions``, as in Kafka.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING
from uuid import UUID

from kbroker.metrics.topic_metrics import BROKER_TOPIC_METRICS
from kbroker.protocol.errors import ErrorCode, KafkaError
from kbroker.protocol.internal_records import (
    GroupMetadataValue,
    OffsetCommitKey,
    OffsetCommitValue,
    decode_group_metadata_key,
    decode_group_metadata_value,
    decode_offset_commit_key,
    decode_offset_commit_value,
    encode_group_metadata_key,
    encode_group_metadata_value,
    encode_offset_commit_key,
    encode_offset_commit_value,
)
from kbroker.protocol.record_builder import build_batch
from kbroker.protocol.records import TRANSACTIONAL_FLAG, control_record_type, iter_records, read_header
from kbroker.storage.clock import SYSTEM_CLOCK, Clock
from kbroker.transactions.transaction_log import partition_for

if TYPE_CHECKING:
    from kbroker.replication.forwarding_controller import ForwardingController
    from kbroker.replication.replica_manager import ReplicaManager

log = logging.getLogger(__name__)

CONSUMER_OFFSETS_TOPIC = "__consumer_offsets"
OFFSETS_TOPIC_CONFIGS = {"cleanup.policy": "compact", "compression.type": "uncompressed"}


@dataclass(slots=True, frozen=True)
class OffsetAndMetadata:
    offset: int
    leader_epoch: int
    metadata: str
    commit_timestamp: int
    topic_id: UUID | None = None  # kept in the record when an OffsetCommit v10+ named the topic by id


def encode_key(group: str, topic: str, partition: int) -> bytes:
    return encode_offset_commit_key(OffsetCommitKey(group, topic, partition))


def encode_value(o: OffsetAndMetadata) -> bytes:
    return encode_offset_commit_value(OffsetCommitValue(o.offset, o.leader_epoch, o.metadata, o.commit_timestamp,
                                                        o.topic_id))


def decode(key: bytes, value: bytes | None) -> tuple[str, str, int, OffsetAndMetadata | None] | None:
    """(group, topic, partition, offset or None for a tombstone) of an offset commit record;
    None for the other record types of the topic."""
    k = decode_offset_commit_key(key)
    if k is None:
        return None
    if value is None:
        return k.group, k.topic, k.partition, None
    v = decode_offset_commit_value(value)
    return k.group, k.topic, k.partition, OffsetAndMetadata(v.offset, v.leader_epoch, v.metadata, v.commit_timestamp,
                                                            v.topic_id)


Offsets = dict[tuple[str, int], OffsetAndMetadata]


class OffsetStore:
    """Committed offsets by group, plus offsets pending in open transactions.

    Invariants: ``committed`` is what the ``__consumer_offsets`` log says once every
    transactional offset record is resolved by its marker; ``pending[producer_id]`` holds the
    offsets of a transaction not yet ended — invisible until its COMMIT marker is written
    (``complete_transaction``), dropped on ABORT. Records use Kafka's OffsetCommitKey v1 /
    OffsetCommitValue v4 layout, so the log is readable as Kafka's.
    """

    def __init__(self, controller: ForwardingController, replica_manager: ReplicaManager, num_partitions: int,
                 clock: Clock = SYSTEM_CLOCK) -> None:
        self.controller = controller
        self.clock = clock
        self.replica_manager = replica_manager
        self.num_partitions = num_partitions
        self.committed: dict[str, Offsets] = {}
        self.pending: dict[int, dict[str, Offsets]] = {}
        # Group metadata as last written (None: deleted), filled by load() for the coordinator.
        self.loaded_groups: dict[str, GroupMetadataValue | None] = {}
        # Other record types (KIP-848 consumer groups, key types 3-8), in log order, for the
        # ConsumerGroupCoordinator's load() (the broker clears it afterwards).
        self.consumer_group_records: list[tuple[bytes, bytes | None]] = []

    def partition_for(self, group: str) -> int:
        return partition_for(group, self.partitions_count())

    def partitions_count(self) -> int:
        info = self.controller.topics.get(CONSUMER_OFFSETS_TOPIC)
        return info.partitions if info is not None else self.num_partitions

    def ensure_topic(self) -> None:
        """FindCoordinator creates the topic; a write before it exists waits for it (retriable)."""
        if CONSUMER_OFFSETS_TOPIC not in self.controller.topics:
            raise KafkaError(ErrorCode.coordinator_not_available, f"{CONSUMER_OFFSETS_TOPIC} does not exist yet")

    def load_partition(self, index: int) -> None:
        """Replay one partition (when this broker becomes its leader)."""
        plog = self.replica_manager.get_partition(CONSUMER_OFFSETS_TOPIC, index).log
        for batch in plog.iter_batches():
            header = read_header(batch)
            if header.is_control:
                kind = control_record_type(batch)
                if kind is not None:
                    self.complete_transaction(header.producer_id, kind == 1)
                continue
            for record in iter_records(batch):
                if record.key is None:
                    continue
                decoded = decode(record.key, record.value)
                if decoded is None:
                    self._load_group_record(record.key, record.value)
                    continue
                group, topic, partition, value = decoded
                if header.is_transactional:
                    if value is not None:
                        self.pending.setdefault(header.producer_id, {}).setdefault(group, {})[
                            (topic, partition)] = value
                else:
                    self._apply(group, {(topic, partition): value})

    async def wait_replicated(self, group: str, timeout_ms: int) -> ErrorCode:
        """Wait until everything written to the group's partition is committed (in a cluster: on
        the ISR). Errors as Kafka maps them for commits: COORDINATOR_NOT_AVAILABLE when the ISR
        is short or time runs out, NOT_COORDINATOR when leadership moved meanwhile."""
        partition = self.replica_manager.partitions.get((CONSUMER_OFFSETS_TOPIC, self.partition_for(group)))
        if partition is None:
            return ErrorCode.none
        try:
            error = await asyncio.wait_for(partition.wait_for_commit(partition.log_end_offset), timeout_ms / 1000)
        except TimeoutError:
            return ErrorCode.coordinator_not_available
        if error == ErrorCode.not_leader_or_follower:
            return ErrorCode.not_coordinator
        return ErrorCode.coordinator_not_available if error else ErrorCode.none

    def unload_partition(self, index: int) -> None:
        """Forget the groups of a partition this broker no longer leads (Kafka's onResignation)."""
        for group in [g for g in self.committed if self.partition_for(g) == index]:
            del self.committed[group]
        for groups in self.pending.values():
            for group in [g for g in groups if self.partition_for(g) == index]:
                del groups[group]

    def _load_group_record(self, key: bytes, value: bytes | None) -> None:
        group = decode_group_metadata_key(key)
        if group is None:
            self.consumer_group_records.append((key, value))
            return
        if value is None:
            self.loaded_groups[group] = None
            return
        record = decode_group_metadata_value(value)
        if record is not None:
            self.loaded_groups[group] = record

    def _apply(self, group: str, offsets: dict[tuple[str, int], OffsetAndMetadata | None]) -> None:
        current = self.committed.setdefault(group, {})
        for tp, value in offsets.items():
            if value is None:
                current.pop(tp, None)
            else:
                current[tp] = value

    def _append(self, group: str, offsets: Offsets, producer_id: int = -1, producer_epoch: int = -1) -> None:
        self.write_records(group, [(encode_key(group, t, p), encode_value(o)) for (t, p), o in offsets.items()],
                    producer_id, producer_epoch)

    def write_records(self, group: str, records: list[tuple[bytes, bytes | None]], producer_id: int = -1,
               producer_epoch: int = -1) -> None:
        """One batch in the group's partition; returns once the bytes are in the OS (os.write)."""
        self.ensure_topic()
        now_ms = self.clock.wall_ms()
        batch = build_batch(
            records, base_timestamp=now_ms, producer_id=producer_id, producer_epoch=producer_epoch,
            attributes=TRANSACTIONAL_FLAG if producer_id >= 0 else 0,
        )
        partition = self.replica_manager.get_partition(CONSUMER_OFFSETS_TOPIC, self.partition_for(group))
        records_view = memoryview(bytearray(batch))
        try:
            partition.append_as_leader(records_view, -1, now_ms, from_coordinator=producer_id >= 0)
        except KafkaError as exc:
            BROKER_TOPIC_METRICS.produced(CONSUMER_OFFSETS_TOPIC, records_view, exc.code)
            raise
        except OSError:
            BROKER_TOPIC_METRICS.produced(CONSUMER_OFFSETS_TOPIC, records_view, ErrorCode.kafka_storage_error)
            raise
        BROKER_TOPIC_METRICS.produced(CONSUMER_OFFSETS_TOPIC, records_view, ErrorCode.none)  # as Kafka counts it

    def commit(self, group: str, offsets: Offsets) -> None:
        """A plain (non-transactional) commit: written, then visible."""
        if offsets:
            self._append(group, offsets)
            self._apply(group, dict(offsets))

    def commit_transactional(self, group: str, producer_id: int, producer_epoch: int, offsets: Offsets) -> None:
        """TxnOffsetCommit: written as transactional records; visible only once committed.

        Raises INVALID_PRODUCER_EPOCH (from the partition's producer state) for a fenced epoch.
        """
        if not offsets:
            return
        self._append(group, offsets, producer_id, producer_epoch)
        self.pending.setdefault(producer_id, {}).setdefault(group, {}).update(offsets)

    def complete_transaction(self, producer_id: int, commit: bool) -> None:
        """A marker for ``producer_id`` was written to an offsets partition."""
        groups = self.pending.pop(producer_id, {})
        if commit:
            for group, offsets in groups.items():
                self._apply(group, dict(offsets))

    def fetch(self, group: str) -> Offsets:
        return dict(self.committed.get(group, {}))

    def has_pending(self, group: str, tp: tuple[str, int] | None = None) -> bool:
        """Whether an open transaction holds offsets for ``group`` (for ``tp``, if given)."""
        return any(group in groups and (tp is None or tp in groups[group]) for groups in self.pending.values())

    def store_group(self, group: str, record: GroupMetadataValue) -> None:
        """Write the group's metadata (GroupMetadataKey v2 / GroupMetadataValue v3)."""
        self.write_records(group, [(encode_group_metadata_key(group), encode_group_metadata_value(record))])

    def delete_group_metadata(self, group: str) -> None:
        """A tombstone for the classic group's metadata only (its offsets stay): the group
        became a consumer group."""
        self.write_records(group, [(encode_group_metadata_key(group), None)])

    def delete_offsets(self, group: str, tps: list[tuple[str, int]]) -> None:
        """Tombstones for these offsets (OffsetDelete, expiry); written, then forgotten."""
        present = [tp for tp in tps if tp in self.committed.get(group, {})]
        if present:
            self.write_records(group, [(encode_key(group, t, p), None) for t, p in present])
            self._apply(group, dict.fromkeys(present))

    def expire_offsets(self, group: str, now_ms: int, retention_ms: int, since_ms: int | None,
                       subscribed: Callable[[str], bool]) -> bool:
        """offsets.retention.minutes for one group (Kafka's cleanupExpiredOffsets): tombstones
        for the offsets of topics ``subscribed`` says the group does not consume that are
        ``retention_ms`` old, counted from ``since_ms`` (when the group became Empty) or, if
        None, from their commit, unless an open transaction holds an offset for the partition.
        Returns whether nothing is left (no offset, none pending): the group may be deleted."""
        expired: list[tuple[str, int]] = []
        kept = False
        for tp, o in self.committed.get(group, {}).items():
            base = o.commit_timestamp if since_ms is None else since_ms
            if not subscribed(tp[0]) and now_ms - base >= retention_ms and not self.has_pending(group, tp):
                expired.append(tp)
            else:
                kept = True
        self.delete_offsets(group, expired)
        return not kept and not self.has_pending(group)

    def delete_group(self, group: str) -> None:
        """Tombstones for every offset of the group and for its metadata (DeleteGroups)."""
        records: list[tuple[bytes, bytes | None]] = [
            (encode_key(group, t, p), None) for t, p in self.committed.get(group, {})]
        records.append((encode_group_metadata_key(group), None))
        self.write_records(group, records)
        self.committed.pop(group, None)


def ensure_group_id(group: str) -> None:
    if not group:
        raise KafkaError(ErrorCode.invalid_group_id, "The group id is empty.")
