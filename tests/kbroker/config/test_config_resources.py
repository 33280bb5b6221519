"""GROUP, CLIENT_METRICS and BROKER_LOGGER config resources: validation with Kafka's codes and
messages, what DescribeConfigs shows, the live logger tree, and their ConfigRecords in the
metadata image and its snapshot (so every broker of a cluster sees the same configs)."""

from __future__ import annotations

import logging

import pytest
from kbroker.protocol.errors import KafkaError
from kbroker.replication.quorum.metadata_image import MetadataImage
from kbroker.replication.quorum.metadata_records import ConfigRecord
from kbroker.replication.quorum.metadata_snapshot import image_records
from kbroker.storage.log_config import ConfigSource

from kbroker.config import broker_loggers
from kbroker.config.client_metrics_config import describe_client_metrics, validate_client_metrics
from kbroker.config.group_config import GROUP_CONFIGS, describe_group, validate_group_configs


def refused(call, *args) -> tuple[str, str]:
    with pytest.raises(KafkaError) as info:
        call(*args)
    return info.value.code.name, info.value.message


def no_broker_overrides(_key: str) -> str | None:
    return None


@pytest.mark.parametrize(("configs", "expected"), [
    ({"no.such": "1"}, ("invalid_config", "Unknown group config name: no.such")),
    ({"consumer.session.timeout.ms": "abc"},
     ("invalid_config", "Invalid value abc for configuration consumer.session.timeout.ms: Not a number of type INT")),
    ({"share.record.lock.duration.ms": "10"},
     ("invalid_config",
      "Invalid value 10 for configuration share.record.lock.duration.ms: Value must be at least 1000")),
    ({"consumer.session.timeout.ms": "70000"},
     ("invalid_config",
      "consumer.session.timeout.ms must be less than or equal to group.consumer.max.session.timeout.ms")),
    ({"consumer.heartbeat.interval.ms": "1000"},
     ("invalid_config",
      "consumer.heartbeat.interval.ms must be greater than or equal to group.consumer.min.heartbeat.interval.ms")),
    ({"share.isolation.level": "none"},
     ("invalid_config", "Invalid value none for configuration share.isolation.level: String must be one of: "
                        "read_committed, read_uncommitted")),
    ({"share.renew.acknowledge.enable": "yes"},
     ("invalid_config", "Invalid value yes for configuration share.renew.acknowledge.enable: Expected value to be "
                        "either true or false")),
    ({"streams.num.standby.replicas": "3"},
     ("invalid_config",
      "streams.num.standby.replicas must be less than or equal to group.streams.max.standby.replicas")),
])  # fmt: skip
def test_group_configs_are_refused_as_kafka_refuses_them(configs, expected):
    assert refused(validate_group_configs, "g", configs, no_broker_overrides) == expected


def test_group_bounds_follow_the_brokers_settings_and_good_values_pass():
    broker = {"group.consumer.max.session.timeout.ms": "90000", "group.consumer.max.heartbeat.interval.ms": "90000"}.get
    validate_group_configs("g", {"consumer.session.timeout.ms": "80000"}, broker)
    assert refused(validate_group_configs, "g", {"consumer.session.timeout.ms": "50000",
                                                 "consumer.heartbeat.interval.ms": "50000"}, broker) == (
        "invalid_config", "consumer.session.timeout.ms must be greater than consumer.heartbeat.interval.ms")
    validate_group_configs("g", {"share.auto.offset.reset": "by_duration:PT1H",
                                 "share.isolation.level": "read_committed", "consumer.assignment.interval.ms": "0"},
                           no_broker_overrides)
    assert refused(validate_group_configs, "", {}, no_broker_overrides) == (
        "invalid_request", "Default group resources are not allowed.")


def test_a_group_is_described_with_its_override_first_then_the_broker_layers():
    layers = {"group.consumer.session.timeout.ms": [("50000", ConfigSource.STATIC_BROKER_CONFIG),
                                                    ("45000", ConfigSource.DEFAULT_CONFIG)]}
    entries = {e.name: e for e in describe_group("g", {"consumer.heartbeat.interval.ms": "6000"},
                                                 lambda key: layers.get(key, []))}
    assert sorted(entries) == sorted(GROUP_CONFIGS) and len(entries) == 17
    beat = entries["consumer.heartbeat.interval.ms"]
    assert (beat.value, beat.source) == ("6000", ConfigSource.GROUP_CONFIG)
    assert beat.synonyms == (("consumer.heartbeat.interval.ms", "6000", ConfigSource.GROUP_CONFIG),
                             ("group.consumer.heartbeat.interval.ms", "5000", ConfigSource.DEFAULT_CONFIG))
    session = entries["consumer.session.timeout.ms"]
    assert (session.value, session.source) == ("50000", ConfigSource.STATIC_BROKER_CONFIG)
    reset = entries["share.auto.offset.reset"]
    assert reset.synonyms == (("share.auto.offset.reset", "latest", ConfigSource.DEFAULT_CONFIG),)


@pytest.mark.parametrize(("configs", "expected"), [
    ({"nosuch": "1"}, ("invalid_request", "Unknown client metrics configuration: nosuch")),
    ({"interval.ms": "50"},
     ("invalid_request", "Invalid value 50 for interval.ms, interval must be between 100 and 3600000 (1 hour)")),
    ({"interval.ms": "soon"},
     ("invalid_config", "Invalid value soon for configuration interval.ms: Not a number of type INT")),
    ({"match": "nosuch=1"}, ("invalid_config", "Illegal client matching pattern: nosuch=1")),
    ({"match": "client_id="}, ("invalid_config", "Illegal client matching pattern: client_id=")),
    ({"match": "client_id=("}, ("invalid_config", "Illegal client matching pattern: client_id=(")),
    ({"metrics": "a,,b"}, ("invalid_config", "Configuration 'metrics' values must not be empty.")),
])  # fmt: skip
def test_client_metrics_are_refused_as_kafka_refuses_them(configs, expected):
    assert refused(validate_client_metrics, "s", configs) == expected


def test_client_metrics_described_with_duplicates_dropped_and_defaults():
    validate_client_metrics("s", {"metrics": "a, a ,b", "match": "client_id=app-.*", "interval.ms": " 1000"})
    entries = {e.name: e for e in describe_client_metrics("s", {"metrics": "a, a ,b", "interval.ms": " 1000"})}
    assert (entries["metrics"].value, entries["metrics"].source) == ("a,b", ConfigSource.CLIENT_METRICS_CONFIG)
    assert entries["interval.ms"].value == "1000"
    assert (entries["match"].value, entries["match"].source, entries["match"].synonyms) == (
        "", ConfigSource.DEFAULT_CONFIG, ())
    assert refused(describe_client_metrics, "", {}) == (
        "invalid_request", "Client metrics subscription name must not be empty")


def test_broker_loggers_set_and_unset_the_live_python_loggers():
    logger = logging.getLogger("kbroker.config.test_probe")
    parent_level = broker_loggers.loggers()["kbroker.config.test_probe"]
    broker_loggers.validate_changes([(broker_loggers.SET, "kbroker.config.test_probe", "TRACE")])
    broker_loggers.apply_changes([(broker_loggers.SET, "kbroker.config.test_probe", "TRACE")])
    try:
        assert logger.isEnabledFor(broker_loggers.TRACE)
        assert broker_loggers.loggers()["kbroker.config.test_probe"] == "TRACE"
    finally:
        broker_loggers.apply_changes([(broker_loggers.DELETE, "kbroker.config.test_probe", None)])
    assert broker_loggers.loggers()["kbroker.config.test_probe"] == parent_level
    assert refused(broker_loggers.validate_changes, [(broker_loggers.SET, "nope", "DEBUG")]) == (
        "invalid_config", "Logger nope does not exist!")
    assert refused(broker_loggers.validate_changes, [(broker_loggers.SET, "root", "debug")]) == (
        "invalid_config", "Cannot set the log level of root to debug as it is not a supported log level. "
                          "Valid log levels are DEBUG, ERROR, FATAL, INFO, TRACE, WARN")
    assert refused(broker_loggers.validate_changes, [(broker_loggers.DELETE, "root", None)]) == (
        "invalid_request", "Removing the log level of the root logger is not allowed")
    assert refused(broker_loggers.validate_changes, [(broker_loggers.APPEND, "root", "x")]) == (
        "invalid_request", "APPEND operation is not allowed for the BROKER_LOGGER resource")


def test_group_and_client_metrics_configs_replay_and_survive_a_snapshot():
    image = MetadataImage()
    for offset, record in enumerate([
        ConfigRecord(32, "g", "consumer.session.timeout.ms", "50000"),
        ConfigRecord(32, "g", "consumer.heartbeat.interval.ms", "6000"),
        ConfigRecord(16, "s", "interval.ms", "1000"),
        ConfigRecord(32, "gone", "consumer.heartbeat.interval.ms", "6000"),
        ConfigRecord(32, "gone", "consumer.heartbeat.interval.ms", None),
        ConfigRecord(32, "g", "consumer.session.timeout.ms", None),
    ]):
        image.apply(offset, record)
    assert image.resource_configs == {(32, "g"): {"consumer.heartbeat.interval.ms": "6000"},
                                      (16, "s"): {"interval.ms": "1000"}}
    rebuilt = MetadataImage()
    for offset, record in enumerate(image_records(image)):
        rebuilt.apply(offset, record)
    assert rebuilt.resource_configs == image.resource_configs
