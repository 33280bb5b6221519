"""Topic config resolution: value, source and synonyms as DescribeConfigs reports them."""

import pytest
from kbroker.storage.log_config import (
    ConfigSource,
    InvalidConfig,
    LogConfig,
    resolve_topic_configs,
    validate_topic_config,
)


def broker(explicit: dict[str, str], dynamic: dict[str, str] | None = None):
    defaults = {"log.retention.hours": "168", "log.segment.bytes": "1073741824", "min.insync.replicas": "1"}

    def layers(key: str):
        out = []
        if key in (dynamic or {}):
            out.append((dynamic[key], ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG))
        if key in explicit:
            out.append((explicit[key], ConfigSource.STATIC_BROKER_CONFIG))
        if key in defaults:
            out.append((defaults[key], ConfigSource.DEFAULT_CONFIG))
        return out

    return layers


def test_cluster_dynamic_default_wins_over_static_and_lists_every_layer():
    entry = resolve_topic_configs({}, broker({"min.insync.replicas": "2"}, {"min.insync.replicas": "1"}))[
        "min.insync.replicas"
    ]
    assert (entry.value, entry.source) == ("1", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG)
    assert [s[2] for s in entry.synonyms] == [
        ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG, ConfigSource.STATIC_BROKER_CONFIG, ConfigSource.DEFAULT_CONFIG,
    ]


def test_topic_override_wins_and_is_first_synonym():
    resolved = resolve_topic_configs({"retention.ms": "1000"}, broker({"log.retention.ms": "5000"}))
    entry = resolved["retention.ms"]
    assert (entry.value, entry.source) == ("1000", ConfigSource.DYNAMIC_TOPIC_CONFIG)
    assert [s[0] for s in entry.synonyms] == ["retention.ms", "log.retention.ms"]


def test_broker_units_are_converted_and_secondary_defaults_hidden():
    entry = resolve_topic_configs({}, broker({}))["retention.ms"]
    assert (entry.value, entry.source, entry.synonyms) == ("604800000", ConfigSource.DEFAULT_CONFIG, ())
    entry = resolve_topic_configs({}, broker({"log.retention.minutes": "2"}))["retention.ms"]
    assert (entry.value, entry.source) == ("120000", ConfigSource.STATIC_BROKER_CONFIG)


def test_primary_broker_default_is_listed():
    entry = resolve_topic_configs({}, broker({}))["segment.bytes"]
    assert entry.synonyms == (("log.segment.bytes", "1073741824", ConfigSource.DEFAULT_CONFIG),)


def test_log_config_reads_policy_and_timestamp_type():
    resolved = resolve_topic_configs(
        {"cleanup.policy": "compact,delete", "message.timestamp.type": "LogAppendTime"}, broker({})
    )
    config = LogConfig.from_resolved(resolved)
    assert config.compact and config.delete and config.log_append_time


@pytest.mark.parametrize(("name", "value", "message"), [
    ("foo.bar", "1", "Unknown topic config name: foo.bar"),
    ("retention.ms", "abc", "Invalid value abc for configuration retention.ms: Not a number of type LONG"),
    ("cleanup.policy", "shred", "String must be one of"),
    ("preallocate", "yes", "Expected value to be either true or false"),
])
def test_invalid_configs_use_kafkas_wording(name, value, message):
    with pytest.raises(InvalidConfig, match=message):
        validate_topic_config(name, value)
