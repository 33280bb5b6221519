"""Typed settings for the parts below the composition roots, each built once from a KafkaConfig.

The rule: a part takes a small frozen settings dataclass that lives beside it (its fields are
what it acts on, its defaults Kafka's), and the builder that reads that dataclass's keys from
the configuration lives here. So key names are read in ``kbroker/config`` and in the
composition roots (``kbroker/node``) only; a part never sees ``KafkaConfig`` and cannot
read a key later. ``replication/`` could not import the configuration anyway (it is a layer
below ``kbroker``), which is why the builders live on this side rather than beside the parts.

The roots call these builders once, when they are built, and hand the results down.
"""

from __future__ import annotations

import logging

from kbroker.cluster.broker_lifecycle import LifecycleSettings
from kbroker.config.kafka_config import KafkaConfig
from kbroker.groups import assignors, migration
from kbroker.groups.group_settings import ClassicGroupSettings, ConsumerGroupSettings, GroupCoordinatorSettings
from kbroker.handlers.services import BrokerSettings
from kbroker.network.connection_quotas import parse_per_ip_overrides
from kbroker.network.socket_server import SocketServerSettings
from kbroker.replication.replication_settings import ReplicationSettings

log = logging.getLogger(__name__)


def handler_settings(config: KafkaConfig) -> BrokerSettings:
    """The broker keys the request handlers act on."""
    return BrokerSettings(
        auto_create_topics_enable=config.get_bool("auto.create.topics.enable"),
        delete_topic_enable=config.get_bool("delete.topic.enable"),
        offsets_topic_num_partitions=config.get_int("offsets.topic.num.partitions"),
        offsets_topic_replication_factor=config.get_int("offsets.topic.replication.factor"),
        offset_metadata_max_bytes=config.get_int("offset.metadata.max.bytes"),
        transaction_state_log_num_partitions=config.get_int("transaction.state.log.num.partitions"),
        transaction_state_log_replication_factor=config.get_int("transaction.state.log.replication.factor"),
        transaction_state_log_min_isr=config.get_int("transaction.state.log.min.isr"),
        transaction_state_log_segment_bytes=config.get_int("transaction.state.log.segment.bytes"),
    )


def socket_server_settings(config: KafkaConfig) -> SocketServerSettings:
    """The listeners' limits (KafkaConfig has validated the per-ip overrides already)."""
    return SocketServerSettings(
        socket_request_max_bytes=config.get_int("socket.request.max.bytes"),
        max_connections=config.get_int("max.connections"),
        max_connections_per_ip=config.get_int("max.connections.per.ip"),
        max_connections_per_ip_overrides=parse_per_ip_overrides(config.get("max.connections.per.ip.overrides") or ""),
        connections_max_idle_ms=config.get_int("connections.max.idle.ms"),
        queued_max_request_bytes=config.get_int("queued.max.request.bytes"),
        inter_broker_listener=(config.get("inter.broker.listener.name") or "").upper() or None,
    )


def group_coordinator_settings(config: KafkaConfig) -> GroupCoordinatorSettings:
    """The group service's keys, with the classic and the consumer coordinators'."""
    return GroupCoordinatorSettings(
        min_session_timeout_ms=config.get_int("group.min.session.timeout.ms"),
        max_session_timeout_ms=config.get_int("group.max.session.timeout.ms"),
        offsets_retention_ms=config.get_int("offsets.retention.minutes") * 60_000,
        offsets_retention_check_interval_ms=config.get_int("offsets.retention.check.interval.ms"),
        classic=ClassicGroupSettings(
            initial_rebalance_delay_ms=config.get_int("group.initial.rebalance.delay.ms"),
            max_size=config.get_int("group.max.size"),
        ),
        consumer=ConsumerGroupSettings(
            session_timeout_ms=config.get_int("group.consumer.session.timeout.ms"),
            heartbeat_interval_ms=config.get_int("group.consumer.heartbeat.interval.ms"),
            max_size=config.get_int("group.consumer.max.size"),
            assignors=_consumer_assignors(config.get("group.consumer.assignors") or ""),
            migration_policy=_migration_policy(config.get("group.consumer.migration.policy")),
        ),
    )


def _consumer_assignors(value: str) -> tuple[str, ...]:
    """group.consumer.assignors as canonical names (Kafka's class names are aliases); unknown
    names are logged and skipped, and with none left the uniform assignor serves."""
    configured = [name for name in value.split(",") if name.strip()]
    known = tuple(name for name in (assignors.canonical_name(n) for n in configured) if name)
    for unknown in (n.strip() for n in configured if assignors.canonical_name(n) is None):
        log.warning("group.consumer.assignors: %s is not a known assignor (uniform, range); ignored", unknown)
    return known or (assignors.UNIFORM,)


def _migration_policy(value: str | None) -> str:
    """group.consumer.migration.policy, case-insensitive; an unknown one is logged and read as
    bidirectional (Kafka's default)."""
    policy = (value or "bidirectional").strip().lower()
    if policy not in migration.POLICIES:
        log.warning("group.consumer.migration.policy: unknown value %s; using bidirectional", policy)
        return "bidirectional"
    return policy


def lifecycle_settings(config: KafkaConfig) -> LifecycleSettings:
    """What the broker's lifecycle manager needs to register and heartbeat."""
    return LifecycleSettings(
        quorum_voters=tuple(config.quorum_voters),
        heartbeat_interval_ms=config.get_int("broker.heartbeat.interval.ms"),
        session_timeout_ms=config.get_int("broker.session.timeout.ms"),
        fetch_timeout_ms=config.get_int("controller.quorum.fetch.timeout.ms"),
        inter_broker_listener_name=config.get("inter.broker.listener.name") or "PLAINTEXT",
        rack=config.get("broker.rack"),
    )


def replication_settings(config: KafkaConfig) -> ReplicationSettings:
    """The replica.* keys replication acts on in cluster mode."""
    return ReplicationSettings(
        replica_lag_time_max_ms=config.get_int("replica.lag.time.max.ms"),
        replica_fetch_wait_max_ms=config.get_int("replica.fetch.wait.max.ms"),
        replica_fetch_min_bytes=config.get_int("replica.fetch.min.bytes"),
        replica_fetch_max_bytes=config.get_int("replica.fetch.max.bytes"),
        replica_fetch_response_max_bytes=config.get_int("replica.fetch.response.max.bytes"),
        replica_fetch_backoff_ms=config.get_int("replica.fetch.backoff.ms"),
        replica_socket_timeout_ms=config.get_int("replica.socket.timeout.ms"),
        replica_selector_class=config.get("replica.selector.class"),
    )
