"""Topic-level configuration: Kafka's topic config names, types, defaults and broker synonyms.

This is the one place that knows what a topic config means. ``resolve_topic_configs`` turns
topic overrides plus broker settings into the value, source and synonyms that DescribeConfigs
reports, and ``LogConfig`` is the plain-number view the log obeys. Defaults and synonyms are
Kafka 4.x's.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import IntEnum

MAX_LONG = 2**63 - 1
MAX_INT = 2**31 - 1


class ConfigSource(IntEnum):
    """DescribeConfigs ``config_source`` values."""

    UNKNOWN = 0
    DYNAMIC_TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5
    DYNAMIC_BROKER_LOGGER_CONFIG = 6
    CLIENT_METRICS_CONFIG = 7
    GROUP_CONFIG = 8


class ConfigType(IntEnum):
    """DescribeConfigs ``config_type`` values (v3+)."""

    UNKNOWN = 0
    BOOLEAN = 1
    STRING = 2
    INT = 3
    SHORT = 4
    LONG = 5
    DOUBLE = 6
    LIST = 7
    CLASS = 8
    PASSWORD = 9


class InvalidConfig(ValueError):
    """A config name or value Kafka would reject with INVALID_CONFIG; the message is Kafka's."""


@dataclass(slots=True, frozen=True)
class TopicConfigDef:
    name: str
    type: ConfigType
    default: str
    doc: str
    # Broker keys that supply the default when the topic has no override, in precedence
    # order, each with the factor that converts its unit to this config's unit.
    broker_synonyms: tuple[tuple[str, int], ...] = ()
    valid_values: tuple[str, ...] = ()
    minimum: float | None = None


def _d(name: str, kind: ConfigType, default: str, doc: str, *synonyms: str | tuple[str, int],
       valid: tuple[str, ...] = (), minimum: float | None = None) -> TopicConfigDef:
    syn = tuple(s if isinstance(s, tuple) else (s, 1) for s in synonyms)
    return TopicConfigDef(name, kind, default, doc, syn, valid, minimum)


B, S, INT, L, D, LS = (ConfigType.BOOLEAN, ConfigType.STRING, ConfigType.INT, ConfigType.LONG,
                       ConfigType.DOUBLE, ConfigType.LIST)
_HOUR, _MIN = 3_600_000, 60_000

TOPIC_CONFIGS: dict[str, TopicConfigDef] = {
    d.name: d
    for d in [
        _d("cleanup.policy", LS, "delete", "Retention policy: delete, compact, or both.",
           "log.cleanup.policy", valid=("delete", "compact")),
        _d("compression.gzip.level", INT, "-1", "gzip level when compression.type=gzip.",
           "compression.gzip.level"),
        _d("compression.lz4.level", INT, "9", "lz4 level when compression.type=lz4.",
           "compression.lz4.level"),
        _d("compression.type", S, "producer", "Final compression of the topic's batches.",
           "compression.type",
           valid=("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")),
        _d("compression.zstd.level", INT, "3", "zstd level when compression.type=zstd.",
           "compression.zstd.level"),
        _d("delete.retention.ms", L, "86400000", "How long tombstones are kept on compacted topics.",
           "log.cleaner.delete.retention.ms", minimum=0),
        _d("file.delete.delay.ms", L, "60000", "Delay before a deleted segment file is removed.",
           "log.segment.delete.delay.ms", minimum=0),
        _d("flush.messages", L, str(MAX_LONG), "fsync after this many messages.",
           "log.flush.interval.messages", minimum=1),
        _d("flush.ms", L, str(MAX_LONG), "fsync after this many milliseconds.",
           "log.flush.interval.ms", minimum=0),
        _d("follower.replication.throttled.replicas", LS, "", "Replicas throttled as followers."),
        _d("index.interval.bytes", INT, "4096", "Bytes of log between offset index entries.",
           "log.index.interval.bytes", minimum=0),
        _d("leader.replication.throttled.replicas", LS, "", "Replicas throttled as leaders."),
        _d("local.retention.bytes", L, "-2", "Local retention size (-2: use retention.bytes).",
           "log.local.retention.bytes", minimum=-2),
        _d("local.retention.ms", L, "-2", "Local retention time (-2: use retention.ms).",
           "log.local.retention.ms", minimum=-2),
        _d("max.compaction.lag.ms", L, str(MAX_LONG), "Longest a record stays uncompacted.",
           "log.cleaner.max.compaction.lag.ms", minimum=1),
        _d("max.message.bytes", INT, "1048588", "Largest record batch accepted, after compression.",
           "message.max.bytes", minimum=0),
        _d("message.timestamp.after.max.ms", L, "3600000",
           "How far in the future a CreateTime timestamp may be.",
           "log.message.timestamp.after.max.ms", minimum=0),
        _d("message.timestamp.before.max.ms", L, str(MAX_LONG),
           "How far in the past a CreateTime timestamp may be.",
           "log.message.timestamp.before.max.ms", minimum=0),
        _d("message.timestamp.type", S, "CreateTime", "CreateTime or LogAppendTime.",
           "log.message.timestamp.type", valid=("CreateTime", "LogAppendTime")),
        _d("min.cleanable.dirty.ratio", D, "0.5", "Dirty ratio that makes a log cleanable.",
           "log.cleaner.min.cleanable.ratio", minimum=0),
        _d("min.compaction.lag.ms", L, "0", "Shortest time a record stays uncompacted.",
           "log.cleaner.min.compaction.lag.ms", minimum=0),
        _d("min.insync.replicas", INT, "1", "In-sync replicas needed for an acks=all write.",
           "min.insync.replicas", minimum=1),
        _d("preallocate", B, "false", "Preallocate segment files.", "log.preallocate"),
        _d("remote.log.copy.disable", B, "false", "Stop copying to tiered storage."),
        _d("remote.log.delete.on.disable", B, "false", "Delete tiered data when disabled."),
        _d("remote.storage.enable", B, "false", "Tiered storage for this topic."),
        _d("retention.bytes", L, "-1", "Partition size above which old segments are deleted.",
           "log.retention.bytes"),
        _d("retention.ms", L, "604800000", "Age after which old segments are deleted (-1: never).",
           "log.retention.ms", ("log.retention.minutes", _MIN), ("log.retention.hours", _HOUR),
           minimum=-1),
        _d("segment.bytes", INT, "1073741824", "Segment file size.", "log.segment.bytes",
           minimum=1024 * 1024),
        _d("segment.index.bytes", INT, "10485760", "Offset index file size.",
           "log.index.size.max.bytes", minimum=4),
        _d("segment.jitter.ms", L, "0", "Random jitter subtracted from the roll time.",
           "log.roll.jitter.ms", ("log.roll.jitter.hours", _HOUR), minimum=0),
        _d("segment.ms", L, "604800000", "Age at which a segment is rolled.",
           "log.roll.ms", ("log.roll.hours", _HOUR), minimum=1),
        _d("unclean.leader.election.enable", B, "false",
           "Allow out-of-sync replicas to become leader.", "unclean.leader.election.enable"),
    ]
}

_TYPE_NAMES = {ConfigType.INT: "INT", ConfigType.LONG: "LONG", ConfigType.DOUBLE: "DOUBLE"}


def validate_topic_config(name: str, value: str | None) -> None:
    """Raise InvalidConfig, with Kafka's wording, if ``name=value`` is not a valid override."""
    definition = TOPIC_CONFIGS.get(name)
    if definition is None:
        raise InvalidConfig(f"Unknown topic config name: {name}")
    if value is None:
        raise InvalidConfig(f"Null value not supported for topic configs: {name}")
    parsed = parse_value(definition, value)
    if definition.minimum is not None and isinstance(parsed, int | float) and not isinstance(parsed, bool):
        if parsed < definition.minimum:
            raise InvalidConfig(
                f"Invalid value {value} for configuration {name}: Value must be at least "
                f"{int(definition.minimum) if definition.minimum == int(definition.minimum) else definition.minimum}"
            )
    if definition.valid_values:
        items = [v.strip() for v in value.split(",")] if definition.type == LS else [value]
        for item in items:
            if item and item not in definition.valid_values:
                raise InvalidConfig(
                    f"Invalid value {value} for configuration {name}: String must be one of: "
                    + ", ".join(definition.valid_values)
                )


def parse_value(definition: TopicConfigDef, value: str) -> object:
    kind = definition.type
    text = value.strip()
    try:
        if kind == ConfigType.INT:
            parsed = int(text)
            if not -(2**31) <= parsed <= MAX_INT:
                raise ValueError
            return parsed
        if kind == ConfigType.LONG:
            parsed = int(text)
            if not -(2**63) <= parsed <= MAX_LONG:
                raise ValueError
            return parsed
        if kind == ConfigType.DOUBLE:
            return float(text)
    except ValueError:
        raise InvalidConfig(
            f"Invalid value {value} for configuration {definition.name}: "
            f"Not a number of type {_TYPE_NAMES[kind]}"
        ) from None
    if kind == ConfigType.BOOLEAN:
        if text.lower() not in ("true", "false"):
            raise InvalidConfig(
                f"Invalid value {value} for configuration {definition.name}: "
                "Expected value to be either true or false"
            )
        return text.lower() == "true"
    return text


@dataclass(slots=True, frozen=True)
class ConfigEntry:
    """One resolved config as DescribeConfigs reports it."""

    name: str
    value: str | None
    source: ConfigSource
    type: ConfigType
    doc: str
    synonyms: tuple[tuple[str, str | None, ConfigSource], ...]


BrokerLayers = Callable[[str], list[tuple[str, ConfigSource]]]


def resolve_topic_configs(overrides: Mapping[str, str], broker_layers: BrokerLayers) -> dict[str, ConfigEntry]:
    """Every topic config's effective value, source and synonyms.

    ``broker_layers(key)`` lists a broker key's values in precedence order (cluster-wide
    dynamic default, static server.properties value, built-in default). As Kafka reports it:
    the primary broker key lists every layer as a synonym, later keys only their set layers;
    the value is the first set layer across keys, else the first built-in default.
    """
    resolved: dict[str, ConfigEntry] = {}
    for name, definition in TOPIC_CONFIGS.items():
        synonyms: list[tuple[str, str | None, ConfigSource]] = []
        value: str | None = None
        source = ConfigSource.DEFAULT_CONFIG
        if name in overrides:
            value, source = overrides[name], ConfigSource.DYNAMIC_TOPIC_CONFIG
            synonyms.append((name, value, source))
        defaults: list[tuple[str, int]] = []
        for position, (key, factor) in enumerate(definition.broker_synonyms):
            for layer_value, layer_source in broker_layers(key):
                if layer_source == ConfigSource.DEFAULT_CONFIG:
                    defaults.append((layer_value, factor))
                    if position > 0:
                        continue  # only the primary broker key's default is a synonym
                elif value is None:
                    value, source = _scaled(layer_value, factor), layer_source
                synonyms.append((key, layer_value, layer_source))
        if value is None and defaults:
            value = _scaled(*defaults[0])
        if value is None:
            value = definition.default
        resolved[name] = ConfigEntry(name, value, source, definition.type, definition.doc, tuple(synonyms))
    return resolved


def _scaled(raw: str, factor: int) -> str:
    return str(int(raw) * factor) if factor != 1 else raw


@dataclass(slots=True, frozen=True)
class LogConfig:
    """The numbers a PartitionLog obeys, from resolved topic configs."""

    segment_bytes: int = 1073741824
    segment_ms: int = 604800000
    retention_ms: int = 604800000
    retention_bytes: int = -1
    max_message_bytes: int = 1048588
    index_interval_bytes: int = 4096
    flush_messages: int = MAX_LONG
    flush_ms: int = MAX_LONG
    log_append_time: bool = False
    compact: bool = False
    delete: bool = True
    timestamp_before_max_ms: int = MAX_LONG
    timestamp_after_max_ms: int = 3600000
    min_insync_replicas: int = 1
    # Log cleaner (cleanup.policy=compact): read by storage/log_cleaner.py.
    delete_retention_ms: int = 86400000
    min_cleanable_ratio: float = 0.5
    min_compaction_lag_ms: int = 0
    max_compaction_lag_ms: int = MAX_LONG
    file_delete_delay_ms: int = 60000

    @classmethod
    def from_resolved(cls, resolved: Mapping[str, ConfigEntry]) -> LogConfig:
        def num(name: str) -> int:
            return int(resolved[name].value or 0)

        policy = {p.strip() for p in (resolved["cleanup.policy"].value or "").split(",")}
        segment_ms = num("segment.ms")
        if "compact" in policy:
            # Kafka rolls a compacted log by max.compaction.lag.ms too, so its records can be cleaned in time.
            segment_ms = min(segment_ms, num("max.compaction.lag.ms"))
        return cls(
            segment_bytes=num("segment.bytes"),
            segment_ms=segment_ms,
            retention_ms=num("retention.ms"),
            retention_bytes=num("retention.bytes"),
            max_message_bytes=num("max.message.bytes"),
            index_interval_bytes=num("index.interval.bytes"),
            flush_messages=num("flush.messages"),
            flush_ms=num("flush.ms"),
            log_append_time=resolved["message.timestamp.type"].value == "LogAppendTime",
            compact="compact" in policy,
            delete="delete" in policy,
            timestamp_before_max_ms=num("message.timestamp.before.max.ms"),
            timestamp_after_max_ms=num("message.timestamp.after.max.ms"),
            min_insync_replicas=num("min.insync.replicas"),
            delete_retention_ms=num("delete.retention.ms"),
            min_cleanable_ratio=float(resolved["min.cleanable.dirty.ratio"].value or 0.5),
            min_compaction_lag_ms=num("min.compaction.lag.ms"),
            max_compaction_lag_ms=num("max.compaction.lag.ms"),
            file_delete_delay_ms=num("file.delete.delay.ms"),
        )
