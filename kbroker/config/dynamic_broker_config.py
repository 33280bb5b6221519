"""Dynamic broker configs: which broker keys may change at runtime, and their validation.

Kafka keeps dynamic broker configs in the metadata log (ConfigRecords of resource type BROKER):
for one broker (resource name = its id, source DYNAMIC_BROKER_CONFIG) or for every broker
(resource name "", source DYNAMIC_DEFAULT_BROKER_CONFIG); they take precedence over
server.properties. Its rules, as Kafka 4.3.1 answers ``kafka-configs --entity-type brokers
--alter`` (checked side by side in tests/end_to_end/test_dynamic_broker_configs.py):

- a key Kafka reads only at start-up (``log.dirs``, ``broker.rack``, ...) is INVALID_REQUEST
  "Cannot update these configs dynamically: [key, ...]";
- a value that does not parse, or is below the minimum of the topic config it defaults, is
  INVALID_REQUEST with Kafka's ConfigException wording;
- a broker-level (not cluster-wide) ``min.insync.replicas`` is INVALID_CONFIG while ELR is on
  (always, in kbroker);
- a key Kafka does not know is accepted and stored.

kbroker acts at runtime on the keys that default topic configs (``log.retention.ms``,
``log.segment.bytes``, ``min.insync.replicas``, ``unclean.leader.election.enable``, ...): every
topic without its own override follows them at once. Other dynamic keys are stored and described
but not acted on yet; ``not_acted_on`` names them so the broker can say so once.
"""

from __future__ import annotations

from collections.abc import Mapping

from kbroker.config.kafka_config import BROKER_CONFIGS
from kbroker.protocol.errors import ErrorCode, KafkaError
from kbroker.storage.log_config import TOPIC_CONFIGS, ConfigType, TopicConfigDef

# broker key -> the topic config it defaults, for keys given in the topic config's own unit.
_TOPIC_DEFAULTED: dict[str, TopicConfigDef] = {
    key: definition
    for definition in TOPIC_CONFIGS.values()
    for key, factor in definition.broker_synonyms
    if factor == 1
}
_ACTED_ON = {key for definition in TOPIC_CONFIGS.values() for key, _factor in definition.broker_synonyms}
_NUMBER_TYPES = {ConfigType.INT: "INT", ConfigType.LONG: "LONG", ConfigType.DOUBLE: "DOUBLE"}


def validate_dynamic_broker_configs(resource_name: str, configs: Mapping[str, str]) -> None:
    """Raise KafkaError, with Kafka's code and message, unless every ``key=value`` may be set
    dynamically on the BROKER resource ``resource_name`` ("" = the cluster-wide default)."""
    static = sorted(key for key in configs if key in BROKER_CONFIGS and BROKER_CONFIGS[key].read_only)
    if static:
        raise KafkaError(ErrorCode.invalid_request, f"Cannot update these configs dynamically: [{', '.join(static)}]")
    if resource_name != "" and "min.insync.replicas" in configs:
        raise KafkaError(ErrorCode.invalid_config,
                         "Broker-level min.insync.replicas cannot be altered while ELR is enabled.")
    for key, value in configs.items():
        _validate_value(key, value)


def not_acted_on(keys: list[str]) -> list[str]:
    """The keys among ``keys`` that kbroker stores but does not apply at runtime."""
    return sorted(key for key in keys if key not in _ACTED_ON)


def _validate_value(key: str, value: str) -> None:
    definition = BROKER_CONFIGS.get(key)
    if definition is None:
        return  # unknown to Kafka too: stored as given
    text = value.strip()
    kind = definition.type
    if kind in _NUMBER_TYPES:
        try:
            number = float(text) if kind == ConfigType.DOUBLE else int(text)
        except ValueError:
            raise KafkaError(ErrorCode.invalid_request,
                             f"Invalid value {value} for configuration {key}: Not a number of type "
                             f"{_NUMBER_TYPES[kind]}") from None
        topic_definition = _TOPIC_DEFAULTED.get(key)
        minimum = topic_definition.minimum if topic_definition is not None else None
        if minimum is not None and number < minimum:
            shown = int(minimum) if minimum == int(minimum) else minimum
            raise KafkaError(ErrorCode.invalid_request,
                             f"Invalid value {value} for configuration {key}: Value must be at least {shown}")
    elif kind == ConfigType.BOOLEAN and text.lower() not in ("true", "false"):
        raise KafkaError(ErrorCode.invalid_request,
                         f"Invalid value {value} for configuration {key}: Expected value to be either true or false")
    else:
        topic_definition = _TOPIC_DEFAULTED.get(key)
        allowed = topic_definition.valid_values if topic_definition is not None else ()
        items = [item.strip() for item in text.split(",")] if kind == ConfigType.LIST else [text]
        bad = [item for item in items if allowed and item and item not in allowed]
        if bad:
            raise KafkaError(ErrorCode.invalid_request,
                             f"Invalid value {value} for configuration {key}: String must be one of: "
                             + ", ".join(allowed))
