"""Metadata records: the typed records of the metadata log and their on-disk encoding.

Each class is the Kafka metadata record of the same name, with the fields kbroker keeps (Kafka's
field names, in snake case); the active controller writes them and ``MetadataImage`` replays
them. On disk a record is the value of one record of a metadata log batch: a JSON object of
the record's fields plus ``"type"``, the class name, written by
``json.dumps(..., separators=(",", ":"), sort_keys=True)`` — topic ids as their canonical
string, lists as JSON arrays, a missing value as ``null``. For example::

    {"broker_id":1,"epoch":2,"type":"FenceBrokerRecord"}

The bytes are exactly what kbroker wrote when records were plain dicts, so existing metadata
logs replay unchanged. Decoding accepts what older kbroker versions wrote: a PartitionRecord
without the ELR or reassignment lists (they are empty), a RegisterBrokerRecord without a rack,
and the LeaderChangeRecord the controller wrote before Raft took over that role. A record of
any other type is an error (``UnknownMetadataRecord``), as replaying it was before.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from .partition_registration import PartitionRegistration


@dataclass(frozen=True, slots=True)
class ClusterIdRecord:
    """kbroker only, the log's first record: brokers learn the cluster id from it."""

    cluster_id: str

    @classmethod
    def from_json(cls, raw: Mapping[str, Any]) -> ClusterIdRecord:
        return cls(raw["cluster_id"])


@dataclass(frozen=True, slots=True)
class RegisterBrokerRecord:
    """A broker registered (or re-registered); its broker epoch is this record's offset in the log, and
    ``broker_epoch`` in a snapshot (where offsets are the snapshot's own; -1 in the log)."""

    broker_id: int
    incarnation_id: str
    host: str
    port: int
    rack: str | None
    broker_epoch: int = field(default=-1, metadata={"omitted_when": -1})  # the log's bytes stay as they were
    # Every listener the broker registered, (name, host, port), as Kafka's record lists them;
    # host/port above are its inter-broker listener's. Absent in what older kbroker wrote.
    endpoints: tuple[tuple[str, str, int], ...] = field(default=(), metadata={"omitted_when": ()})

    @classmethod
    def from_json(cls, raw: Mapping[str, Any]) -> RegisterBrokerRecord:
        endpoints = tuple((str(name), str(host), int(port)) for name, host, port in raw.get("endpoints", ()))
        return cls(raw["broker_id"], raw["incarnation_id"], raw["host"], raw["port"], raw.get("rack"),
                   raw.get("broker_epoch", -1), endpoints)


@dataclass(frozen=True, slots=True)
class FenceBrokerRecord:
    broker_id: int
    epoch: int

    @classmethod
    def from_json(cls, raw: Mapping[str, Any]) -> FenceBrokerRecord:
        return cls(raw["broker_id"], raw["epoch"])


@dataclass(frozen=True, slots=True)
class UnfenceBrokerRecord:
    broker_id: int
    epoch: int

    @classmethod
    def from_json(cls, raw: Mapping[str, Any]) -> UnfenceBrokerRecord:
        return cls(raw["broker_id"], raw["epoch"])


@dataclass(frozen=True, slots=True)
class TopicRecord:
    name: str
    topic_id: uuid.UUID

    @classmethod
    def from_json(cls, raw: Mapping[str, Any]) -> TopicRecord:
        return cls(raw["name"], uuid.UUID(raw["topic_id"]))


@dataclass(frozen=True, slots=True)
class PartitionRecord:
    """A partition's whole registration (kbroker writes no PartitionChangeRecord deltas)."""

    topic_id: uuid.UUID
    partition: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    leader: int
    leader_epoch: int
    partition_epoch: int
    elr: tuple[int, ...]
    last_known_elr: tuple[int, ...]
    adding: tuple[int, ...]
    removing: tuple[int, ...]

    @classmethod
    def of(cls, topic_id: uuid.UUID, partition: int, reg: PartitionRegistration) -> PartitionRecord:
        """The record that sets partition ``partition`` of the topic to ``reg``."""
        return cls(topic_id, partition, reg.replicas, reg.isr, reg.leader, reg.leader_epoch, reg.partition_epoch,
                   reg.elr, reg.last_known_elr, reg.adding, reg.removing)

    def registration(self) -> PartitionRegistration:
        return PartitionRegistration(self.replicas, self.isr, self.leader, self.leader_epoch, self.partition_epoch,
                                     self.elr, self.last_known_elr, self.adding, self.removing)

    @classmethod
    def from_json(cls, raw: Mapping[str, Any]) -> PartitionRecord:
        return cls(
            uuid.UUID(raw["topic_id"]), raw["partition"], tuple(raw["replicas"]), tuple(raw["isr"]), raw["leader"],
            raw["leader_epoch"], raw["partition_epoch"],
            # absent from records written before KIP-966 ELR and KIP-455 reassignment support
            tuple(raw.get("elr", ())), tuple(raw.get("last_known_elr", ())),
            tuple(raw.get("adding", ())), tuple(raw.get("removing", ())),
        )


@dataclass(frozen=True, slots=True)
class RemoveTopicRecord:
    topic_id: uuid.UUID

    @classmethod
    def from_json(cls, raw: Mapping[str, Any]) -> RemoveTopicRecord:
        return cls(uuid.UUID(raw["topic_id"]))


@dataclass(frozen=True, slots=True)
class ConfigRecord:
    """Sets config ``name`` of a resource (``value`` None deletes it). ``resource_type`` is
    Kafka's ConfigResource type: 2 a topic, 4 a broker (``resource_name`` "" the cluster-wide
    default, else the broker id)."""

    resource_type: int
    resource_name: str
    name: str
    value: str | None

    @classmethod
    def from_json(cls, raw: Mapping[str, Any]) -> ConfigRecord:
        return cls(raw["resource_type"], raw["resource_name"], raw["name"], raw["value"])


@dataclass(frozen=True, slots=True)
class ProducerIdsRecord:
    """A block of producer ids handed out: the next block starts at ``next_producer_id``."""

    broker_id: int
    broker_epoch: int
    next_producer_id: int

    @classmethod
    def from_json(cls, raw: Mapping[str, Any]) -> ProducerIdsRecord:
        return cls(raw["broker_id"], raw["broker_epoch"], raw["next_producer_id"])


@dataclass(frozen=True, slots=True)
class FeatureLevelRecord:
    """Finalizes feature ``name`` at ``feature_level`` (0 removes it from the finalized set)."""

    name: str
    feature_level: int

    @classmethod
    def from_json(cls, raw: Mapping[str, Any]) -> FeatureLevelRecord:
        return cls(raw["name"], raw["feature_level"])


@dataclass(frozen=True, slots=True)
class UnregisterBrokerRecord:
    """The broker's registration is removed (UnregisterBroker); it stays a replica of its partitions."""

    broker_id: int
    broker_epoch: int

    @classmethod
    def from_json(cls, raw: Mapping[str, Any]) -> UnregisterBrokerRecord:
        return cls(raw["broker_id"], raw["broker_epoch"])


@dataclass(frozen=True, slots=True)
class LeaderChangeRecord:
    """Read only: the active controller wrote it at each new epoch until the Raft layer took
    that over (its LeaderChange entries are not metadata records); it changes nothing."""

    leader_id: int
    epoch: int

    @classmethod
    def from_json(cls, raw: Mapping[str, Any]) -> LeaderChangeRecord:
        return cls(raw["leader_id"], raw["epoch"])


@dataclass(frozen=True, slots=True)
class AccessControlEntryRecord:
    """One ACL (CreateAcls), in Kafka's wire codes: resource type, pattern type, operation and
    permission type; ``id`` names it for RemoveAccessControlEntryRecord."""

    id: uuid.UUID
    resource_type: int
    resource_name: str
    pattern_type: int
    principal: str
    host: str
    operation: int
    permission_type: int

    @classmethod
    def from_json(cls, raw: Mapping[str, Any]) -> AccessControlEntryRecord:
        return cls(uuid.UUID(raw["id"]), raw["resource_type"], raw["resource_name"], raw["pattern_type"],
                   raw["principal"], raw["host"], raw["operation"], raw["permission_type"])


@dataclass(frozen=True, slots=True)
class RemoveAccessControlEntryRecord:
    """The ACL ``id`` is deleted (DeleteAcls)."""

    id: uuid.UUID

    @classmethod
    def from_json(cls, raw: Mapping[str, Any]) -> RemoveAccessControlEntryRecord:
        return cls(uuid.UUID(raw["id"]))


@dataclass(frozen=True, slots=True)
class UserScramCredentialRecord:
    """A user's SCRAM credential for one mechanism (Kafka's ScramMechanism code: 1 SCRAM-SHA-256,
    2 SCRAM-SHA-512): salt, StoredKey and ServerKey (RFC 5802) as hex, never the password."""

    name: str
    mechanism: int
    salt: str
    stored_key: str
    server_key: str
    iterations: int

    @classmethod
    def from_json(cls, raw: Mapping[str, Any]) -> UserScramCredentialRecord:
        return cls(raw["name"], raw["mechanism"], raw["salt"], raw["stored_key"], raw["server_key"],
                   raw["iterations"])


@dataclass(frozen=True, slots=True)
class RemoveUserScramCredentialRecord:
    """The user's credential for ``mechanism`` is deleted."""

    name: str
    mechanism: int

    @classmethod
    def from_json(cls, raw: Mapping[str, Any]) -> RemoveUserScramCredentialRecord:
        return cls(raw["name"], raw["mechanism"])


@dataclass(frozen=True, slots=True)
class ClientQuotaRecord:
    """Sets quota ``key`` (producer_byte_rate, consumer_byte_rate, request_percentage,
    controller_mutation_rate) of a client-quota entity, or removes it (``remove``). The entity is
    its (entity type, name) pairs sorted by type — "user", "client-id", "ip" — a None name being
    that type's default entity, as in ``--entity-default``."""

    entity: tuple[tuple[str, str | None], ...]
    key: str
    value: float
    remove: bool = False

    @classmethod
    def from_json(cls, raw: Mapping[str, Any]) -> ClientQuotaRecord:
        entity = tuple((kind, name) for kind, name in raw["entity"])
        return cls(entity, raw["key"], raw["value"], raw.get("remove", False))


MetadataRecord = (
    ClusterIdRecord | RegisterBrokerRecord | FenceBrokerRecord | UnfenceBrokerRecord | TopicRecord
    | PartitionRecord | RemoveTopicRecord | ConfigRecord | ProducerIdsRecord | LeaderChangeRecord
    | FeatureLevelRecord | UnregisterBrokerRecord | AccessControlEntryRecord | RemoveAccessControlEntryRecord
    | UserScramCredentialRecord | RemoveUserScramCredentialRecord | ClientQuotaRecord
)

_DECODERS: dict[str, Callable[[Mapping[str, Any]], MetadataRecord]] = {
    "ClusterIdRecord": ClusterIdRecord.from_json,
    "RegisterBrokerRecord": RegisterBrokerRecord.from_json,
    "FenceBrokerRecord": FenceBrokerRecord.from_json,
    "UnfenceBrokerRecord": UnfenceBrokerRecord.from_json,
    "TopicRecord": TopicRecord.from_json,
    "PartitionRecord": PartitionRecord.from_json,
    "RemoveTopicRecord": RemoveTopicRecord.from_json,
    "ConfigRecord": ConfigRecord.from_json,
    "ProducerIdsRecord": ProducerIdsRecord.from_json,
    "LeaderChangeRecord": LeaderChangeRecord.from_json,
    "FeatureLevelRecord": FeatureLevelRecord.from_json,
    "UnregisterBrokerRecord": UnregisterBrokerRecord.from_json,
    "AccessControlEntryRecord": AccessControlEntryRecord.from_json,
    "RemoveAccessControlEntryRecord": RemoveAccessControlEntryRecord.from_json,
    "UserScramCredentialRecord": UserScramCredentialRecord.from_json,
    "RemoveUserScramCredentialRecord": RemoveUserScramCredentialRecord.from_json,
    "ClientQuotaRecord": ClientQuotaRecord.from_json,
}


class UnknownMetadataRecord(ValueError):
    """A metadata log record whose ``"type"`` this kbroker does not know."""


_NEVER = object()  # no field value equals it: fields without "omitted_when" are always written


def _json_default(value: object) -> str:
    if isinstance(value, uuid.UUID):
        return str(value)
    raise TypeError(f"{type(value).__name__} is not a metadata record field type")


def encode_record(record: MetadataRecord) -> bytes:
    """One metadata record as the value of one record of the metadata log."""
    # Fields are flat (no nested records), so a shallow dict does; asdict's deep copy tripled
    # the cost, and a new topic of 10,000 partitions writes 10,000 records.
    body: dict[str, object] = {f.name: getattr(record, f.name) for f in fields(record)
                               if getattr(record, f.name) != f.metadata.get("omitted_when", _NEVER)}
    body["type"] = type(record).__name__
    return json.dumps(body, separators=(",", ":"), sort_keys=True, default=_json_default).encode()


def decode_record(value: bytes | memoryview) -> MetadataRecord:
    """The metadata record a metadata log record's value holds (UnknownMetadataRecord if its
    type is not one of this module's)."""
    raw = json.loads(bytes(value))
    kind = raw.get("type") if isinstance(raw, dict) else None
    decoder = _DECODERS.get(kind) if isinstance(kind, str) else None
    if decoder is None:
        raise UnknownMetadataRecord(f"unknown metadata record type {kind!r}: {bytes(value)[:200]!r}")
    return decoder(raw)
