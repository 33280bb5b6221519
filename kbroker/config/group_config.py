"""Group configs: the keys a GROUP config resource (type 32) holds, and their validation.

Kafka 4.3 lets an operator override, per group id, the group coordinator's session timeouts,
heartbeat intervals and the share/streams group settings (``kafka-configs --entity-type
groups``). Each key falls back to a broker key (``consumer.session.timeout.ms`` to
``group.consumer.session.timeout.ms``, ...) or, for the few without one, to its own default.
A change is validated over the group's whole resulting config with the broker's defaults filled
in, as Kafka's controller does: names first ("Unknown group config name"), then each value's
type and lower bound (ConfigException wording), then the bounds the broker's
``group.*.min/max.*`` keys set, then session timeout above heartbeat interval. Every failure
is INVALID_CONFIG with Kafka's message.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from kbroker.protocol.errors import ErrorCode, KafkaError
from kbroker.storage.log_config import ConfigEntry, ConfigSource, ConfigType

CONSUMER_SESSION_TIMEOUT_MS = "consumer.session.timeout.ms"
CONSUMER_HEARTBEAT_INTERVAL_MS = "consumer.heartbeat.interval.ms"
SHARE_AUTO_OFFSET_RESET = "share.auto.offset.reset"
SHARE_ISOLATION_LEVEL = "share.isolation.level"
_ISOLATION_LEVELS = ("read_committed", "read_uncommitted")


@dataclass(frozen=True, slots=True)
class GroupConfigDef:
    name: str
    type: ConfigType
    default: str  # used when neither the group nor the broker key sets it
    broker_key: str | None  # the broker key it falls back to
    minimum: int | None = None


def _int(name: str, broker_key: str, default: int, minimum: int) -> GroupConfigDef:
    return GroupConfigDef(name, ConfigType.INT, str(default), broker_key, minimum)


# In Kafka's definition order, which is the order values are parsed (the first bad one is reported).
GROUP_CONFIGS: dict[str, GroupConfigDef] = {d.name: d for d in (
    _int(CONSUMER_SESSION_TIMEOUT_MS, "group.consumer.session.timeout.ms", 45000, 1),
    _int(CONSUMER_HEARTBEAT_INTERVAL_MS, "group.consumer.heartbeat.interval.ms", 5000, 1),
    _int("consumer.assignment.interval.ms", "group.consumer.assignment.interval.ms", 1000, 0),
    _int("share.session.timeout.ms", "group.share.session.timeout.ms", 45000, 1),
    _int("share.heartbeat.interval.ms", "group.share.heartbeat.interval.ms", 5000, 1),
    _int("share.record.lock.duration.ms", "group.share.record.lock.duration.ms", 30000, 1000),
    _int("share.delivery.count.limit", "group.share.delivery.count.limit", 5, 2),
    _int("share.partition.max.record.locks", "group.share.partition.max.record.locks", 2000, 100),
    GroupConfigDef(SHARE_AUTO_OFFSET_RESET, ConfigType.STRING, "latest", None),
    GroupConfigDef(SHARE_ISOLATION_LEVEL, ConfigType.STRING, "read_uncommitted", None),
    GroupConfigDef("share.renew.acknowledge.enable", ConfigType.BOOLEAN, "true", None),
    _int("share.assignment.interval.ms", "group.share.assignment.interval.ms", 1000, 0),
    _int("streams.session.timeout.ms", "group.streams.session.timeout.ms", 45000, 1),
    _int("streams.heartbeat.interval.ms", "group.streams.heartbeat.interval.ms", 5000, 1),
    _int("streams.num.standby.replicas", "group.streams.num.standby.replicas", 0, 0),
    _int("streams.initial.rebalance.delay.ms", "group.streams.initial.rebalance.delay.ms", 3000, 0),
    _int("streams.assignment.interval.ms", "group.streams.assignment.interval.ms", 1000, 0),
)}

# The broker keys bounding group values, with Kafka's defaults: (group key, min key, max key).
# A None bound is not checked. Assignment intervals are only checked when the group sets them.
_BOUNDS: tuple[tuple[str, str | None, str], ...] = (
    (CONSUMER_HEARTBEAT_INTERVAL_MS, "group.consumer.min.heartbeat.interval.ms",
     "group.consumer.max.heartbeat.interval.ms"),
    (CONSUMER_SESSION_TIMEOUT_MS, "group.consumer.min.session.timeout.ms", "group.consumer.max.session.timeout.ms"),
    ("consumer.assignment.interval.ms", "group.consumer.min.assignment.interval.ms",
     "group.consumer.max.assignment.interval.ms"),
    ("share.heartbeat.interval.ms", "group.share.min.heartbeat.interval.ms", "group.share.max.heartbeat.interval.ms"),
    ("share.session.timeout.ms", "group.share.min.session.timeout.ms", "group.share.max.session.timeout.ms"),
    ("share.record.lock.duration.ms", "group.share.min.record.lock.duration.ms",
     "group.share.max.record.lock.duration.ms"),
    ("share.delivery.count.limit", "group.share.min.delivery.count.limit", "group.share.max.delivery.count.limit"),
    ("share.partition.max.record.locks", "group.share.min.partition.max.record.locks",
     "group.share.max.partition.max.record.locks"),
    ("share.assignment.interval.ms", "group.share.min.assignment.interval.ms",
     "group.share.max.assignment.interval.ms"),
    ("streams.heartbeat.interval.ms", "group.streams.min.heartbeat.interval.ms",
     "group.streams.max.heartbeat.interval.ms"),
    ("streams.session.timeout.ms", "group.streams.min.session.timeout.ms", "group.streams.max.session.timeout.ms"),
    ("streams.num.standby.replicas", None, "group.streams.max.standby.replicas"),
    ("streams.assignment.interval.ms", "group.streams.min.assignment.interval.ms",
     "group.streams.max.assignment.interval.ms"),
)
_ONLY_WHEN_SET = {"consumer.assignment.interval.ms", "share.assignment.interval.ms", "streams.assignment.interval.ms"}
BOUND_DEFAULTS: dict[str, int] = {
    "group.consumer.min.heartbeat.interval.ms": 5000, "group.consumer.max.heartbeat.interval.ms": 15000,
    "group.consumer.min.session.timeout.ms": 45000, "group.consumer.max.session.timeout.ms": 60000,
    "group.consumer.min.assignment.interval.ms": 0, "group.consumer.max.assignment.interval.ms": 15000,
    "group.share.min.heartbeat.interval.ms": 5000, "group.share.max.heartbeat.interval.ms": 15000,
    "group.share.min.session.timeout.ms": 45000, "group.share.max.session.timeout.ms": 60000,
    "group.share.min.record.lock.duration.ms": 15000, "group.share.max.record.lock.duration.ms": 60000,
    "group.share.min.delivery.count.limit": 2, "group.share.max.delivery.count.limit": 10,
    "group.share.min.partition.max.record.locks": 100, "group.share.max.partition.max.record.locks": 4000,
    "group.share.min.assignment.interval.ms": 0, "group.share.max.assignment.interval.ms": 15000,
    "group.streams.min.heartbeat.interval.ms": 5000, "group.streams.max.heartbeat.interval.ms": 15000,
    "group.streams.min.session.timeout.ms": 45000, "group.streams.max.session.timeout.ms": 60000,
    "group.streams.max.standby.replicas": 2,
    "group.streams.min.assignment.interval.ms": 0, "group.streams.max.assignment.interval.ms": 15000,
}  # fmt: skip
_TIMEOUT_OVER_INTERVAL = (
    (CONSUMER_SESSION_TIMEOUT_MS, CONSUMER_HEARTBEAT_INTERVAL_MS),
    ("share.session.timeout.ms", "share.heartbeat.interval.ms"),
    ("streams.session.timeout.ms", "streams.heartbeat.interval.ms"),
)

# A broker key's current value (dynamic, static or built-in), or None when nothing sets it.
BrokerValue = Callable[[str], str | None]


def _invalid(message: str) -> KafkaError:
    return KafkaError(ErrorCode.invalid_config, message)


def default_value(definition: GroupConfigDef, broker_value: BrokerValue) -> str:
    """What a group that does not set the key gets: its broker key's value, else its default."""
    if definition.broker_key is not None:
        value = broker_value(definition.broker_key)
        if value is not None:
            return value
    return definition.default


def _broker_int(key: str, broker_value: BrokerValue) -> int:
    value = broker_value(key)
    return int(value) if value is not None else BOUND_DEFAULTS[key]


def parse_int(key: str, value: str, minimum: int | None) -> int:
    """A group or client-metrics INT value as Kafka's ConfigDef parses it (ConfigException wording)."""
    try:
        number = int(value.strip())
    except ValueError:
        number = None
    if number is None or not -(2**31) <= number < 2**31:
        raise _invalid(f"Invalid value {value} for configuration {key}: Not a number of type INT")
    if minimum is not None and number < minimum:
        raise _invalid(f"Invalid value {value} for configuration {key}: Value must be at least {minimum}")
    return number


def _check_value(definition: GroupConfigDef, value: str) -> int | None:
    key = definition.name
    if definition.type == ConfigType.INT:
        return parse_int(key, value, definition.minimum)
    text = value.strip()
    if definition.type == ConfigType.BOOLEAN:
        if text.lower() not in ("true", "false"):
            raise _invalid(f"Invalid value {value} for configuration {key}: Expected value to be either true or false")
    elif key == SHARE_ISOLATION_LEVEL and text not in _ISOLATION_LEVELS:
        raise _invalid(f"Invalid value {text} for configuration {key}: String must be one of: "
                       + ", ".join(_ISOLATION_LEVELS))
    elif key == SHARE_AUTO_OFFSET_RESET and not _is_reset_strategy(text):
        raise _invalid(f"Invalid value {text} for configuration {key}: Invalid value `{text}` for configuration "
                       f"{key}. The value must be either 'earliest', 'latest' or of the format "
                       "'by_duration:<PnDTnHnMn.nS>'.")
    return None


def _is_reset_strategy(text: str) -> bool:
    lowered = text.lower()
    if lowered in ("earliest", "latest"):
        return True
    if not lowered.startswith("by_duration:"):
        return False
    # ISO-8601 PnDTnHnMn.nS with at least one part, not negative (Java's Duration.parse, then a sign check).
    return _DURATION.fullmatch(text[len("by_duration:"):].upper()) is not None


_DURATION = re.compile(r"P(?=\d|T\d)(\d+D)?(T(?=\d)(\d+H)?(\d+M)?(\d+(\.\d+)?S)?)?")


def validate_group_configs(group_id: str, configs: Mapping[str, str], broker_value: BrokerValue) -> None:
    """Raise KafkaError (Kafka's code and message) unless ``configs`` — the group's whole config
    after a change — is valid for group ``group_id`` under this broker's settings."""
    if group_id == "":
        raise KafkaError(ErrorCode.invalid_request, "Default group resources are not allowed.")
    for key in configs:
        if key not in GROUP_CONFIGS:
            raise _invalid(f"Unknown group config name: {key}")
    numbers: dict[str, int] = {}
    for key, definition in GROUP_CONFIGS.items():
        given = configs.get(key)
        # Kafka fills in the broker's defaults for the keys that have one before parsing.
        value = given if given is not None else (default_value(definition, broker_value)
                                                 if definition.broker_key is not None else None)
        if value is None:
            continue
        number = _check_value(definition, value)
        if number is not None:
            numbers[key] = number
    for key, min_key, max_key in _BOUNDS:
        if key in _ONLY_WHEN_SET and key not in configs:
            continue
        number = numbers[key]
        if min_key is not None and number < _broker_int(min_key, broker_value):
            raise _invalid(f"{key} must be greater than or equal to {min_key}")
        if number > _broker_int(max_key, broker_value):
            raise _invalid(f"{key} must be less than or equal to {max_key}")
    for timeout, interval in _TIMEOUT_OVER_INTERVAL:
        if numbers[timeout] <= numbers[interval]:
            raise _invalid(f"{timeout} must be greater than {interval}")


def group_int(configs: Mapping[str, str], key: str, fallback: int) -> int:
    """A group's INT setting as the coordinator uses it: the group's override, else ``fallback``
    (the broker-wide value the coordinator was built with)."""
    value = configs.get(key)
    return int(value) if value is not None else fallback


def describe_group(group_id: str, stored: Mapping[str, str],
                   broker_layers: Callable[[str], list[tuple[str, ConfigSource]]]) -> list[ConfigEntry]:
    """Every group config of ``group_id``, sorted: the group's own value (source GROUP_CONFIG),
    else its broker key's layers (dynamic, static, default), else its default, with those synonyms."""
    if group_id == "":
        raise KafkaError(ErrorCode.invalid_request, "Group name must not be empty")
    entries = []
    for key in sorted(GROUP_CONFIGS):
        definition = GROUP_CONFIGS[key]
        synonyms: list[tuple[str, str | None, ConfigSource]] = []
        if key in stored:
            synonyms.append((key, stored[key], ConfigSource.GROUP_CONFIG))
        if definition.broker_key is not None:
            layers = broker_layers(definition.broker_key) or [(definition.default, ConfigSource.DEFAULT_CONFIG)]
            synonyms += [(definition.broker_key, value, source) for value, source in layers]
        else:
            synonyms.append((key, definition.default, ConfigSource.DEFAULT_CONFIG))
        _name, value, source = synonyms[0]
        entries.append(ConfigEntry(key, value, source, definition.type, "", tuple(synonyms)))
    return entries
