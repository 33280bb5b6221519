"""ReplicationSettings and ClusterLinks: what the broker gives the replication layer in cluster mode.

``ReplicationSettings`` carries Kafka's replica.* configuration (names and defaults as Kafka's);
``ClusterLinks`` is how replication reaches the rest of the cluster without knowing about the
controller or the metadata log: a broker's inter-broker endpoint, this broker's epoch, and the
AlterPartition round trip to the controller.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from .inter_broker_client import LinkSecurity
from .quorum.partition_registration import PartitionRegistration

# topic, partition, topic_id, leader_epoch, partition_epoch, new_isr -> the controller's answer.
# Raises KafkaError carrying the controller's error code (e.g. INVALID_UPDATE_VERSION).
AlterPartition = Callable[[str, int, uuid.UUID, int, int, list[int]], Awaitable[PartitionRegistration]]


@dataclass(slots=True, frozen=True)
class ReplicationSettings:
    replica_lag_time_max_ms: int = 30000
    replica_fetch_wait_max_ms: int = 500
    replica_fetch_min_bytes: int = 1
    replica_fetch_max_bytes: int = 1048576
    replica_fetch_response_max_bytes: int = 10485760
    replica_fetch_backoff_ms: int = 1000
    replica_socket_timeout_ms: int = 30000
    # KIP-392: org.apache.kafka.common.replica.RackAwareReplicaSelector lets consumers with a
    # client.rack read from a follower in their rack; None (Kafka's default) reads from leaders.
    replica_selector_class: str | None = None
    # Followers fetch through KIP-227 sessions, as Kafka's do; False: every fetch full and sessionless.
    replica_fetch_sessions: bool = True


@dataclass(slots=True, frozen=True)
class ClusterLinks:
    source_host: str | None
    endpoint: Callable[[int], tuple[str, int] | None]  # broker id -> inter-broker (host, port)
    broker_epoch: Callable[[], int]
    alter_partition: AlterPartition
    # Kafka's isReplicaIsrEligible (KIP-903): (broker id, broker epoch its fetch carried) -> may it
    # join an ISR (registered with that epoch, not fenced, not shutting down)? None: always.
    replica_eligible: Callable[[int, int], bool] | None = None
    rack: Callable[[int], str | None] = lambda _broker_id: None  # broker.rack of a broker
    # Does the cluster's metadata have this partition (topic, index), hosted here or not?
    partition_known: Callable[[str, int], bool] = lambda _topic, _index: False
    security: LinkSecurity | None = None  # the inter-broker listener's TLS / SASL (None: PLAINTEXT)
