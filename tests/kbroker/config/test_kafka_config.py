"""Broker configuration: Kafka's keys and defaults; bad keys and values are named with their source."""

from __future__ import annotations

import os

import pytest

from kbroker.config.kafka_config import ConfigError, KafkaConfig, parse_properties


def test_defaults_are_the_cli_contract(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    config = KafkaConfig.load()
    assert config.listeners == [("PLAINTEXT", "localhost", 9092)]
    assert config.log_dirs == [os.path.join(str(tmp_path), "kbroker-data")]
    assert config.node_id == 1
    assert config.get("num.partitions") == "1"
    assert config.get_int("message.max.bytes") == 1048588


def test_file_then_overrides_win(tmp_path):
    path = tmp_path / "server.properties"
    path.write_text("# comment\nnum.partitions=3\nlog.dirs = /data/a,\\\n  /data/b\nlisteners:PLAINTEXT://0.0.0.0:9093\n")
    config = KafkaConfig.load(str(path), ["num.partitions=5"])
    assert config.get_int("num.partitions") == 5
    assert config.log_dirs == ["/data/a", "/data/b"]
    assert config.listeners == [("PLAINTEXT", "0.0.0.0", 9093)]
    assert config.sources["log.dirs"] == f"{path}:3"


def test_unknown_key_is_accepted_as_kafka_does_and_named_with_its_file_line(tmp_path):
    path = tmp_path / "server.properties"
    path.write_text("num.partitions=1\nnum.partitoins=2\nlistener.name.internal.ssl.keymanager.algorithm=PEM\n")
    config = KafkaConfig.load(str(path))
    assert config.get_int("num.partitions") == 1
    assert config.unknown_keys() == [f"num.partitoins (from {path}:2)"]
    assert config.ignored_keys() == ["listener.name.internal.ssl.keymanager.algorithm"]


def test_malformed_value_names_key_and_source():
    with pytest.raises(ConfigError, match=r"^Invalid value abc for configuration num.partitions: Not a number of type "
                                          r"INT \(from --override\)$"):
        KafkaConfig.load(None, ["num.partitions=abc"])
    with pytest.raises(ConfigError, match=r"auto\.create\.topics\.enable"):
        KafkaConfig.load(None, ["auto.create.topics.enable=maybe"])
    with pytest.raises(ConfigError, match="listeners"):
        KafkaConfig.load(None, ["listeners=localhost9092"])


def test_real_kafka_server_properties_keys_are_accepted():
    config = KafkaConfig.load(None, [
        "process.roles=broker,controller", "controller.quorum.voters=1@127.0.0.1:9093",
        "controller.listener.names=CONTROLLER", "offsets.topic.replication.factor=1",
        "group.initial.rebalance.delay.ms=0",
    ])
    assert config.quorum_voters == [(1, "127.0.0.1", 9093)]
    assert config.process_roles == {"broker", "controller"} and not config.implicit_single_node
    assert "listener.security.protocol.map" not in config.explicit
    with pytest.raises(ConfigError, match=r"controller\.quorum\.voters"):
        KafkaConfig.load(None, ["controller.quorum.voters=1-127.0.0.1:9093"])


def test_properties_parser_handles_separators_and_continuations():
    parsed = parse_properties("a=1\nb : 2\nc 3\n! bang comment\nd=x\\\n   y\n")
    assert [(k, v) for _, k, v in parsed] == [("a", "1"), ("b", "2"), ("c", "3"), ("d", "xy")]


def test_connection_limit_keys_have_kafkas_defaults_and_checks():
    config = KafkaConfig.load()
    assert config.get_int("max.connections") == config.get_int("max.connections.per.ip") == 2**31 - 1
    assert config.get("max.connections.per.ip.overrides") == ""
    assert config.get_int("connections.max.idle.ms") == 600_000
    assert config.get_int("queued.max.request.bytes") == -1
    assert "max.connections" not in config.ignored_keys()
    KafkaConfig.load(None, ["max.connections.per.ip=0", "max.connections.per.ip.overrides=10.0.0.1:5,[::1]:2"])
    KafkaConfig.load(None, ["queued.max.request.bytes=104857600"])
    with pytest.raises(ConfigError, match=r"queued\.max\.request\.bytes .* socket\.request\.max\.bytes"):
        KafkaConfig.load(None, ["queued.max.request.bytes=1000"])
    with pytest.raises(ConfigError, match=r"max\.connections\.per\.ip can be 0 .* only if"):
        KafkaConfig.load(None, ["max.connections.per.ip=0"])
    with pytest.raises(ConfigError, match=r"per\.ip\.overrides' \(from --override\): expected host:count"):
        KafkaConfig.load(None, ["max.connections.per.ip.overrides=10.0.0.1"])
    with pytest.raises(ConfigError, match=r"max\.connections: Value must be at least 0 \(from --override\)"):
        KafkaConfig.load(None, ["max.connections=-1"])
