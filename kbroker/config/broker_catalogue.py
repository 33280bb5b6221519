"""The catalogue of broker keys: every key Kafka 4.3.1's broker and controller define, and
kbroker's own, each with its type, default, validator, importance, whether it may change at
runtime, whether kbroker acts on it, and Kafka's value checks.

Built once at import from the row tables (``broker_keys_core``, ``broker_keys_plugins``).
``check_value`` answers what Kafka's ConfigDef answers to a ``server.properties`` value (None
or Kafka's ConfigException message); ``kafka_string`` is the value as Kafka describes it after
parsing (``" 5"`` is ``5``, a list loses its spaces). tests/kbroker/config/test_broker_catalogue.py
checks the names, types, defaults and validators against Kafka's own ConfigDef from the jars.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from decimal import Decimal

from kbroker.config import broker_keys_core, broker_keys_plugins
from kbroker.config.catalogue_rows import Row
from kbroker.storage.log_config import ConfigType


@dataclass(slots=True, frozen=True)
class BrokerConfigDef:
    name: str
    type: ConfigType
    default: str | None  # Kafka's default as Kafka prints it (None: null, or no default when required)
    validator: str | None  # Kafka's validator as Kafka prints it
    importance: str  # H, M or L
    dynamic: str | None  # "per-broker", "cluster-wide", or None (read at start-up only)
    doc: str
    internal: bool = False  # described only when set, as Kafka's internal keys are
    required: bool = False  # Kafka has no default for it
    acted_on: bool = False  # kbroker acts on it (else it is accepted and logged as not acted on yet)

    @property
    def read_only(self) -> bool:
        return self.dynamic is None

    @property
    def sensitive(self) -> bool:
        return self.type == ConfigType.PASSWORD


# Kafka's internal keys: accepted, never described unless set in server.properties.
_INTERNAL = frozenset({
    "controller.performance.always.log.threshold.ms", "controller.performance.sample.period.ms",
    "group.consumer.regex.refresh.interval.ms", "group.share.initialize.retry.interval.ms",
    "group.share.persister.class.name", "internal.metadata.delete.delay.millis",
    "internal.metadata.log.segment.bytes", "internal.metadata.max.batch.size.in.bytes", "log.initial.task.delay.ms",
    "producer.id.expiration.check.interval.ms", "remote.log.index.file.cache.ttl.ms",
    "remote.log.manager.task.retry.backoff.max.ms", "remote.log.manager.task.retry.backoff.ms",
    "remote.log.manager.task.retry.jitter", "server.max.startup.time.ms",
    "share.coordinator.cold.partition.snapshot.interval.ms", "share.coordinator.state.topic.prune.interval.ms",
    "unclean.leader.election.interval.ms", "unstable.api.versions.enable", "unstable.feature.versions.enable",
})
_REQUIRED = frozenset({"process.roles", "node.id", "controller.listener.names"})
# LIST keys whose validator refuses an empty list ("must not be empty").
_NON_EMPTY_LISTS = frozenset({
    "controller.listener.names", "listeners", "advertised.listeners", "group.consumer.assignors",
    "group.share.assignors", "log.dir", "log.dirs", "process.roles", "group.coordinator.rebalance.protocols",
})

# The keys kbroker acts on (the rest are accepted and listed at start-up as not acted on yet).
ACTED_ON = frozenset({
    "listeners", "advertised.listeners", "log.dirs", "log.dir", "node.id", "broker.id", "process.roles",
    "authorizer.class.name", "max.incremental.fetch.session.cache.slots",
    "sasl.enabled.mechanisms", "sasl.server.callback.handler.class", "sasl.login.callback.handler.class",
    "sasl.oauthbearer.jwks.endpoint.url", "sasl.oauthbearer.jwks.endpoint.refresh.ms",
    "sasl.oauthbearer.jwks.endpoint.retry.backoff.ms", "sasl.oauthbearer.expected.audience",
    "sasl.oauthbearer.expected.issuer", "sasl.oauthbearer.sub.claim.name", "sasl.oauthbearer.scope.claim.name",
    "sasl.oauthbearer.clock.skew.seconds",
    "listener.security.protocol.map", "security.inter.broker.protocol", "sasl.mechanism.inter.broker.protocol",
    "sasl.mechanism.controller.protocol", "connection.failed.authentication.delay.ms", "sasl.server.max.receive.size",
    "ssl.keystore.type", "ssl.keystore.location", "ssl.keystore.certificate.chain", "ssl.keystore.key",
    "ssl.key.password", "ssl.truststore.type", "ssl.truststore.location", "ssl.truststore.certificates",
    "ssl.client.auth", "ssl.enabled.protocols", "ssl.cipher.suites", "ssl.endpoint.identification.algorithm",
    "ssl.principal.mapping.rules", "connections.max.reauth.ms", "sasl.jaas.config",
    "quota.window.num", "quota.window.size.seconds", "controller.quota.window.num",
    "controller.quota.window.size.seconds",
    "num.partitions", "default.replication.factor", "auto.create.topics.enable", "delete.topic.enable",
    "message.max.bytes", "log.segment.bytes", "log.roll.ms", "log.roll.hours", "log.roll.jitter.ms",
    "log.roll.jitter.hours", "log.retention.ms", "log.retention.minutes", "log.retention.hours",
    "log.retention.bytes", "log.retention.check.interval.ms", "log.cleanup.policy", "log.index.interval.bytes",
    "log.index.size.max.bytes", "log.flush.interval.messages", "log.flush.interval.ms",
    "log.flush.scheduler.interval.ms", "log.flush.offset.checkpoint.interval.ms", "log.message.timestamp.type",
    "log.message.timestamp.before.max.ms", "log.message.timestamp.after.max.ms", "socket.request.max.bytes",
    "max.connections", "max.connections.per.ip", "max.connections.per.ip.overrides", "connections.max.idle.ms",
    "queued.max.request.bytes", "min.insync.replicas", "unclean.leader.election.enable", "compression.type",
    "compression.gzip.level", "compression.lz4.level", "compression.zstd.level", "log.preallocate",
    "log.segment.delete.delay.ms", "log.cleaner.delete.retention.ms", "log.cleaner.min.compaction.lag.ms",
    "log.cleaner.max.compaction.lag.ms", "log.cleaner.min.cleanable.ratio", "log.cleaner.enable",
    "log.cleaner.backoff.ms", "log.local.retention.ms", "log.local.retention.bytes", "producer.id.expiration.ms",
    "producer.id.expiration.check.interval.ms", "transaction.state.log.num.partitions",
    "offsets.topic.num.partitions", "offsets.topic.replication.factor", "transaction.state.log.replication.factor",
    "transaction.state.log.min.isr", "group.initial.rebalance.delay.ms", "group.min.session.timeout.ms",
    "group.max.session.timeout.ms", "group.max.size", "group.consumer.session.timeout.ms",
    "group.consumer.heartbeat.interval.ms", "group.consumer.max.size", "group.consumer.assignors",
    "group.consumer.migration.policy", "offsets.retention.minutes", "offsets.retention.check.interval.ms",
    "offset.metadata.max.bytes", "transaction.state.log.segment.bytes", "transaction.max.timeout.ms",
    "transactional.id.expiration.ms", "transaction.abort.timed.out.transaction.cleanup.interval.ms",
    "transaction.remove.expired.transaction.cleanup.interval.ms", "controller.quorum.voters",
    "controller.listener.names", "inter.broker.listener.name", "broker.rack", "metadata.log.dir",
    "metadata.log.max.record.bytes.between.snapshots", "metadata.log.max.snapshot.interval.ms",
    "metadata.log.segment.bytes", "internal.metadata.log.segment.bytes", "metadata.log.segment.ms",
    "broker.session.timeout.ms",
    "broker.heartbeat.interval.ms", "replica.lag.time.max.ms", "replica.high.watermark.checkpoint.interval.ms",
    "replica.fetch.wait.max.ms", "replica.fetch.min.bytes", "replica.fetch.max.bytes",
    "replica.fetch.response.max.bytes", "replica.fetch.backoff.ms", "replica.socket.timeout.ms",
    "controller.quorum.election.timeout.ms", "controller.quorum.fetch.timeout.ms",
    "controller.quorum.request.timeout.ms", "controller.quorum.retry.backoff.ms", "replica.selector.class",
    "auto.leader.rebalance.enable", "leader.imbalance.check.interval.seconds", "telemetry.max.bytes",
})

# kbroker's own keys (not Kafka's): described only when set, like Kafka's internal keys.
_KBROKER_ROWS: tuple[Row, ...] = (
    # A broker whose heartbeat connection its side closed (a crash) and that is not heard from
    # again within this grace is fenced then (replication/quorum/broker_sessions.py).
    ("kbroker.broker.disconnect.fence.ms", ConfigType.INT, "1000", "[0,...]", "L", None,
     "Grace after a broker's heartbeat connection drops before it is fenced."),
    # The node's HTTP side (kbroker/http/): health, /metrics, the console. Off when empty.
    ("kbroker.http.listeners", ConfigType.LIST, "", None, "M", None,
     "Comma-separated http://host:port addresses the node serves /metrics, /health/* and its console on."),
    # The web console's write actions (create a topic); read-only when false (kbroker/http/api/routes.py).
    ("kbroker.http.console.write.enable", ConfigType.BOOLEAN, "false", None, "M", None,
     "Whether the web console may change the cluster (create topics); subject to ACLs when an authorizer is set."),
    # text: Kafka's log4j-like lines; json: one JSON object per line (kbroker/log_format.py).
    ("kbroker.log.format", ConfigType.STRING, "text", "[text, json]", "L", None,
     "The format of the node's log lines on standard error: text, or json (JSON lines)."),
    # The kbroker.request logger's threshold: a request that took longer is logged at INFO
    # (every request is logged at DEBUG, as Kafka's kafka.request.logger); -1 turns it off.
    ("kbroker.request.logger.slow.ms", ConfigType.LONG, "1000", "[-1,...]", "L", None,
     "Requests whose total time exceeds this many milliseconds are logged by the kbroker.request logger."),
)

# Keys that describe one setting in several units, most precise first (Kafka's synonyms).
_SYNONYM_FAMILIES = (
    ("log.roll.ms", "log.roll.hours"),
    ("log.roll.jitter.ms", "log.roll.jitter.hours"),
    ("log.retention.ms", "log.retention.minutes", "log.retention.hours"),
    ("log.flush.interval.ms", "log.flush.scheduler.interval.ms"),
)
_SYNONYMS = {name: family for family in _SYNONYM_FAMILIES for name in family}


def synonyms(name: str) -> tuple[str, ...]:
    """The keys that set ``name``'s value, in precedence order (itself alone for most keys)."""
    return _SYNONYMS.get(name, (name,))


def _build() -> dict[str, BrokerConfigDef]:
    out = {}
    for row in (*broker_keys_core.ROWS, *broker_keys_plugins.ROWS):
        name = row[0]
        out[name] = BrokerConfigDef(*row, internal=name in _INTERNAL, required=name in _REQUIRED,
                                    acted_on=name in ACTED_ON)
    for row in _KBROKER_ROWS:
        out[row[0]] = BrokerConfigDef(*row, internal=True, acted_on=True)
    return out


BROKER_CONFIGS: dict[str, BrokerConfigDef] = _build()

_INTEGER = re.compile(r"[+-]?[0-9]+")
_LIST_SEPARATOR = re.compile(r"\s*,\s*")
_BITS = {ConfigType.SHORT: 15, ConfigType.INT: 31, ConfigType.LONG: 63}
_RANGE = re.compile(r"\[(-?[0-9.]+)?,\.\.\.(?:,(-?[0-9.]+))?\]")
_HOST_PORT = re.compile(r"(?:[a-zA-Z0-9]+://)?\[?[0-9a-zA-Z\-._%:]+\]?:[0-9]+")


class InvalidValue(ValueError):
    """Kafka's ConfigException message for a value its ConfigDef refuses."""


def check_value(definition: BrokerConfigDef, raw: str) -> None:
    """Raise InvalidValue with Kafka's message unless Kafka parses and validates ``raw``."""
    parsed = _parse(definition, raw)
    if definition.type == ConfigType.LIST:
        _check_list(definition, raw, parsed)
    else:
        _check_scalar(definition, raw, parsed)


def kafka_string(definition: BrokerConfigDef, raw: str) -> str:
    """A valid value as Kafka describes it once parsed (trimmed, canonical numbers and lists)."""
    value = _parse(definition, raw)
    if isinstance(value, list):
        return ",".join(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return _java_double(value)
    return str(value)


def _invalid(definition: BrokerConfigDef, raw: str, reason: str) -> InvalidValue:
    return InvalidValue(f"Invalid value {raw} for configuration {definition.name}: {reason}")


def _parse(definition: BrokerConfigDef, raw: str) -> object:
    text = raw.strip()
    kind = definition.type
    if kind in _BITS:
        bits = _BITS[kind]
        if not _INTEGER.fullmatch(text) or not -(2**bits) <= int(text) < 2**bits:
            raise _invalid(definition, raw, f"Not a number of type {kind.name}")
        return int(text)
    if kind == ConfigType.DOUBLE:
        try:
            return float(text)
        except ValueError:
            raise _invalid(definition, raw, "Not a number of type DOUBLE") from None
    if kind == ConfigType.BOOLEAN:
        if text.lower() not in ("true", "false"):
            raise _invalid(definition, raw, "Expected value to be either true or false")
        return text.lower() == "true"
    if kind == ConfigType.LIST:
        return _LIST_SEPARATOR.split(text) if text else []
    if kind == ConfigType.PASSWORD:
        return raw
    return text


def _check_scalar(definition: BrokerConfigDef, raw: str, value: object) -> None:
    spec = definition.validator
    if not spec:
        return
    raw = _java_double(value) if isinstance(value, float) else str(value)  # Kafka names the parsed value
    if spec == "non-empty string":
        if not str(value):
            raise _invalid(definition, raw, "String must be non-empty")
        return
    if spec == "[1,...,9] or -1":  # the gzip level: a range plus one special value
        if not (value == -1 or 1 <= value <= 9):  # type: ignore[operator]
            raise _invalid(definition, raw, "Value must be between 1 and 9 or equal to -1")
        return
    bounds = _RANGE.fullmatch(spec)
    if bounds is not None:
        low, high = bounds.groups()
        if low is not None and value < float(low):  # type: ignore[operator]
            raise _invalid(definition, raw, f"Value must be at least {low}")
        if high is not None and value > float(high):  # type: ignore[operator]
            raise _invalid(definition, raw, f"Value must be no more than {high}")
        return
    if spec.startswith("(case insensitive) ["):
        allowed = spec[len("(case insensitive) ["):-1].split(", ")
        if str(value).upper() not in allowed:
            raise _invalid(definition, raw, f"String must be one of (case insensitive): {', '.join(allowed)}")
        return
    if spec.startswith("["):
        allowed = spec[1:-1].split(", ")
        if value not in allowed:
            raise _invalid(definition, raw, f"String must be one of: {', '.join(allowed)}")


def _check_list(definition: BrokerConfigDef, raw: str, items: object) -> None:
    assert isinstance(items, list)
    name, spec = definition.name, definition.validator
    if spec == "non-empty list":  # the quorum's address lists, each with its own entry check
        for item in items:
            address = item
            if name == "controller.quorum.voters":
                node, at, address = item.partition("@")
                if not at or not node.isdigit() or "@" in address:
                    raise InvalidValue(f"Invalid configuration value for {name}. Each entry should be in the "
                                       "form `{id}@{host}:{port}`.")
                if not _HOST_PORT.fullmatch(address):
                    raise InvalidValue(f"Failed to parse host name from entry {item} for the configuration {name}. "
                                       "Each entry should be in the form `{id}@{host}:{port}`.")
            elif not _HOST_PORT.fullmatch(address):
                raise InvalidValue(f"Failed to parse host name from {item} for the configuration {name}. "
                                   'Each entry should be in the form "{host}:{port}"')
        return
    if spec is None:
        return
    if len(set(items)) != len(items):
        raise InvalidValue(f"Configuration '{name}' values must not be duplicated.")
    allowed = spec[1:-1].split(", ") if spec.startswith("[") else None
    if not items and name in _NON_EMPTY_LISTS:
        shown = spec if allowed is not None else "any non-empty value"
        raise InvalidValue(f"Configuration '{name}' must not be empty. Valid values include: {shown}")
    for item in items:
        if allowed is not None and item not in allowed:
            raise _invalid(definition, item, f"String must be one of: {', '.join(allowed)}")
        if allowed is None and not item:
            raise InvalidValue(f"Configuration '{name}' values must not be empty.")


def _java_double(value: float) -> str:
    """``Double.toString``: the shortest digits, plain from 10^-3 up to 10^7, else d.dddE±n."""
    if math.isnan(value) or math.isinf(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    if value == 0 or 1e-3 <= abs(value) < 1e7:
        text = repr(value)
        return text if "." in text or "e" in text else f"{text}.0"
    sign, digits, exponent = Decimal(repr(value)).as_tuple()
    shown = "".join(map(str, digits)).rstrip("0") or "0"
    assert isinstance(exponent, int)
    power = exponent + len(digits) - 1
    return f"{'-' if sign else ''}{shown[0]}.{shown[1:] or '0'}E{power}"
