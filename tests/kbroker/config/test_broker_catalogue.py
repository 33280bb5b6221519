"""The broker catalogue knows every key Kafka 4.3.1 defines, as Kafka's own ConfigDef (from the
jars, at test time) defines it, and checks server.properties values with Kafka's answers."""

from __future__ import annotations

from kbroker.config.broker_catalogue import BROKER_CONFIGS, InvalidValue, check_value, kafka_string
from tests.support.kafka_config_def import kafka_broker_keys, kafka_checks

# Values that exercise every parser and validator branch: numbers in and out of every range,
# malformed numbers, booleans, lists with duplicates and empty items, quorum addresses.
PROBES = ("", " ", "abc", "0", "-1", "1", "-2", "-3", "7", "10", "2147483648", "99999", "1.5", "0.9", "true",
          "FALSE", "a,a", "a,", "a, b", "1@h:1", "1@h", "h:1", "broker", "broker,controller", "compact,delete",
          "CreateTime", "Upgrade", "zstd", "-131073", "23", " 5 ", "1e3", "+4", "0x10", "9223372036854775808")


def test_catalogue_has_kafkas_names_types_defaults_validators_and_update_modes():
    kafka = {row["name"]: row for row in kafka_broker_keys()}
    ours = {name: d for name, d in BROKER_CONFIGS.items() if not name.startswith("kbroker.")}
    assert sorted(ours) == sorted(kafka)
    assert len(kafka) == 360
    for name, row in kafka.items():
        mine = ours[name]
        assert (mine.type.name, mine.default, mine.validator, mine.importance, mine.dynamic, mine.internal) == (
            row["type"], row["default"], row["validator"], row["importance"][0], row["dynamic"], row["internal"]
        ), name
        assert mine.required == (not row["has_default"]), name
        assert mine.doc, name


def test_value_checks_give_kafkas_answer_for_every_key():
    definitions = [d for name, d in BROKER_CONFIGS.items()
                   if not name.startswith("kbroker.") and d.type.name != "CLASS"]  # CLASS: Kafka loads the class
    pairs = [(d.name, value) for d in definitions for value in (*PROBES, *([d.default] if d.default else []))]
    expected = kafka_checks(pairs)
    answers = []
    for (name, value), kafka in zip(pairs, expected, strict=True):
        try:
            check_value(BROKER_CONFIGS[name], value)
            answers.append(None)
        except InvalidValue as exc:
            answers.append(str(exc))
        if answers[-1] != kafka:
            raise AssertionError(f"{name}={value!r}: Kafka says {kafka!r}, kbroker {answers[-1]!r}")
    assert len(pairs) > 10_000


def test_values_are_described_as_kafka_prints_them_once_parsed():
    assert kafka_string(BROKER_CONFIGS["num.partitions"], " 5 ") == "5"
    assert kafka_string(BROKER_CONFIGS["auto.create.topics.enable"], "TRUE") == "true"
    assert kafka_string(BROKER_CONFIGS["log.cleanup.policy"], "compact , delete") == "compact,delete"
    assert kafka_string(BROKER_CONFIGS["log.cleaner.min.cleanable.ratio"], "1") == "1.0"
    assert kafka_string(BROKER_CONFIGS["log.cleaner.io.max.bytes.per.second"], "1e10") == "1.0E10"
