"""Broker configuration: Kafka's server.properties keys, defaults, parsing and validation.

``KafkaConfig.load`` reads a Java-properties file, applies ``--override key=value`` on top,
and rejects unknown keys and malformed values with a message naming the key and its source.
Keys that Kafka has but kbroker does not act on are accepted (so a real Kafka
``server.properties`` starts) and listed at start-up as ignored.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass

from kbroker.network.connection_quotas import parse_per_ip_overrides
from kbroker.storage.log_config import ConfigSource, ConfigType


class ConfigError(Exception):
    """A bad broker configuration; the CLI prints it and exits with status 2."""


@dataclass(slots=True, frozen=True)
class BrokerConfigDef:
    name: str
    type: ConfigType
    default: str | None
    read_only: bool = True
    implemented: bool = True


_B, _S, _I, _L, _LS, _D = (ConfigType.BOOLEAN, ConfigType.STRING, ConfigType.INT, ConfigType.LONG,
                           ConfigType.LIST, ConfigType.DOUBLE)


def _defs(implemented: bool, *rows: tuple) -> list[BrokerConfigDef]:
    return [BrokerConfigDef(r[0], r[1], r[2], r[3] if len(r) > 3 else True, implemented) for r in rows]


BROKER_CONFIGS: dict[str, BrokerConfigDef] = {
    d.name: d
    for d in _defs(
        True,
        ("listeners", _LS, "PLAINTEXT://localhost:9092", False),
        ("advertised.listeners", _LS, None),
        ("log.dirs", _LS, None),
        ("log.dir", _LS, "./kbroker-data"),
        ("node.id", _I, "1"),
        ("broker.id", _I, "-1"),
        ("process.roles", _LS, "broker,controller"),
        ("num.partitions", _I, "1"),
        ("default.replication.factor", _I, "1"),
        ("auto.create.topics.enable", _B, "true"),
        ("delete.topic.enable", _B, "true"),
        ("message.max.bytes", _I, "1048588", False),
        ("log.segment.bytes", _I, "1073741824", False),
        ("log.roll.ms", _L, None, False),
        ("log.roll.hours", _I, "168"),
        ("log.roll.jitter.ms", _L, None, False),
        ("log.roll.jitter.hours", _I, "0"),
        ("log.retention.ms", _L, None, False),
        ("log.retention.minutes", _I, None),
        ("log.retention.hours", _I, "168"),
        ("log.retention.bytes", _L, "-1", False),
        ("log.retention.check.interval.ms", _L, "300000"),
        ("log.cleanup.policy", _LS, "delete", False),
        ("log.index.interval.bytes", _I, "4096", False),
        ("log.index.size.max.bytes", _I, "10485760", False),
        ("log.flush.interval.messages", _L, "9223372036854775807", False),
        ("log.flush.interval.ms", _L, None, False),
        ("log.flush.scheduler.interval.ms", _L, "9223372036854775807"),
        ("log.flush.offset.checkpoint.interval.ms", _I, "60000"),
        ("log.message.timestamp.type", _S, "CreateTime", False),
        ("log.message.timestamp.before.max.ms", _L, "9223372036854775807", False),
        ("log.message.timestamp.after.max.ms", _L, "3600000", False),
        ("socket.request.max.bytes", _I, "104857600"),
        # kbroker/network/socket_server.py: connection limits and the request memory pool
        ("max.connections", _I, "2147483647", False),
        ("max.connections.per.ip", _I, "2147483647", False),
        ("max.connections.per.ip.overrides", _S, "", False),
        ("connections.max.idle.ms", _L, "600000"),
        ("queued.max.request.bytes", _L, "-1"),
        ("min.insync.replicas", _I, "1", False),
        ("unclean.leader.election.enable", _B, "false", False),
        ("compression.type", _S, "producer", False),
        ("compression.gzip.level", _I, "-1", False),
        ("compression.lz4.level", _I, "9", False),
        ("compression.zstd.level", _I, "3", False),
        ("log.preallocate", _B, "false", False),
        ("log.segment.delete.delay.ms", _L, "60000", False),
        ("log.cleaner.delete.retention.ms", _L, "86400000", False),
        ("log.cleaner.min.compaction.lag.ms", _L, "0", False),
        ("log.cleaner.max.compaction.lag.ms", _L, "9223372036854775807", False),
        ("log.cleaner.min.cleanable.ratio", _D, "0.5", False),
        ("log.cleaner.enable", _B, "true"),
        ("log.cleaner.backoff.ms", _L, "15000", False),
        ("log.local.retention.ms", _L, "-2", False),
        ("log.local.retention.bytes", _L, "-2", False),
        ("producer.id.expiration.ms", _I, "86400000", False),
        ("producer.id.expiration.check.interval.ms", _I, "600000"),
        ("transaction.state.log.num.partitions", _I, "50"),
        ("offsets.topic.num.partitions", _I, "50"),
        ("offsets.topic.replication.factor", _I, "3"),  # 1 on an implicit single node (SINGLE_NODE_DEFAULTS)
        ("transaction.state.log.replication.factor", _I, "3"),  # as above
        ("transaction.state.log.min.isr", _I, "2"),
        ("group.initial.rebalance.delay.ms", _I, "3000"),
        ("group.min.session.timeout.ms", _I, "6000"),
        ("group.max.session.timeout.ms", _I, "1800000"),
        ("group.max.size", _I, "2147483647"),
        # KIP-848 consumer groups (kbroker/groups/consumer_coordinator.py)
        ("group.consumer.session.timeout.ms", _I, "45000"),
        ("group.consumer.heartbeat.interval.ms", _I, "5000"),
        ("group.consumer.max.size", _I, "2147483647"),
        ("group.consumer.assignors", _LS, "uniform,range"),
        ("group.consumer.migration.policy", _S, "bidirectional"),
        ("offsets.retention.minutes", _I, "10080"),
        ("offsets.retention.check.interval.ms", _L, "600000"),
        ("offset.metadata.max.bytes", _I, "4096"),
        ("transaction.state.log.segment.bytes", _I, "104857600"),
        ("transaction.max.timeout.ms", _I, "900000"),
        ("transactional.id.expiration.ms", _I, "604800000"),
        ("transaction.abort.timed.out.transaction.cleanup.interval.ms", _I, "10000"),
        ("transaction.remove.expired.transaction.cleanup.interval.ms", _I, "3600000"),
        # Cluster mode (replication/, kbroker/node/controller_node.py, kbroker/cluster/broker_lifecycle.py)
        ("controller.quorum.voters", _LS, ""),
        ("controller.listener.names", _S, None),
        ("inter.broker.listener.name", _S, None),
        ("broker.rack", _S, None),
        ("metadata.log.dir", _S, None),
        # Controller snapshots and the metadata log's segments (replication/quorum/metadata_snapshot.py)
        ("metadata.log.max.record.bytes.between.snapshots", _L, "20971520"),
        ("metadata.log.max.snapshot.interval.ms", _L, "3600000"),
        ("metadata.log.segment.bytes", _I, "1073741824"),
        ("metadata.log.segment.ms", _L, "604800000"),
        ("broker.session.timeout.ms", _I, "9000"),
        ("broker.heartbeat.interval.ms", _I, "2000"),
        # kbroker's own: a broker whose heartbeat connection its side closed (a crash) and that is
        # not heard from again within this grace is fenced then (replication/quorum/broker_sessions.py)
        ("kbroker.broker.disconnect.fence.ms", _I, "1000"),
        ("replica.lag.time.max.ms", _L, "30000"),
        ("replica.high.watermark.checkpoint.interval.ms", _L, "5000"),
        ("replica.fetch.wait.max.ms", _I, "500"),
        ("replica.fetch.min.bytes", _I, "1"),
        ("replica.fetch.max.bytes", _I, "1048576"),
        ("replica.fetch.response.max.bytes", _I, "10485760"),
        ("replica.fetch.backoff.ms", _I, "1000"),
        ("replica.socket.timeout.ms", _I, "30000"),
        ("controller.quorum.election.timeout.ms", _I, "1000"),
        ("controller.quorum.fetch.timeout.ms", _I, "2000"),
        ("controller.quorum.request.timeout.ms", _I, "2000"),
        ("controller.quorum.retry.backoff.ms", _I, "20"),
        ("replica.selector.class", _S, None),
        ("auto.leader.rebalance.enable", _B, "true"),
        ("leader.imbalance.check.interval.seconds", _L, "300"),
        ("leader.imbalance.per.broker.percentage", _I, "10"),
    )
    + _defs(
        False,  # Kafka keys accepted so real server.properties files start; no effect yet
        ("controller.quorum.bootstrap.servers", _LS, ""),
        ("listener.security.protocol.map", _S, None),
        ("num.network.threads", _I, "3", False),
        ("num.io.threads", _I, "8", False),
        ("socket.send.buffer.bytes", _I, "102400"),
        ("socket.receive.buffer.bytes", _I, "102400"),
        ("num.recovery.threads.per.data.dir", _I, "2", False),
        ("share.coordinator.state.topic.replication.factor", _I, "3"),
        ("share.coordinator.state.topic.min.isr", _I, "2"),
        ("log.cleaner.threads", _I, "1", False),
    )
}


def parse_properties(text: str) -> list[tuple[int, str, str]]:
    """Java-properties lines as (line number, key, value); handles comments and continuations."""
    out: list[tuple[int, str, str]] = []
    logical = ""
    start_line = 0
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip() if not logical else raw.lstrip()
        if not logical:
            if not line or line[0] in "#!":
                continue
            start_line = number
        if line.endswith("\\") and not line.endswith("\\\\"):
            logical += line[:-1]
            continue
        logical += line
        for i, ch in enumerate(logical):
            if ch in "=:":
                key, value = logical[:i].strip(), logical[i + 1 :].strip()
                break
            if ch.isspace():
                rest = logical[i:].lstrip()
                if rest[:1] in ("=", ":"):
                    rest = rest[1:]
                key, value = logical[:i].strip(), rest.strip()
                break
        else:
            key, value = logical.strip(), ""
        out.append((start_line, key, value))
        logical = ""
    return out


# A node started without ``process.roles`` (kbroker's zero-configuration single node; Kafka
# requires the key) is a combined broker and controller, its own only voter, reached in process.
# Its internal topics then default to what Kafka's single-node quickstart server.properties sets,
# since Kafka's defaults (3, 3, 2) can never be met by one broker.
SINGLE_NODE_DEFAULTS = {
    "offsets.topic.replication.factor": "1",
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
}


class KafkaConfig:
    """Resolved broker settings; ``layers(key)`` answers DescribeConfigs-style lookups."""

    def __init__(self, explicit: dict[str, str], sources: dict[str, str]) -> None:
        self.explicit = explicit
        self.sources = sources

    @classmethod
    def load(cls, path: str | None = None, overrides: Iterable[str] = ()) -> KafkaConfig:
        values: dict[str, str] = {}
        sources: dict[str, str] = {}
        if path is not None:
            try:
                with open(path, encoding="utf-8") as fh:
                    text = fh.read()
            except OSError as exc:
                raise ConfigError(f"cannot read config file {path}: {exc.strerror}") from None
            for line, key, value in parse_properties(text):
                values[key] = value
                sources[key] = f"{path}:{line}"
        for item in overrides:
            key, sep, value = item.partition("=")
            if not sep or not key.strip():
                raise ConfigError(f"--override {item!r}: expected key=value")
            values[key.strip()] = value.strip()
            sources[key.strip()] = "--override"
        for key, value in values.items():
            _validate(key, value, sources[key])
        config = cls(values, sources)
        config._validate_socket_server()
        return config

    def get(self, key: str) -> str | None:
        if key in self.explicit:
            return self.explicit[key]
        return self._default(key)

    def _default(self, key: str) -> str | None:
        if self.implicit_single_node and key in SINGLE_NODE_DEFAULTS:
            return SINGLE_NODE_DEFAULTS[key]
        return BROKER_CONFIGS[key].default

    def get_int(self, key: str) -> int:
        return int(self.get(key) or 0)

    def get_bool(self, key: str) -> bool:
        return (self.get(key) or "false").lower() == "true"

    def layers(self, key: str) -> list[tuple[str, ConfigSource]]:
        """The static value (server.properties / --override) and the built-in default, if any."""
        out: list[tuple[str, ConfigSource]] = []
        if key in self.explicit:
            out.append((self.explicit[key], ConfigSource.STATIC_BROKER_CONFIG))
        default = self._default(key) if key in BROKER_CONFIGS else None
        if default is not None:
            out.append((default, ConfigSource.DEFAULT_CONFIG))
        return out

    @property
    def node_id(self) -> int:
        node_id = self.get_int("node.id")
        if "node.id" not in self.explicit and "broker.id" in self.explicit:
            node_id = self.get_int("broker.id")
        return node_id

    @property
    def log_dirs(self) -> list[str]:
        raw = self.get("log.dirs") or self.get("log.dir") or "./kbroker-data"
        return [os.path.abspath(d.strip()) for d in raw.split(",") if d.strip()]

    @property
    def listeners(self) -> list[tuple[str, str, int]]:
        return parse_listeners(self.get("listeners") or "", "listeners")

    @property
    def advertised_listeners(self) -> list[tuple[str, str, int]]:
        raw = self.get("advertised.listeners")
        return parse_listeners(raw, "advertised.listeners") if raw else self.listeners

    @property
    def controller_listener_names(self) -> set[str]:
        return {n.strip().upper() for n in (self.get("controller.listener.names") or "").split(",") if n.strip()}

    @property
    def quorum_voters(self) -> list[tuple[int, str, int]]:
        """``controller.quorum.voters`` as (node id, host, port). Unset: this node alone, with no
        address (host "", port 0): its broker reaches its controller in process."""
        out = []
        for item in (part.strip() for part in (self.get("controller.quorum.voters") or "").split(",")):
            if item:
                node, _at, address = item.partition("@")
                host, _colon, port = address.rpartition(":")
                out.append((int(node), host.strip("[]"), int(port)))
        return out or [(self.node_id, "", 0)]

    @property
    def implicit_single_node(self) -> bool:
        """No ``process.roles``: kbroker's zero-configuration single node (see SINGLE_NODE_DEFAULTS)."""
        return "process.roles" not in self.explicit

    @property
    def process_roles(self) -> set[str]:
        """``process.roles`` (default both: a single node)."""
        return {r.strip() for r in (self.get("process.roles") or "").split(",") if r.strip()}

    def _validate_socket_server(self) -> None:
        """Kafka's start-up checks across the socket server's keys."""
        queued, request_max = self.get_int("queued.max.request.bytes"), self.get_int("socket.request.max.bytes")
        if 0 < queued < request_max:
            raise ConfigError(
                f"queued.max.request.bytes ({queued}, from {self.sources['queued.max.request.bytes']}) must be "
                f"larger or equal to socket.request.max.bytes ({request_max}) when it is positive"
            )
        if self.get_int("max.connections.per.ip") == 0 and not (self.get("max.connections.per.ip.overrides") or ""):
            raise ConfigError(
                f"max.connections.per.ip can be 0 (from {self.sources['max.connections.per.ip']}) only if "
                "max.connections.per.ip.overrides is set"
            )

    def ignored_keys(self) -> list[str]:
        return sorted(k for k in self.explicit if not BROKER_CONFIGS[k].implemented)


def parse_listeners(raw: str, key: str) -> list[tuple[str, str, int]]:
    """``NAME://host:port,...`` as (name, host, port); an empty host means all interfaces."""
    out = []
    for item in (part.strip() for part in raw.split(",")):
        if not item:
            continue
        name, sep, address = item.partition("://")
        host, colon, port = address.rpartition(":")
        if not sep or not colon or not port.isdigit() or not 0 <= int(port) <= 65535:
            raise ConfigError(f"Invalid value {item} for configuration {key}: expected NAME://host:port")
        out.append((name.upper(), host.strip("[]"), int(port)))
    if not out:
        raise ConfigError(f"Invalid value {raw!r} for configuration {key}: no listener given")
    return out


def _validate(key: str, value: str, source: str) -> None:
    definition = BROKER_CONFIGS.get(key)
    if definition is None:
        raise ConfigError(f"unknown configuration key '{key}' (from {source})")
    try:
        if definition.type in (ConfigType.INT, ConfigType.LONG):
            number = int(value)
            bits = 31 if definition.type == ConfigType.INT else 63
            if not -(2**bits) <= number < 2**bits:
                raise ValueError
        elif definition.type == ConfigType.DOUBLE:
            float(value)
        elif definition.type == ConfigType.BOOLEAN and value.lower() not in ("true", "false"):
            raise ValueError
    except ValueError:
        kind = definition.type.name
        raise ConfigError(
            f"invalid value '{value}' for configuration key '{key}' (from {source}): expected {kind}"
        ) from None
    if key == "controller.quorum.voters":
        for item in (part.strip() for part in value.split(",")):
            node, at, address = item.partition("@")
            _host, colon, port = address.rpartition(":")
            if item and (not at or not colon or not node.isdigit() or not port.isdigit()):
                raise ConfigError(
                    f"invalid value '{value}' for configuration key '{key}' (from {source}): "
                    "expected id@host:port,..."
                )
    if key in ("max.connections", "max.connections.per.ip") and int(value) < 0:
        raise ConfigError(f"invalid value '{value}' for configuration key '{key}' (from {source}): expected >= 0")
    if key == "max.connections.per.ip.overrides":
        try:
            parse_per_ip_overrides(value)
        except ValueError as exc:
            raise ConfigError(
                f"invalid value '{value}' for configuration key '{key}' (from {source}): {exc}"
            ) from None
    if key == "process.roles":
        roles = {r.strip() for r in value.split(",") if r.strip()}
        if not roles or roles - {"broker", "controller"}:
            raise ConfigError(
                f"invalid value '{value}' for configuration key '{key}' (from {source}): "
                "expected broker, controller or broker,controller"
            )
    if key in ("listeners", "advertised.listeners"):
        try:
            parse_listeners(value, key)
        except ConfigError as exc:
            raise ConfigError(f"{exc} (from {source})") from None
