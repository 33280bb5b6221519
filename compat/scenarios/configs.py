"""Configs: DescribeConfigs for topics and brokers (values, sources, synonyms, read-only
flags), IncrementalAlterConfigs SET/DELETE, legacy AlterConfigs, and configs taking effect."""

from __future__ import annotations

from typing import Any

from compat.clients.base import Rec
from compat.scenarios import Run, scenario

DESCRIBE = "admin.describe_configs"
ALTER = "admin.alter_configs"
TOPIC_KEYS = ["cleanup.policy", "compression.type", "max.message.bytes", "message.timestamp.type",
              "min.insync.replicas", "retention.bytes", "retention.ms", "segment.bytes"]  # fmt: skip
BROKER_KEYS = ["auto.create.topics.enable", "compression.type", "default.replication.factor",
               "log.cleanup.policy", "log.retention.check.interval.ms", "log.retention.hours",
               "log.segment.bytes", "message.max.bytes", "min.insync.replicas", "num.partitions"]  # fmt: skip


@scenario("configs/topic-defaults", needs={DESCRIBE})
def topic_defaults(run: Run) -> Any:
    """Every config of a fresh topic: value, source, read-only, sensitive (no overrides)."""
    return run.client.describe_configs("topic", run.topic())


@scenario("configs/topic-synonyms", needs={DESCRIBE})
def topic_synonyms(run: Run) -> Any:
    """Overrides and defaults with their synonyms (topic key, then the broker keys behind it)."""
    t = run.topic(configs={"retention.ms": "3600000", "cleanup.policy": "compact,delete"})
    return run.client.describe_configs("topic", t, keys=TOPIC_KEYS, synonyms=True)


@scenario("configs/topic-unknown", needs={DESCRIBE}, clients=("aiokafka", "confluent", "java", "java-cli"))
def topic_unknown(run: Run) -> Any:
    """Describing the configs of a missing topic. (kafka-python drops the resource's error.)"""
    return run.client.describe_configs("topic", run.name())


@scenario("configs/broker-keys", needs={DESCRIBE})
def broker_keys(run: Run) -> Any:
    """Broker 1's settings from server.properties and defaults, with sources and synonyms."""
    return run.client.describe_configs("broker", "1", keys=BROKER_KEYS, synonyms=True)


@scenario("configs/broker-all-names", needs={DESCRIBE}, clients=("kafka-python", "java"))
def broker_all_names(run: Run) -> Any:
    """The set of config names broker 1 describes (values are node-specific: paths, ports)."""
    described = run.client.describe_configs("broker", "1")
    return sorted(described) if "error" not in described else described


# Keys whose values name this node's ports and directories (the rest of their entry is compared).
NODE_SPECIFIC = ("advertised.listeners", "controller.quorum.voters", "listeners", "log.dir", "log.dirs")


@scenario("configs/broker-all-entries", needs={DESCRIBE}, clients=("kafka-python", "java"))
def broker_all_entries(run: Run) -> Any:
    """Every entry broker 1 describes with its synonyms: value (as Kafka prints it once parsed),
    source, read-only, sensitive (passwords without a value), type."""
    described = run.client.describe_configs("broker", "1", synonyms=True)
    if "error" in described:
        return described
    for key in NODE_SPECIFIC:
        entry = described.get(key)
        if entry is not None:
            entry["value"] = "<node-specific>"
            entry["synonyms"] = [[name, "<node-specific>", source] for name, _value, source in entry["synonyms"]]
    return described


@scenario("configs/broker-cli-all", needs={DESCRIBE}, clients=("java-cli",))
def broker_cli_all(run: Run) -> Any:
    """kafka-configs --describe --entity-type brokers --entity-name 1 --all: every line (sorted;
    the tool prints the keys in the broker's answer order), node-specific values masked."""
    described = run.client.describe_configs("broker", "1")
    lines = []
    for line in described.get("stdout", []):
        key = line.strip().split("=", 1)[0]
        lines.append(f"  {key}=<node-specific>" if line.startswith("  ") and key in NODE_SPECIFIC else line)
    return {**described, "stdout": sorted(lines)}


@scenario("configs/cluster-default", needs={DESCRIBE}, clients=("java", "java-cli"))
def cluster_default(run: Run) -> Any:
    """The cluster-wide dynamic broker defaults (broker resource named ""; the Python clients
    refuse a broker name that is not a number)."""
    return run.client.describe_configs("broker", "")


@scenario("configs/alter-set-delete", needs={ALTER, DESCRIBE})
def alter_set_delete(run: Run) -> Any:
    """SET two keys, then DELETE one: values and sources after each step."""
    t = run.topic()
    keys = ["cleanup.policy", "retention.ms"]
    set_answer = run.client.alter_configs(t, [("retention.ms", "set", "1234567"), ("cleanup.policy", "set", "compact")])
    run.harness.wait_config(t, {"retention.ms": "1234567", "cleanup.policy": "compact"})
    after_set = run.client.describe_configs("topic", t, keys=keys)
    delete_answer = run.client.alter_configs(t, [("retention.ms", "delete", None)])
    run.harness.wait_config(t, {"retention.ms": "604800000"})
    after_delete = run.client.describe_configs("topic", t, keys=keys)
    return {"set": set_answer, "after_set": after_set, "delete": delete_answer, "after_delete": after_delete}


@scenario("configs/alter-invalid", needs={ALTER})
def alter_invalid(run: Run) -> Any:
    """Unknown key and malformed value (INVALID_CONFIG); unknown topic."""
    t = run.topic()
    return {
        "unknown_key": run.client.alter_configs(t, [("no.such.config", "set", "1")]),
        "bad_value": run.client.alter_configs(t, [("retention.ms", "set", "soon")]),
        "below_min": run.client.alter_configs(t, [("segment.bytes", "set", "1000")]),
        "unknown_topic": run.client.alter_configs(run.name("missing"), [("retention.ms", "set", "1")]),
    }


@scenario("configs/alter-legacy", needs={"admin.alter_configs_legacy", DESCRIBE})
def alter_legacy(run: Run) -> Any:
    """Legacy AlterConfigs replaces all overrides: keys left out return to their defaults."""
    t = run.topic(configs={"retention.ms": "1000000", "max.message.bytes": "20000"})
    answer = run.client.alter_configs_legacy(t, {"retention.ms": "5000000"})  # type: ignore[attr-defined]
    run.harness.wait_config(t, {"retention.ms": "5000000"})
    return {"answer": answer, "after": run.client.describe_configs("topic", t, keys=["max.message.bytes",
                                                                                     "retention.ms"])}


@scenario("configs/alter-takes-effect", needs={ALTER, "produce"})
def alter_takes_effect(run: Run) -> Any:
    """Lowering max.message.bytes makes the next large record fail with MESSAGE_TOO_LARGE."""
    t = run.topic()
    big = [Rec(b"x" * 5000, b"k", (), 0, None)]
    before = run.client.produce(t, big)
    altered = run.client.alter_configs(t, [("max.message.bytes", "set", "1024")])
    run.harness.wait_config(t, {"max.message.bytes": "1024"})
    after = run.client.produce(t, big)
    return {"before": before, "alter": altered, "after": after, "offsets": run.harness.offsets(t)}
