"""Controller: the cluster's topic catalogue — names, ids, partition counts, config overrides.

Single node for now: this broker is the controller and the only replica; every change is
written to ``<first log dir>/kbroker-metadata.json`` (write, fsync, rename) before it is
applied, so a crash leaves either the old or the new catalogue, never a torn one. The
replicated cluster replaces this file with a replicated metadata log behind the same methods.
Errors are raised as KafkaError with the code and message Kafka gives.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import re
import uuid
from collections.abc import Container, Mapping, Sequence
from dataclasses import dataclass, field

from kbroker.protocol.errors import ErrorCode, KafkaError
from kbroker.storage.file_io import replace_atomically
from kbroker.storage.log_config import (
    BrokerLayers,
    ConfigEntry,
    ConfigSource,
    InvalidConfig,
    LogConfig,
    resolve_topic_configs,
    validate_topic_config,
)

from .loop_turns import LoopTurns
from .partition_registration import PartitionRegistration
from .replica_manager import ReplicaManager

log = logging.getLogger(__name__)

METADATA_FILE = "kbroker-metadata.json"
MAX_TOPIC_NAME_LENGTH = 249
# Kafka's controller refuses, with POLICY_VIOLATION, a CreateTopics asking for more partitions
# than this in all (MAX_PARTITIONS_PER_BATCH) and any request producing more metadata records
# (MAX_RECORDS_PER_USER_OP): one request must not tie the controller up for long.
MAX_PARTITIONS_PER_REQUEST = 10_000
TOO_MANY_PARTITIONS = "Excessively large number of partitions per request."
TOO_LARGE_BATCH = "Unable to perform excessively large batch operation."
_LEGAL_TOPIC = re.compile(r"^[a-zA-Z0-9._-]+$")


@dataclass(slots=True)
class TopicInfo:
    name: str
    topic_id: uuid.UUID
    partitions: int
    replication_factor: int
    configs: dict[str, str] = field(default_factory=dict)


def check_partitions_requested(topics: Sequence[object], default_partitions: int) -> None:
    """POLICY_VIOLATION for a CreateTopics whose topics ask for more than
    MAX_PARTITIONS_PER_REQUEST partitions in all (counted before any other check, as Kafka's
    controller does: a count, the default for -1, or the manual assignment's length)."""
    total = 0
    for topic in topics:
        if topic.assignments:
            total += len(topic.assignments)
        elif topic.num_partitions == -1:
            total += default_partitions
        elif topic.num_partitions > 0:
            total += topic.num_partitions
    if total > MAX_PARTITIONS_PER_REQUEST:
        raise KafkaError(ErrorCode.policy_violation, TOO_MANY_PARTITIONS)


def check_partitions_added(requested: Sequence[tuple[str, int]], current: Mapping[str, int]) -> None:
    """POLICY_VIOLATION for a CreatePartitions that would add more than MAX_PARTITIONS_PER_REQUEST
    partitions in all (Kafka's controller fails such a request as one excessively large batch).
    ``requested``: (topic, new count); ``current``: each existing topic's partition count."""
    added = sum(count - current[name] for name, count in requested if name in current and count > current[name])
    if added > MAX_PARTITIONS_PER_REQUEST:
        raise KafkaError(ErrorCode.policy_violation, TOO_LARGE_BATCH)


def validate_topic_name(name: str) -> None:
    """Kafka's rules, with the messages of Kafka 4's ``Topic.validate``."""
    if not name:
        raise KafkaError(ErrorCode.invalid_topic_exception, "Topic name is invalid: the empty string is not allowed")
    if name in (".", ".."):
        raise KafkaError(ErrorCode.invalid_topic_exception, f"Topic name is invalid: '{name}' is not allowed")
    if len(name) > MAX_TOPIC_NAME_LENGTH:
        raise KafkaError(
            ErrorCode.invalid_topic_exception,
            f"Topic name is invalid: the length of '{name}' is longer than the max allowed length "
            f"{MAX_TOPIC_NAME_LENGTH}",
        )
    if not _LEGAL_TOPIC.match(name):
        raise KafkaError(
            ErrorCode.invalid_topic_exception,
            f"Topic name is invalid: '{name}' contains one or more characters other than ASCII "
            "alphanumerics, '.', '_' and '-'",
        )


class Controller:
    def __init__(
        self,
        metadata_dir: str,
        node_id: int,
        replica_manager: ReplicaManager,
        static_layers: BrokerLayers,
        default_partitions: int,
        default_replication_factor: int,
    ) -> None:
        self.path = os.path.join(metadata_dir, METADATA_FILE)
        self.node_id = node_id
        self.replica_manager = replica_manager
        self.static_layers = static_layers
        # Cluster-wide dynamic broker defaults (the broker resource named ""). A new cluster
        # starts with min.insync.replicas=1, as Kafka 4 writes it when formatting storage.
        self.cluster_configs: dict[str, str] = {}
        self.default_partitions = default_partitions
        self.default_replication_factor = default_replication_factor
        self.topics: dict[str, TopicInfo] = {}
        self.topics_by_id: dict[uuid.UUID, TopicInfo] = {}
        self._creating_internal: dict[str, asyncio.Future[TopicInfo]] = {}

    # --- persistence ----------------------------------------------------------------------

    def load(self) -> None:
        """Read the catalogue (before logs load: their configs come from it)."""
        if os.path.exists(self.path):
            with open(self.path, encoding="utf-8") as fh:
                data = json.load(fh)
            for entry in data["topics"]:
                info = TopicInfo(
                    entry["name"], uuid.UUID(entry["id"]), entry["partitions"],
                    entry["replication_factor"], dict(entry["configs"]),
                )
                self._index(info)
            self.cluster_configs = dict(data.get("cluster_configs", {}))
        else:
            self.cluster_configs = {"min.insync.replicas": "1"}
            self._persist()

    def activate_partitions(self) -> None:
        """Lead every catalogued partition; delete logs of topics no longer catalogued
        (a crash between persisting a topic deletion and removing its files)."""
        for info in self.topics.values():
            for index in range(info.partitions):
                self.replica_manager.make_leader(info.name, index, info.topic_id)
        for topic, index in list(self.replica_manager.log_manager.logs):
            info = self.topics.get(topic)
            if info is None or index >= info.partitions:
                log.info("deleting orphaned log %s-%d", topic, index)
                self.replica_manager.log_manager.delete(topic, index)

    def _persist(self) -> None:
        data = {
            "version": 1,
            "cluster_configs": self.cluster_configs,
            "topics": [
                {
                    "name": t.name, "id": str(t.topic_id), "partitions": t.partitions,
                    "replication_factor": t.replication_factor, "configs": t.configs,
                }
                for t in self.topics.values()
            ],
        }
        replace_atomically(self.path, json.dumps(data, indent=1, sort_keys=True).encode())

    def _index(self, info: TopicInfo) -> None:
        self.topics[info.name] = info
        self.topics_by_id[info.topic_id] = info

    # --- topics ---------------------------------------------------------------------------

    async def create_topic(
        self,
        name: str,
        num_partitions: int,
        replication_factor: int,
        configs: Mapping[str, str | None],
        validate_only: bool = False,
        assignments: Sequence[Sequence[int]] = (),
    ) -> TopicInfo:
        """CreateTopics (async: in a cluster the active controller decides, see ForwardingController).

        The topic is in the catalogue at once; its partitions' logs are then created sharing the
        event loop (LoopTurns), and the answer comes when they all exist."""
        # A manual assignment was checked by check_replica_assignment: on one node it can only
        # name this node, which is what _register_topic places.
        info = self._register_topic(name, num_partitions, replication_factor, configs, validate_only)
        if validate_only:
            return info
        try:
            await self._create_replicas(info, range(info.partitions))
        except OSError as exc:  # no half-created topic stays
            if self.topics.get(name) is info:
                await self.delete_topic(name)
            raise _storage_error(name, exc) from exc
        log.info("created topic %s (%s) with %d partition(s)", name, info.topic_id, info.partitions)
        return info

    def create_internal_topic(self, name: str, num_partitions: int, configs: Mapping[str, str | None]) -> None:
        """``__consumer_offsets`` / ``__transaction_state``, created by their coordinators on first
        write if FindCoordinator (``prepare_internal_topic``) has not created them already."""
        info = self._register_topic(name, num_partitions, 1, configs)
        for index in range(num_partitions):
            self.replica_manager.make_leader(name, index, info.topic_id)
        log.info("created topic %s (%s) with %d partition(s)", name, info.topic_id, num_partitions)

    async def prepare_internal_topic(self, name: str, num_partitions: int, configs: Mapping[str, str | None]) -> None:
        """Create an internal topic sharing the event loop, if it does not exist (FindCoordinator
        does this first; callers arriving meanwhile wait for the same creation)."""
        creating = self._creating_internal.get(name)
        if creating is not None:
            await asyncio.shield(creating)
            return
        if name in self.topics:
            return
        creating = self._creating_internal[name] = asyncio.ensure_future(
            self.create_topic(name, num_partitions, 1, configs))
        try:
            await asyncio.shield(creating)
        finally:
            self._creating_internal.pop(name, None)

    async def _create_replicas(self, info: TopicInfo, indexes: range) -> None:
        """Create the logs of ``indexes``, stopping if the topic is deleted meanwhile."""
        turns = LoopTurns()
        for index in indexes:
            if self.topics.get(info.name) is not info:
                return
            self.replica_manager.make_leader(info.name, index, info.topic_id)
            await turns.maybe_yield()

    def _register_topic(
        self,
        name: str,
        num_partitions: int,
        replication_factor: int,
        configs: Mapping[str, str | None],
        validate_only: bool = False,
    ) -> TopicInfo:
        validate_topic_name(name)
        if name in self.topics:
            raise KafkaError(ErrorCode.topic_already_exists, f"Topic '{name}' already exists.")
        collision = _collision(name, self.topics)
        if collision:
            raise KafkaError(
                ErrorCode.invalid_topic_exception,
                f"Topic '{name}' collides with existing topic: {collision}",
            )
        partitions = self.default_partitions if num_partitions == -1 else num_partitions
        replication = self.default_replication_factor if replication_factor == -1 else replication_factor
        if partitions <= 0:
            raise KafkaError(
                ErrorCode.invalid_partitions, "Number of partitions was set to an invalid non-positive value."
            )
        if replication <= 0:
            raise KafkaError(
                ErrorCode.invalid_replication_factor,
                "Replication factor must be larger than 0, or -1 to use the default value.",
            )
        if replication > 1:
            raise KafkaError(
                ErrorCode.invalid_replication_factor,
                f"Unable to replicate the partition {replication} time(s): The target replication "
                f"factor of {replication} cannot be reached because only 1 broker(s) are registered "
                "or some brokers have all their log directories cordoned.",
            )
        overrides = self._validated(configs)
        info = TopicInfo(name, uuid.uuid4(), partitions, replication, overrides)
        if validate_only:
            return info
        self._index(info)
        self._persist()
        return info

    async def delete_topic(self, name: str) -> TopicInfo:
        """Gone from the catalogue at once; its logs are removed sharing the event loop."""
        info = self.topics.get(name)
        if info is None:
            raise KafkaError(ErrorCode.unknown_topic_or_partition, "This server does not host this topic-partition.")
        del self.topics[name]
        del self.topics_by_id[info.topic_id]
        self._persist()
        turns = LoopTurns()
        for index in range(info.partitions):
            self.replica_manager.remove_partition(name, index)
            await turns.maybe_yield()
        log.info("deleted topic %s (%s)", name, info.topic_id)
        return info

    async def create_partitions(self, name: str, count: int, validate_only: bool = False,
                                assignments: Sequence[Sequence[int]] = ()) -> None:
        info = self.topics.get(name)
        if info is None:
            raise KafkaError(ErrorCode.unknown_topic_or_partition, f"The topic '{name}' does not exist.")
        if count < info.partitions:
            raise KafkaError(
                ErrorCode.invalid_partitions,
                f"The topic {name} currently has {info.partitions} partition(s); {count} would not be an increase.",
            )
        if count == info.partitions:
            raise KafkaError(ErrorCode.invalid_partitions, f"Topic already has {info.partitions} partition(s).")
        if validate_only:
            return
        old = info.partitions
        info.partitions = count
        self._persist()
        try:
            await self._create_replicas(info, range(old, count))
        except OSError as exc:  # back to the old count: no partition stays half-created
            if self.topics.get(name) is info:
                info.partitions = old
                self._persist()
                for index in range(old, count):
                    self.replica_manager.remove_partition(name, index)
            raise _storage_error(name, exc) from exc

    def check_replica_assignment(self, replica_lists: Sequence[Sequence[int]]) -> None:
        """INVALID_REPLICA_ASSIGNMENT unless every partition's replicas are exactly this node."""
        check_replica_lists(replica_lists, {self.node_id})

    def partition_registration(self, name: str, index: int) -> PartitionRegistration | None:
        """Leader, epochs, replicas and ISR of a partition, for Metadata answers."""
        partition = self.replica_manager.partitions.get((name, index))
        if partition is None:
            return None
        return PartitionRegistration(tuple(partition.replicas), tuple(partition.isr), partition.leader_id,
                                     partition.leader_epoch, partition.partition_epoch)

    # --- configs --------------------------------------------------------------------------

    def _validated(self, configs: Mapping[str, str | None]) -> dict[str, str]:
        out: dict[str, str] = {}
        for key, value in configs.items():
            try:
                validate_topic_config(key, value)
            except InvalidConfig as exc:
                raise KafkaError(ErrorCode.invalid_config, str(exc)) from None
            assert value is not None
            out[key] = value
        return out

    async def set_topic_configs(self, name: str, overrides: Mapping[str, str | None],
                                validate_only: bool = False) -> None:
        """Replace a topic's overrides (AlterConfigs semantics)."""
        info = self._topic(name)
        validated = self._validated(overrides)
        if validate_only:
            return
        info.configs = validated
        self._persist()
        self.replica_manager.log_manager.reconfigure(name)

    def topic_overrides(self, name: str) -> dict[str, str]:
        return dict(self._topic(name).configs)

    def _topic(self, name: str) -> TopicInfo:
        info = self.topics.get(name)
        if info is None:
            raise KafkaError(ErrorCode.unknown_topic_or_partition, f"The topic '{name}' does not exist.")
        return info

    def resolved_configs(self, name: str) -> dict[str, ConfigEntry]:
        overrides = self.topics[name].configs if name in self.topics else {}
        return resolve_topic_configs(overrides, self.broker_layers)

    def broker_layers(self, key: str) -> list[tuple[str, ConfigSource]]:
        """A broker key's values in precedence order: cluster-wide dynamic default, static, built-in."""
        layers = self.static_layers(key)
        if key in self.cluster_configs:
            layers = [(self.cluster_configs[key], ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG), *layers]
        return layers

    def log_config(self, name: str) -> LogConfig:
        return LogConfig.from_resolved(self.resolved_configs(name))


def check_replica_lists(replica_lists: Sequence[Sequence[int]], registered: Container[int]) -> None:
    """Kafka's checks of a manual assignment, with its messages: no empty list, no broker twice,
    only registered brokers (INVALID_REPLICA_ASSIGNMENT)."""
    for replicas in replica_lists:
        if not replicas:
            raise KafkaError(
                ErrorCode.invalid_replica_assignment,
                "The manual partition assignment includes an empty replica list.",
            )
        for broker_id in replicas:
            if list(replicas).count(broker_id) > 1:
                raise KafkaError(
                    ErrorCode.invalid_replica_assignment,
                    f"The manual partition assignment includes the broker {broker_id} more than once.",
                )
            if broker_id not in registered:
                raise KafkaError(
                    ErrorCode.invalid_replica_assignment,
                    f"The manual partition assignment includes broker {broker_id}, but no "
                    "such broker is registered.",
                )


def _storage_error(topic: str, exc: OSError) -> KafkaError:
    log.error("creating the logs of %s failed: %s", topic, exc)
    return KafkaError(ErrorCode.kafka_storage_error, f"cannot create the logs of {topic}: {exc}")


def _collision(name: str, topics: Mapping[str, TopicInfo]) -> str | None:
    """Kafka refuses names that differ only by '.' vs '_' (metric names would collide)."""
    if "." not in name and "_" not in name:
        return None
    normalized = name.replace(".", "_")
    for existing in topics:
        if existing != name and existing.replace(".", "_") == normalized:
            return existing
    return None
