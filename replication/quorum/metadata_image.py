"""MetadataImage: the cluster's metadata as replayed from the metadata log.

The active controller decides; every decision is a list of metadata records appended to the
``__cluster_metadata`` log; the controller and every broker build the same MetadataImage by
replaying that log in order (KRaft's design). Records are Kafka's metadata record types by
name — RegisterBrokerRecord, FenceBrokerRecord, UnfenceBrokerRecord, TopicRecord,
PartitionRecord, RemoveTopicRecord, ConfigRecord, ProducerIdsRecord, FeatureLevelRecord,
UnregisterBrokerRecord — each stored as one record
of a record batch whose value is the record as JSON (``metadata_records`` types and encodes them).
Deviation: Kafka encodes these records with its binary metadata schemas (which kio does not
ship), so Kafka's metadata shell cannot read kbroker's metadata log. The log starts with a
kbroker-only ClusterIdRecord: brokers learn the cluster id from it (Kafka formats every node's
storage with the id instead). A partition change is
written as a whole PartitionRecord rather than a PartitionChangeRecord delta.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from typing import Any, assert_never

from kbroker.protocol.records import iter_records
from kbroker.storage.log_manager import METADATA_LOG_TOPIC

from .metadata_records import (
    AccessControlEntryRecord,
    ClientQuotaRecord,
    ClusterIdRecord,
    ConfigRecord,
    FeatureLevelRecord,
    FenceBrokerRecord,
    LeaderChangeRecord,
    MetadataRecord,
    PartitionRecord,
    ProducerIdsRecord,
    RegisterBrokerRecord,
    RemoveAccessControlEntryRecord,
    RemoveTopicRecord,
    RemoveUserScramCredentialRecord,
    TopicRecord,
    UnfenceBrokerRecord,
    UnregisterBrokerRecord,
    UserScramCredentialRecord,
    decode_record,
)
from .partition_registration import PartitionRegistration
from .raft import LEADER_CHANGE_PAYLOAD

METADATA_TOPIC = METADATA_LOG_TOPIC
METADATA_TOPIC_ID = uuid.UUID(int=1)  # Kafka's fixed id for the metadata topic
TOPIC_RESOURCE = 2
BROKER_RESOURCE = 4
CLIENT_METRICS_RESOURCE = 16
GROUP_RESOURCE = 32


@dataclass(slots=True)
class ImageChanges:
    """What the records applied since the image's changes were last taken touched (Kafka's
    MetadataDelta, reduced to what a broker's catalogue and replicas act on; dynamic broker configs
    are compared whole, being few), so applying a change costs what it touched, not what the
    image holds."""

    topics: set[str] = field(default_factory=set)  # created, removed, new partitions, or topic configs changed
    partitions: set[tuple[str, int]] = field(default_factory=set)  # a new PartitionRecord
    brokers: set[int] = field(default_factory=set)  # registered (a new incarnation) or unfenced


@dataclass(slots=True)
class BrokerRegistration:
    broker_id: int
    broker_epoch: int
    incarnation_id: str
    host: str
    port: int
    rack: str | None
    fenced: bool = True
    # (name, host, port) of every listener it registered; empty in an older log (the one above only)
    endpoints: tuple[tuple[str, str, int], ...] = ()

    def endpoint(self, listener: str) -> tuple[str, int] | None:
        """Where the broker listens on ``listener`` ("" or a log without listeners: host, port)."""
        if not listener or not self.endpoints:
            return self.host, self.port
        return next(((host, port) for name, host, port in self.endpoints if name == listener), None)


@dataclass(slots=True)
class TopicImage:
    name: str
    topic_id: uuid.UUID
    partitions: dict[int, PartitionRegistration] = field(default_factory=dict)
    configs: dict[str, str] = field(default_factory=dict)


def decode_batch(batch: bytes | memoryview) -> Iterator[tuple[int, MetadataRecord]]:
    """(offset, record) for every metadata record of a metadata log batch (the quorum's own
    LeaderChange entries are skipped)."""
    for record in iter_records(batch):
        if record.value is not None and record.value != LEADER_CHANGE_PAYLOAD:
            yield record.offset, decode_record(record.value)


class MetadataImage:
    """Brokers, topics with their partition registrations, configs, the next producer id block,
    the finalized feature levels (``features``: name -> level, levels above 0 only), and the
    security state: ACLs by id, SCRAM credentials by (user, mechanism), client quotas by entity
    (each entity's keys; an entity left with no key is dropped).

    ``offset`` is the last metadata log offset applied. A broker's epoch is the offset of its
    RegisterBrokerRecord, as in KRaft, so it increases with every registration (KIP-903).
    """

    def __init__(self) -> None:
        self.offset = -1
        self.cluster_id = ""
        self.brokers: dict[int, BrokerRegistration] = {}
        self.topics: dict[str, TopicImage] = {}
        self.topics_by_id: dict[uuid.UUID, TopicImage] = {}
        self.cluster_configs: dict[str, str] = {}
        self.broker_configs: dict[int, dict[str, str]] = {}
        # GROUP and CLIENT_METRICS configs by (resource type, name); a resource left with no key is dropped.
        self.resource_configs: dict[tuple[int, str], dict[str, str]] = {}
        self.next_producer_id = 0
        self.features: dict[str, int] = {}
        self.acls: dict[uuid.UUID, AccessControlEntryRecord] = {}
        self.scram_credentials: dict[tuple[str, int], UserScramCredentialRecord] = {}
        self.client_quotas: dict[tuple[tuple[str, str | None], ...], dict[str, float]] = {}
        # Recorded only where a publisher takes them (a broker's image; the controller's keeps none).
        self.changes: ImageChanges | None = None
        # Told (topic, partition, registration before or None, after) of every PartitionRecord
        # applied: the node's counts of ISR changes and elections (kbroker.metrics.partition_changes).
        self.on_partition: Callable[[str, int, PartitionRegistration | None, PartitionRegistration], None] | None = None

    def take_changes(self) -> ImageChanges:
        """The changes recorded since the last call; from now on changes are recorded afresh."""
        taken, self.changes = self.changes or ImageChanges(), ImageChanges()
        return taken

    def apply(self, offset: int, record: MetadataRecord) -> None:
        match record:
            case ClusterIdRecord():
                self.cluster_id = record.cluster_id
            case RegisterBrokerRecord():
                epoch = offset if record.broker_epoch < 0 else record.broker_epoch  # (from a snapshot)
                self.brokers[record.broker_id] = BrokerRegistration(
                    record.broker_id, epoch, record.incarnation_id, record.host, record.port, record.rack,
                    endpoints=record.endpoints)
                if self.changes is not None:
                    self.changes.brokers.add(record.broker_id)
            case FenceBrokerRecord():
                self._set_fenced(record.broker_id, True)
            case UnfenceBrokerRecord():
                self._set_fenced(record.broker_id, False)
                if self.changes is not None:
                    self.changes.brokers.add(record.broker_id)
            case TopicRecord():
                topic = TopicImage(record.name, record.topic_id)
                self.topics[topic.name] = topic
                self.topics_by_id[topic.topic_id] = topic
                if self.changes is not None:
                    self.changes.topics.add(topic.name)
            case PartitionRecord():
                owner = self.topics_by_id[record.topic_id]
                if self.changes is not None:
                    self.changes.partitions.add((owner.name, record.partition))
                    if record.partition not in owner.partitions:
                        self.changes.topics.add(owner.name)  # its partition count grows
                after = record.registration()
                if self.on_partition is not None:
                    self.on_partition(owner.name, record.partition, owner.partitions.get(record.partition), after)
                owner.partitions[record.partition] = after
            case RemoveTopicRecord():
                removed = self.topics_by_id.pop(record.topic_id, None)
                if removed is not None:
                    del self.topics[removed.name]
                    if self.changes is not None:
                        self.changes.topics.add(removed.name)
            case ConfigRecord():
                self._apply_config(record)
            case ProducerIdsRecord():
                self.next_producer_id = record.next_producer_id
            case FeatureLevelRecord():
                if record.feature_level > 0:
                    self.features[record.name] = record.feature_level
                else:
                    self.features.pop(record.name, None)
            case UnregisterBrokerRecord():
                broker = self.brokers.get(record.broker_id)
                if broker is not None and broker.broker_epoch == record.broker_epoch:
                    del self.brokers[record.broker_id]
            case AccessControlEntryRecord():
                self.acls[record.id] = record
            case RemoveAccessControlEntryRecord():
                self.acls.pop(record.id, None)
            case UserScramCredentialRecord():
                self.scram_credentials[(record.name, record.mechanism)] = record
            case RemoveUserScramCredentialRecord():
                self.scram_credentials.pop((record.name, record.mechanism), None)
            case ClientQuotaRecord():
                self._apply_client_quota(record)
            case LeaderChangeRecord():
                pass  # marked a new controller epoch in logs of older kbroker versions
            case _:
                assert_never(record)
        self.offset = offset

    def _set_fenced(self, broker_id: int, fenced: bool) -> None:
        broker = self.brokers.get(broker_id)
        if broker is not None:
            broker.fenced = fenced

    def _apply_config(self, record: ConfigRecord) -> None:
        target: dict[str, str]
        if record.resource_type == TOPIC_RESOURCE:
            topic = self.topics.get(record.resource_name)
            if topic is None:
                return
            target = topic.configs
            if self.changes is not None:
                self.changes.topics.add(topic.name)
        elif record.resource_type != BROKER_RESOURCE:
            key = (record.resource_type, record.resource_name)
            target = self.resource_configs.setdefault(key, {})
            if record.value is None:
                target.pop(record.name, None)
                if not target:
                    del self.resource_configs[key]
            else:
                target[record.name] = record.value
            return
        elif record.resource_name == "":
            target = self.cluster_configs
        else:
            target = self.broker_configs.setdefault(int(record.resource_name), {})
        if record.value is None:
            target.pop(record.name, None)
        else:
            target[record.name] = record.value

    def _apply_client_quota(self, record: ClientQuotaRecord) -> None:
        quotas = self.client_quotas.setdefault(record.entity, {})
        if record.remove:
            quotas.pop(record.key, None)
            if not quotas:
                del self.client_quotas[record.entity]
        else:
            quotas[record.key] = record.value

    # --- queries --------------------------------------------------------------------------

    def live_brokers(self) -> list[BrokerRegistration]:
        return [b for b in sorted(self.brokers.values(), key=lambda b: b.broker_id) if not b.fenced]

    def is_live(self, broker_id: int) -> bool:
        broker = self.brokers.get(broker_id)
        return broker is not None and not broker.fenced

    def with_partition(self, topic_id: uuid.UUID, index: int, **changes: Any) -> PartitionRegistration:
        return replace(self.topics_by_id[topic_id].partitions[index], **changes)
