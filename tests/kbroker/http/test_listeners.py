"""kbroker.http.listeners: parsed as http://host:port[,...]; a bad value stops start-up naming the
key and where it was set, as every other key does."""

from __future__ import annotations

from pathlib import Path

import pytest

from kbroker.config.kafka_config import ConfigError, KafkaConfig
from kbroker.http.listeners import parse_http_listeners


def test_listeners_parse() -> None:
    assert parse_http_listeners("http://127.0.0.1:8080, http://:9000") == [("127.0.0.1", 8080), ("", 9000)]
    assert parse_http_listeners("") == []


@pytest.mark.parametrize("value", ["127.0.0.1:8080", "https://127.0.0.1:8080", "http://127.0.0.1", "http://h:99999"])
def test_a_bad_value_names_the_key_and_the_file(tmp_path: Path, value: str) -> None:
    properties = tmp_path / "server.properties"
    properties.write_text(f"node.id=1\nkbroker.http.listeners={value}\n")
    with pytest.raises(ConfigError) as raised:
        KafkaConfig.load(str(properties))
    message = str(raised.value)
    assert "kbroker.http.listeners" in message and f"{properties}:2" in message


def test_unset_is_off_and_not_an_unknown_key() -> None:
    config = KafkaConfig.load(None, ["kbroker.http.listeners=http://127.0.0.1:0"])
    assert config.unknown_keys() == [] and config.ignored_keys() == []
    assert KafkaConfig.load(None, []).get("kbroker.http.listeners") == ""
