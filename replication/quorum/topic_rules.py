"""Kafka's rules for topics, shared by the controller that decides and the brokers that ask.

Topic names (``validate_topic_name``, with Kafka 4's messages), which topics are internal,
names that collide once '.' and '_' are treated alike, manual replica assignments, and the per-request partition caps of
Kafka's controller (POLICY_VIOLATION beyond MAX_PARTITIONS_PER_REQUEST). ``TopicInfo`` is a
topic as a broker's catalogue knows it. Errors are raised as KafkaError with Kafka's code and
message.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Collection, Container, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from kbroker.protocol.errors import ErrorCode, KafkaError

MAX_TOPIC_NAME_LENGTH = 249
# Kafka's internal topics (Topic.INTERNAL_TOPICS): flagged is_internal in Metadata, so clients'
# exclude-internal listings and pattern subscriptions skip them, and closed to clients' writes.
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state", "__share_group_state"})
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


class RequestedTopic(Protocol):
    """What the partition cap reads of a CreateTopics topic (kio's CreatableTopic, any version)."""

    @property
    def num_partitions(self) -> int: ...

    @property
    def assignments(self) -> Collection[object]: ...


def check_partitions_requested(topics: Sequence[RequestedTopic], default_partitions: int) -> None:
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


def colliding_topic(name: str, topics: Mapping[str, object]) -> str | None:
    """Kafka refuses names that differ only by '.' vs '_' (metric names would collide)."""
    if "." not in name and "_" not in name:
        return None
    normalized = name.replace(".", "_")
    for existing in topics:
        if existing != name and existing.replace(".", "_") == normalized:
            return existing
    return None
