"""The typed settings the composition roots build from a KafkaConfig: the dataclasses' defaults
are KafkaConfig's (tests build settings from the defaults), and each key lands in its field."""

from __future__ import annotations

import logging

import pytest
from kbroker.replication.replication_settings import ReplicationSettings

from kbroker.cluster.broker_lifecycle import LifecycleSettings
from kbroker.config.kafka_config import KafkaConfig
from kbroker.config.settings import (
    group_coordinator_settings,
    lifecycle_settings,
    replication_settings,
    socket_server_settings,
)
from kbroker.groups.group_settings import ClassicGroupSettings, ConsumerGroupSettings, GroupCoordinatorSettings
from kbroker.network.socket_server import SocketServerSettings


def config(**settings: str) -> KafkaConfig:
    return KafkaConfig(settings, dict.fromkeys(settings, "test"))


def test_the_dataclass_defaults_are_kafka_configs() -> None:
    defaults = config()
    assert group_coordinator_settings(defaults) == GroupCoordinatorSettings()
    assert socket_server_settings(defaults) == SocketServerSettings()
    assert replication_settings(defaults) == ReplicationSettings()
    assert lifecycle_settings(defaults) == LifecycleSettings(quorum_voters=tuple(defaults.quorum_voters))


def test_group_keys_land_in_their_fields() -> None:
    settings = group_coordinator_settings(config(**{
        "group.min.session.timeout.ms": "100", "group.max.session.timeout.ms": "200",
        "offsets.retention.minutes": "2", "offsets.retention.check.interval.ms": "300",
        "group.initial.rebalance.delay.ms": "0", "group.max.size": "5",
        "group.consumer.session.timeout.ms": "400", "group.consumer.heartbeat.interval.ms": "50",
        "group.consumer.max.size": "6", "group.consumer.assignors": "range",
        "group.consumer.migration.policy": "Upgrade",
    }))
    assert settings == GroupCoordinatorSettings(
        min_session_timeout_ms=100, max_session_timeout_ms=200, offsets_retention_ms=120_000,
        offsets_retention_check_interval_ms=300,
        classic=ClassicGroupSettings(initial_rebalance_delay_ms=0, max_size=5),
        consumer=ConsumerGroupSettings(session_timeout_ms=400, heartbeat_interval_ms=50, max_size=6,
                                       assignors=("range",), migration_policy="upgrade"),
    )


def test_kafka_assignor_class_names_are_aliases_and_unknown_ones_are_skipped(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING)
    assignors = "org.apache.kafka.coordinator.group.assignor.RangeAssignor, sticky, uniform"
    settings = group_coordinator_settings(config(**{"group.consumer.assignors": assignors}))
    assert settings.consumer.assignors == ("range", "uniform")
    assert "sticky is not a known assignor" in caplog.text
    only_unknown = group_coordinator_settings(config(**{"group.consumer.assignors": "sticky"}))
    assert only_unknown.consumer.assignors == ("uniform",)


def test_an_unknown_migration_policy_is_read_as_bidirectional() -> None:
    settings = group_coordinator_settings(config(**{"group.consumer.migration.policy": "sideways"}))
    assert settings.consumer.migration_policy == "bidirectional"


def test_socket_server_keys() -> None:
    settings = socket_server_settings(config(**{
        "max.connections.per.ip.overrides": "10.0.0.1:3,[::1]:4", "inter.broker.listener.name": "internal",
        "connections.max.idle.ms": "-1",
    }))
    assert settings.max_connections_per_ip_overrides == {"10.0.0.1": 3, "::1": 4}
    assert settings.inter_broker_listener == "INTERNAL"
    assert settings.connections_max_idle_ms == -1


def test_lifecycle_keys() -> None:
    settings = lifecycle_settings(config(**{
        "broker.heartbeat.interval.ms": "500", "inter.broker.listener.name": "INTERNAL", "broker.rack": "r1",
    }))
    assert settings.heartbeat_interval_ms == 500
    assert (settings.inter_broker_listener_name, settings.rack) == ("INTERNAL", "r1")
