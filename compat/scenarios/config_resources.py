"""Config resources beyond topics and brokers: GROUP (32) configs, BROKER_LOGGER (8) log levels
and CLIENT_METRICS (16) subscriptions — as Kafka's own tools (kafka-configs, kafka-client-metrics),
librdkafka's admin API and raw requests (ListConfigResources, ConsumerGroupHeartbeat) see them."""

from __future__ import annotations

import datetime
import re
from typing import Any

from compat.harness import wait_until
from compat.scenarios import Run, scenario

CONFIGS = "kafka.admin.ConfigCommand"
CLIENT_METRICS = "org.apache.kafka.tools.ClientMetricsCommand"
GROUP_RESOURCE, CLIENT_METRICS_RESOURCE = 32, 16
_LOADING = {"NOT_COORDINATOR", "COORDINATOR_LOAD_IN_PROGRESS", "COORDINATOR_NOT_AVAILABLE"}
APPLY_TIMEOUT_S = 15.0  # Kafka's broker applies a config record shortly after the controller answered


def _cli(run: Run, main: str, *args: str) -> Any:
    """A tool's exit status and output, stack frames dropped (their line numbers are the tool's)."""
    out = run.client.run(main, *args)  # type: ignore[attr-defined]
    out["stderr"] = [line for line in out["stderr"] if not line.startswith("\tat ") and "... " not in line]
    return out


@scenario("config-resources/group-configs-cli", clients=("java-cli",))
def group_configs_cli(run: Run) -> Any:
    """kafka-configs --entity-type groups: a fresh group's configs (all 17 keys with their broker
    synonyms), two keys set then described, Kafka's refusals (bounds from
    group.consumer.min/max.*, unknown key, not a number, session not above heartbeat), a key
    deleted."""
    group = run.name("g")

    def configs(*args: str) -> Any:
        return _cli(run, CONFIGS, "--entity-type", "groups", "--entity-name", group, *args)

    def alter(add: str) -> Any:
        return configs("--alter", "--add-config", add)

    def described(line: str, present: bool) -> Any:
        """The dynamic configs once ``line`` is (or is no longer) among them."""
        return wait_until(lambda: configs("--describe"),
                          lambda out: any(x.startswith(line) for x in out["stdout"]) == present, APPLY_TIMEOUT_S)[1]

    unknown, defaults = configs("--describe"), configs("--describe", "--all")
    answer = alter("consumer.session.timeout.ms=50000,consumer.heartbeat.interval.ms=6000")
    return {
        "unknown-group": unknown,
        "all-defaults": defaults,
        "set": answer,
        "dynamic": described("  consumer.session.timeout.ms=50000", True),
        "all": configs("--describe", "--all"),
        "above-max": alter("consumer.session.timeout.ms=70000"),
        "below-min": alter("consumer.heartbeat.interval.ms=1000"),
        "unknown-key": alter("no.such.key=1"),
        "not-a-number": alter("consumer.session.timeout.ms=abc"),
        "share-keys": alter("share.session.timeout.ms=46000,share.isolation.level=read_committed,"
                            "share.auto.offset.reset=earliest"),
        "bad-isolation": alter("share.isolation.level=none"),
        "bad-reset": alter("share.auto.offset.reset=never"),
        "below-lower-bound": alter("share.record.lock.duration.ms=10"),
        "delete": configs("--alter", "--delete-config", "consumer.session.timeout.ms,share.isolation.level"),
        "after-delete": described("  consumer.session.timeout.ms=", False),
    }


@scenario("config-resources/group-configs-admin", clients=("confluent",))
def group_configs_admin(run: Run) -> Any:
    """IncrementalAlterConfigs / DescribeConfigs on a GROUP resource through librdkafka's admin
    API (ResourceType.GROUP): SET, the described values and sources, INVALID_CONFIG for a value
    out of the broker's bounds and for APPEND, values at the bounds accepted, validate-only, DELETE."""
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

    admin = run.client.admin  # type: ignore[attr-defined]
    group = run.name("g")

    def alter(*ops: tuple[str, str, AlterConfigOpType], validate_only: bool = False) -> Any:
        entries = [ConfigEntry(k, v, incremental_operation=op) for k, v, op in ops]
        resource = ConfigResource(ResourceType.GROUP, group, incremental_configs=entries)
        (future,) = admin.incremental_alter_configs([resource], request_timeout=15,
                                                    validate_only=validate_only).values()
        try:
            future.result(30)
            return None
        except Exception as exc:  # the KafkaException carries the broker's code and message
            error = exc.args[0]
            return [error.name(), error.str()]

    def describe(interval: str | None = None) -> Any:
        """The group's configs (once consumer.heartbeat.interval.ms is ``interval``, when given)."""

        def once() -> Any:
            (future,) = admin.describe_configs([ConfigResource(ResourceType.GROUP, group)],
                                               request_timeout=15).values()
            entries = future.result(30)
            return {k: [e.value, int(e.source), e.is_read_only, e.is_sensitive] for k, e in sorted(entries.items())}

        wanted = (lambda got: got["consumer.heartbeat.interval.ms"][0] == interval) if interval else bool
        return wait_until(once, wanted, APPLY_TIMEOUT_S)[1]

    s, d, a = AlterConfigOpType.SET, AlterConfigOpType.DELETE, AlterConfigOpType.APPEND
    return {
        "set": alter(("consumer.heartbeat.interval.ms", "7000", s), ("streams.num.standby.replicas", "1", s)),
        "described": describe("7000"),
        "above-max": alter(("consumer.heartbeat.interval.ms", "20000", s)),
        "at-the-bounds": alter(("consumer.session.timeout.ms", "45000", s),
                                             ("consumer.heartbeat.interval.ms", "15000", s),
                                             ("share.heartbeat.interval.ms", "5000", s)),
        "standby-above-max": alter(("streams.num.standby.replicas", "3", s)),
        "append": alter(("consumer.heartbeat.interval.ms", "1", a)),
        "validate-only": alter(("consumer.heartbeat.interval.ms", "8000", s), validate_only=True),
        "after-validate-only": describe()["consumer.heartbeat.interval.ms"],
        "delete": alter(("consumer.heartbeat.interval.ms", "", d)),
        "after-delete": describe("5000"),
    }


@scenario("config-resources/group-heartbeat-interval", needs={"produce"}, clients=("confluent",))
def group_heartbeat_interval(run: Run) -> Any:
    """The KIP-848 coordinator honours a group's consumer.heartbeat.interval.ms: a raw
    ConsumerGroupHeartbeat join (kio over a socket; no client shows the interval) of a group set
    to 7000 ms is answered with 7000, another group's with the broker's 5000."""
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType
    from kio.schema.consumer_group_heartbeat.v1 import request as heartbeat
    from kio.schema.find_coordinator.v4 import request as find_coordinator
    from kio.static.primitive import i8, i32, i32Timedelta

    from compat.scenarios.protocol import RawConnection

    t = run.topic(partitions=1)
    tuned, plain = run.name("tuned"), run.name("plain")
    resource = ConfigResource(ResourceType.GROUP, tuned, incremental_configs=[
        ConfigEntry("consumer.heartbeat.interval.ms", "7000", incremental_operation=AlterConfigOpType.SET)])
    admin = run.client.admin  # type: ignore[attr-defined]
    (future,) = admin.incremental_alter_configs([resource], request_timeout=15).values()
    future.result(30)
    conn = RawConnection(run.target.bootstrap)

    def join(group: str) -> Any:
        found, code = wait_until(lambda: conn.request(10, 4, find_coordinator.FindCoordinatorRequest(
            key_type=i8(0), coordinator_keys=(group,))).coordinators[0].error_code.value, lambda c: c == 0, 30.0)
        if not found:
            return ["FindCoordinator", code]
        # Kafka answers NOT_COORDINATOR until it has loaded the __consumer_offsets partition.
        _met, r = wait_until(lambda: conn.request(68, 1, heartbeat.ConsumerGroupHeartbeatRequest(
            group_id=group, member_id="m-" + group, member_epoch=i32(0),
            rebalance_timeout=i32Timedelta.parse(datetime.timedelta(seconds=30)),
            subscribed_topic_names=(t,), topic_partitions=())),
            lambda answer: answer.error_code.name.upper() not in _LOADING, 30.0)
        conn.request(68, 1, heartbeat.ConsumerGroupHeartbeatRequest(
            group_id=group, member_id="m-" + group, member_epoch=i32(-1), topic_partitions=None))
        return [r.error_code.name.upper(), int(r.heartbeat_interval.total_seconds() * 1000)]

    try:
        return {"tuned": join(tuned), "plain": join(plain)}
    finally:
        conn.close()


def _logger_lines(out: Any) -> Any:
    """A broker-loggers describe, reduced to what both brokers share: logger names differ by
    nature (log4j's classes, kbroker's modules), so the lines' shape and root's line are kept."""
    lines = out["stdout"]
    line_shape = re.compile(r"  \S+=(FATAL|ERROR|WARN|INFO|DEBUG|TRACE|OFF|ALL) sensitive=false synonyms=\{}")
    shaped = all(line_shape.fullmatch(line) for line in lines[1:])
    root = [line for line in lines if line.startswith("  root=")]
    return {"exit": out["exit"], "header": lines[:1], "lines-shaped": shaped, "more-than-root": len(lines) > 2,
            "root": root, "stderr": out["stderr"]}


@scenario("config-resources/broker-loggers-cli", clients=("java-cli",))
def broker_loggers_cli(run: Run) -> Any:
    """kafka-configs --entity-type broker-loggers: the listing's shape, a logger set to DEBUG then
    described, unset (back to its parent's level), an invalid level, an unknown logger, removing
    root's level, another node id. The logger is the first the broker lists after root."""

    def loggers(*args: str) -> Any:
        return _cli(run, CONFIGS, "--entity-type", "broker-loggers", *args)

    listing = loggers("--entity-name", "1", "--describe")
    names = [line.split("=", 1)[0].strip() for line in listing["stdout"][1:]]
    name = next(n for n in names if n != "root")

    def level() -> Any:
        lines = loggers("--entity-name", "1", "--describe")["stdout"]
        return [line.split(" ")[2] for line in lines if line.startswith(f"  {name}=")]

    def hide(out: Any) -> Any:  # the chosen logger's name differs between the brokers
        return {k: [line.replace(name, "<logger>") for line in v] if isinstance(v, list) else v
                for k, v in out.items()}

    return {
        "describe": _logger_lines(listing),
        "set": hide(loggers("--entity-name", "1", "--alter", "--add-config", f"{name}=DEBUG")),
        "after-set": [line.replace(name, "<logger>") for line in level()],
        "unset": hide(loggers("--entity-name", "1", "--alter", "--delete-config", name)),
        "after-unset": [line.replace(name, "<logger>") for line in level()],
        "lower-case-level": hide(loggers("--entity-name", "1", "--alter", "--add-config", f"{name}=debug")),
        "unknown-logger": loggers("--entity-name", "1", "--alter", "--add-config", "no.such.logger=DEBUG"),
        "delete-root": loggers("--entity-name", "1", "--alter", "--delete-config", "root"),
        "other-node": loggers("--entity-name", "2", "--describe"),
    }


@scenario("config-resources/client-metrics-cli", clients=("java-cli",))
def client_metrics_cli(run: Run) -> Any:
    """kafka-client-metrics and kafka-configs --entity-type client-metrics: a subscription made,
    listed, described (by both tools), changed, refused as Kafka refuses (interval out of range,
    illegal match selector, empty list item, unknown key, not a number), deleted."""
    name = run.name("sub")

    def tool(*args: str) -> Any:
        return _cli(run, CLIENT_METRICS, *args)

    def configs(*args: str) -> Any:
        return _cli(run, CONFIGS, "--entity-type", "client-metrics", "--entity-name", name, *args)

    def listed() -> Any:
        out = tool("--list")
        out["stdout"] = [line for line in out["stdout"] if line == name]  # other runs' subscriptions too
        return out

    missing = tool("--describe", "--name", name)
    create = tool("--alter", "--name", name, "--metrics", "org.apache.kafka.producer.,org.apache.kafka.consumer.",
                  "--interval", "60000", "--match", "client_id=app-.*,client_software_name=apache-kafka-java")
    _met, listing = wait_until(listed, lambda out: bool(out["stdout"]), APPLY_TIMEOUT_S)
    return {
        "missing": missing,
        "create": create,
        "list": listing,
        "describe": tool("--describe", "--name", name),
        "configs-all": configs("--describe", "--all"),
        "interval-too-small": tool("--alter", "--name", name, "--interval", "50"),
        "illegal-match": tool("--alter", "--name", name, "--match", "nosuch=1"),
        "duplicates-dropped": configs("--alter", "--add-config", "metrics=[a,a,b]"),
        "after-duplicates": wait_until(lambda: configs("--describe"),
                                       lambda out: any("metrics=a," in x for x in out["stdout"]), APPLY_TIMEOUT_S)[1],
        "empty-item": configs("--alter", "--add-config", "metrics=[a,,b]"),
        "unknown-key": configs("--alter", "--add-config", "no.such.key=1"),
        "not-a-number": configs("--alter", "--add-config", "interval.ms=soon"),
        "delete": tool("--delete", "--name", name),
        "list-after-delete": wait_until(listed, lambda out: not out["stdout"], APPLY_TIMEOUT_S)[1],
        "after-delete": tool("--describe", "--name", name),
    }


@scenario("config-resources/list-config-resources", clients=("confluent",))
def list_config_resources(run: Run) -> Any:
    """Raw ListConfigResources (kio over a socket): v1 for GROUP and CLIENT_METRICS after a group
    config and a subscription are set (only this run's names kept), v0 (client metrics only, no
    type list), v1 asking for a type it does not list (UNSUPPORTED_VERSION, nothing listed), v1
    with no type (every type: broker 1 listed as BROKER and BROKER_LOGGER)."""
    from kio.schema.incremental_alter_configs.v1 import request as alter
    from kio.schema.list_config_resources.v0 import request as list_v0
    from kio.schema.list_config_resources.v1 import request as list_v1
    from kio.static.primitive import i8

    from compat.scenarios.protocol import RawConnection

    group, subscription = run.name("g"), run.name("sub")
    conn = RawConnection(run.target.bootstrap)

    def set_config(kind: int, name: str, key: str, value: str) -> Any:
        r = conn.request(44, 1, alter.IncrementalAlterConfigsRequest(validate_only=False, resources=(
            alter.AlterConfigsResource(resource_type=i8(kind), resource_name=name, configs=(
                alter.AlterableConfig(name=key, config_operation=i8(0), value=value),)),)))
        return r.responses[0].error_code.name.upper()

    def mine(response: Any, *types: int) -> Any:
        wanted = {group, subscription, "1"}
        return [response.error_code.name.upper(),
                sorted([getattr(c, "resource_type", CLIENT_METRICS_RESOURCE), c.resource_name]
                       for c in response.config_resources
                       if c.resource_name in wanted and getattr(c, "resource_type", CLIENT_METRICS_RESOURCE) in types)]

    def v1() -> Any:
        return mine(conn.request(74, 1, list_v1.ListConfigResourcesRequest(
            resource_types=(i8(GROUP_RESOURCE), i8(CLIENT_METRICS_RESOURCE)))), GROUP_RESOURCE, CLIENT_METRICS_RESOURCE)

    try:
        return {
            "set": [set_config(GROUP_RESOURCE, group, "consumer.heartbeat.interval.ms", "6000"),
                    set_config(CLIENT_METRICS_RESOURCE, subscription, "interval.ms", "1000")],
            "v1": wait_until(v1, lambda answer: len(answer[1]) == 2, APPLY_TIMEOUT_S)[1],
            "v0": mine(conn.request(74, 0, list_v0.ListConfigResourcesRequest()), CLIENT_METRICS_RESOURCE),
            "v1-unsupported": mine(conn.request(74, 1, list_v1.ListConfigResourcesRequest(
                resource_types=(i8(GROUP_RESOURCE), i8(1)))), GROUP_RESOURCE),
            "v1-all": mine(conn.request(74, 1, list_v1.ListConfigResourcesRequest()), 4, 8, 16, 32),
        }
    finally:
        conn.close()
