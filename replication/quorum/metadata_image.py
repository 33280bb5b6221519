"""MetadataImage: the cluster's metadata as replayed from the metadata log, and its records.

The active controller decides; every decision is a list of metadata records appended to the
``__cluster_metadata`` log; the controller and every broker build the same MetadataImage by
replaying that log in order (KRaft's design). Records are Kafka's metadata record types by
name — RegisterBrokerRecord, FenceBrokerRecord, UnfenceBrokerRecord, UnregisterBrokerRecord,
TopicRecord, PartitionRecord, RemoveTopicRecord, ConfigRecord, ProducerIdsRecord — each stored
as one record of a record batch whose value is the record as JSON.
Deviation: Kafka encodes these records with its binary metadata schemas (which kio does not
ship), so Kafka's metadata shell cannot read kbroker's metadata log. The log starts with a
kbroker-only ClusterIdRecord: brokers learn the cluster id from it (Kafka formats every node's
storage with the id instead). A partition change is
written as a whole PartitionRecord rather than a PartitionChangeRecord delta.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from typing import Any

from kbroker.protocol.records import iter_records
from kbroker.storage.log_manager import METADATA_LOG_TOPIC

from .partition_registration import PartitionRegistration
from .raft import LEADER_CHANGE_PAYLOAD

METADATA_TOPIC = METADATA_LOG_TOPIC
METADATA_TOPIC_ID = uuid.UUID(int=1)  # Kafka's fixed id for the metadata topic
TOPIC_RESOURCE = 2
BROKER_RESOURCE = 4

MetadataRecord = dict[str, Any]


@dataclass(slots=True)
class BrokerRegistration:
    broker_id: int
    broker_epoch: int
    incarnation_id: str
    host: str
    port: int
    rack: str | None
    fenced: bool = True
    in_controlled_shutdown: bool = False


@dataclass(slots=True)
class TopicImage:
    name: str
    topic_id: uuid.UUID
    partitions: dict[int, PartitionRegistration] = field(default_factory=dict)
    configs: dict[str, str] = field(default_factory=dict)


def encode_record(record: MetadataRecord) -> bytes:
    """One metadata record as the value of one record of the metadata log."""
    return json.dumps(record, separators=(",", ":"), sort_keys=True).encode()


def decode_batch(batch: bytes | memoryview) -> Iterator[tuple[int, MetadataRecord]]:
    """(offset, record) for every metadata record of a metadata log batch (the quorum's own
    LeaderChange entries are skipped)."""
    for record in iter_records(batch):
        if record.value is not None and record.value != LEADER_CHANGE_PAYLOAD:
            yield record.offset, json.loads(record.value)


def partition_record(topic_id: uuid.UUID, index: int, reg: PartitionRegistration) -> MetadataRecord:
    return {
        "type": "PartitionRecord", "topic_id": str(topic_id), "partition": index,
        "replicas": list(reg.replicas), "isr": list(reg.isr), "leader": reg.leader,
        "leader_epoch": reg.leader_epoch, "partition_epoch": reg.partition_epoch,
        "elr": list(reg.elr), "last_known_elr": list(reg.last_known_elr),
        "adding": list(reg.adding), "removing": list(reg.removing),
    }


class MetadataImage:
    """Brokers, topics with their partition registrations, configs, the next producer id block.

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
        self.next_producer_id = 0

    def apply(self, offset: int, record: MetadataRecord) -> None:
        kind = record["type"]
        getattr(self, "_apply_" + kind)(offset, record)
        self.offset = offset

    def _apply_ClusterIdRecord(self, offset: int, r: MetadataRecord) -> None:
        self.cluster_id = r["cluster_id"]

    def _apply_RegisterBrokerRecord(self, offset: int, r: MetadataRecord) -> None:
        self.brokers[r["broker_id"]] = BrokerRegistration(
            r["broker_id"], offset, r["incarnation_id"], r["host"], r["port"], r.get("rack"), fenced=True,
        )

    def _apply_UnregisterBrokerRecord(self, offset: int, r: MetadataRecord) -> None:
        self.brokers.pop(r["broker_id"], None)

    def _apply_FenceBrokerRecord(self, offset: int, r: MetadataRecord) -> None:
        broker = self.brokers.get(r["broker_id"])
        if broker is not None:
            broker.fenced = True
            broker.in_controlled_shutdown = False

    def _apply_UnfenceBrokerRecord(self, offset: int, r: MetadataRecord) -> None:
        broker = self.brokers.get(r["broker_id"])
        if broker is not None:
            broker.fenced = False

    def _apply_BrokerRegistrationChangeRecord(self, offset: int, r: MetadataRecord) -> None:
        broker = self.brokers.get(r["broker_id"])
        if broker is not None:
            broker.in_controlled_shutdown = r.get("in_controlled_shutdown", False)

    def _apply_TopicRecord(self, offset: int, r: MetadataRecord) -> None:
        topic = TopicImage(r["name"], uuid.UUID(r["topic_id"]))
        self.topics[topic.name] = topic
        self.topics_by_id[topic.topic_id] = topic

    def _apply_PartitionRecord(self, offset: int, r: MetadataRecord) -> None:
        topic = self.topics_by_id[uuid.UUID(r["topic_id"])]
        topic.partitions[r["partition"]] = PartitionRegistration(
            tuple(r["replicas"]), tuple(r["isr"]), r["leader"], r["leader_epoch"], r["partition_epoch"],
            tuple(r.get("elr", ())), tuple(r.get("last_known_elr", ())),
            tuple(r.get("adding", ())), tuple(r.get("removing", ())),
        )

    def _apply_RemoveTopicRecord(self, offset: int, r: MetadataRecord) -> None:
        topic = self.topics_by_id.pop(uuid.UUID(r["topic_id"]), None)
        if topic is not None:
            del self.topics[topic.name]

    def _apply_ConfigRecord(self, offset: int, r: MetadataRecord) -> None:
        if r["resource_type"] == TOPIC_RESOURCE:
            topic = self.topics.get(r["resource_name"])
            if topic is None:
                return
            target = topic.configs
        elif r["resource_name"] == "":
            target = self.cluster_configs
        else:
            target = self.broker_configs.setdefault(int(r["resource_name"]), {})
        if r["value"] is None:
            target.pop(r["name"], None)
        else:
            target[r["name"]] = r["value"]

    def _apply_ProducerIdsRecord(self, offset: int, r: MetadataRecord) -> None:
        self.next_producer_id = r["next_producer_id"]

    def _apply_LeaderChangeRecord(self, offset: int, r: MetadataRecord) -> None:
        pass  # marks a new controller epoch in the log; nothing to apply

    # --- queries --------------------------------------------------------------------------

    def live_brokers(self) -> list[BrokerRegistration]:
        return [b for b in sorted(self.brokers.values(), key=lambda b: b.broker_id) if not b.fenced]

    def is_live(self, broker_id: int) -> bool:
        broker = self.brokers.get(broker_id)
        return broker is not None and not broker.fenced

    def with_partition(self, topic_id: uuid.UUID, index: int, **changes: Any) -> PartitionRegistration:
        return replace(self.topics_by_id[topic_id].partitions[index], **changes)
