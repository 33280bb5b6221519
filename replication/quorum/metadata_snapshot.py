"""Metadata snapshots: a MetadataImage as the records that rebuild it, and the voter's snapshot policy.

A snapshot holds the image, not the history: each broker's RegisterBrokerRecord (with its broker
epoch) and its fencing, each topic's TopicRecord, PartitionRecords and ConfigRecords, the cluster-wide
and per-broker ConfigRecords, the finalized features, the next producer id block, the ACLs, SCRAM
credentials and client quotas. Replaying those into
an empty image gives an image equal to the one they were taken from (``image_records``).

``SnapshotPolicy`` is what each controller voter runs (Kafka's controllers each snapshot their own
committed image): it follows the committed entries into an image of its own and, once
``metadata.log.max.record.bytes.between.snapshots`` bytes of them arrived since the last snapshot
(or ``metadata.log.max.snapshot.interval.ms`` passed with any), writes a snapshot at the high watermark
and cuts the log behind it. ``load_image`` rebuilds an image from the latest snapshot and the entries
after it, which is what a restart replays.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

from .metadata_image import BROKER_RESOURCE, TOPIC_RESOURCE, MetadataImage
from .metadata_records import (
    ClientQuotaRecord,
    ClusterIdRecord,
    ConfigRecord,
    FeatureLevelRecord,
    MetadataRecord,
    PartitionRecord,
    ProducerIdsRecord,
    RegisterBrokerRecord,
    TopicRecord,
    UnfenceBrokerRecord,
    decode_record,
    encode_record,
)
from .raft import LEADER_CHANGE_PAYLOAD
from .raft_storage import RaftLog

log = logging.getLogger(__name__)

_READ_ENTRIES = 4096
# Committed entries the policy takes in per call: it is called every Raft tick, so a long log (a
# restart without a snapshot yet, 100,000 entries) is caught up in slices instead of one long stall.
ENTRIES_PER_CALL = 4096


@dataclass(frozen=True, slots=True)
class SnapshotSettings:
    max_bytes_between_snapshots: int = 20 * 1024 * 1024  # metadata.log.max.record.bytes.between.snapshots
    max_interval_ms: int = 3_600_000  # metadata.log.max.snapshot.interval.ms (0: no time trigger)


def _configs(resource_type: int, resource_name: str, configs: dict[str, str]) -> list[MetadataRecord]:
    return [ConfigRecord(resource_type, resource_name, name, value) for name, value in sorted(configs.items())]


def image_records(image: MetadataImage) -> list[MetadataRecord]:
    """Records that, replayed into an empty image, rebuild ``image``."""
    records: list[MetadataRecord] = []
    if image.cluster_id:
        records.append(ClusterIdRecord(image.cluster_id))
    records += [FeatureLevelRecord(name, level) for name, level in sorted(image.features.items())]
    records += _configs(BROKER_RESOURCE, "", image.cluster_configs)
    for broker_id, configs in sorted(image.broker_configs.items()):
        records += _configs(BROKER_RESOURCE, str(broker_id), configs)
    for (resource_type, resource_name), configs in sorted(image.resource_configs.items()):
        records += _configs(resource_type, resource_name, configs)
    for broker in sorted(image.brokers.values(), key=lambda b: b.broker_id):
        records.append(RegisterBrokerRecord(broker.broker_id, broker.incarnation_id, broker.host, broker.port,
                                            broker.rack, broker.broker_epoch, broker.endpoints))
        if not broker.fenced:  # a registration starts fenced
            records.append(UnfenceBrokerRecord(broker.broker_id, broker.broker_epoch))
    for topic in image.topics.values():
        records.append(TopicRecord(topic.name, topic.topic_id))
        records += [PartitionRecord.of(topic.topic_id, index, reg) for index, reg in sorted(topic.partitions.items())]
        records += _configs(TOPIC_RESOURCE, topic.name, topic.configs)
    if image.next_producer_id:
        records.append(ProducerIdsRecord(-1, -1, image.next_producer_id))
    records += image.acls.values()
    records += image.scram_credentials.values()
    records += [ClientQuotaRecord(entity, key, value)
                for entity, quotas in image.client_quotas.items() for key, value in sorted(quotas.items())]
    return records


def image_from_snapshot(payloads: list[bytes], end_offset: int) -> MetadataImage:
    """The image a snapshot (ending at ``end_offset``) holds."""
    image = MetadataImage()
    for payload in payloads:
        image.apply(end_offset - 1, decode_record(payload))
    image.offset = end_offset - 1
    return image


def apply_entries(image: MetadataImage, raft_log: RaftLog, start: int, end: int) -> int:
    """Apply the log's entries in [start, end) to ``image``; the payload bytes applied."""
    applied = 0
    offset = start
    while offset < end:
        entries = raft_log.entries(offset, min(_READ_ENTRIES, end - offset))
        if not entries:
            break
        for entry in entries:
            if entry.payload != LEADER_CHANGE_PAYLOAD:
                image.apply(entry.offset, decode_record(entry.payload))
            applied += len(entry.payload)
        offset = entries[-1].offset + 1
    return applied


def load_image(raft_log: RaftLog, end: int) -> MetadataImage:
    """The image of the latest snapshot followed by the log's entries below ``end``."""
    snapshot = raft_log.latest_snapshot_id
    if snapshot is None:
        image = MetadataImage()
        start = raft_log.start_offset
    else:
        image = image_from_snapshot(raft_log.snapshot_payloads(snapshot), snapshot.end_offset)
        start = snapshot.end_offset
    apply_entries(image, raft_log, start, end)
    return image


class SnapshotPolicy:
    """One voter's committed image and when to snapshot it (see the module docstring)."""

    def __init__(self, settings: SnapshotSettings, now_ms: int) -> None:
        self.settings = settings
        self.image: MetadataImage | None = None
        self._next_offset = 0  # the first committed entry not yet in ``image``
        self._bytes_since_snapshot = 0
        self._last_snapshot_ms = now_ms

    def on_committed(self, raft_log: RaftLog, high_watermark: int, now_ms: int) -> None:
        """Take in the entries committed since the last call; snapshot and cut the log when due."""
        if self.image is None or self._next_offset < raft_log.start_offset:
            # First call, or this voter took its leader's snapshot: start from the disk again.
            snapshot = raft_log.latest_snapshot_id
            self._next_offset = raft_log.start_offset if snapshot is None else snapshot.end_offset
            self.image = load_image(raft_log, self._next_offset)
        if high_watermark > self._next_offset:
            end = min(high_watermark, self._next_offset + ENTRIES_PER_CALL)
            self._bytes_since_snapshot += apply_entries(self.image, raft_log, self._next_offset, end)
            self._next_offset = end
        due_by_time = (self.settings.max_interval_ms > 0 and self._bytes_since_snapshot > 0
                       and now_ms - self._last_snapshot_ms >= self.settings.max_interval_ms)
        if self._bytes_since_snapshot >= self.settings.max_bytes_between_snapshots or due_by_time:
            self._snapshot(raft_log, now_ms)

    def _snapshot(self, raft_log: RaftLog, now_ms: int) -> None:
        assert self.image is not None
        started = time.monotonic()
        records = image_records(self.image)
        snapshot_id = raft_log.create_snapshot(self._next_offset, [encode_record(r) for r in records])
        start = raft_log.delete_before_snapshot()
        log.info("metadata snapshot %s written: %d records, %d bytes of entries since the last one; log "
                 "start offset now %d (%.0f ms)", snapshot_id, len(records), self._bytes_since_snapshot, start,
                 (time.monotonic() - started) * 1000)
        self._bytes_since_snapshot = 0
        self._last_snapshot_ms = now_ms
