"""Config resources as DescribeConfigs, AlterConfigs and IncrementalAlterConfigs name them.

Resource type codes, and the request-level checks the three APIs share (a resource named twice,
a BROKER resource naming another node, a null value), with Kafka's error codes and messages.
The three handlers serve TOPIC and BROKER themselves and hand the other types here
(``OTHER_TYPES``): GROUP (``group_config``) and CLIENT_METRICS (``client_metrics_config``),
stored as ConfigRecords through the controller, and BROKER_LOGGER (``broker_loggers``), this
broker's live log levels. As in Kafka, APPEND and SUBTRACT are INVALID_CONFIG on GROUP and
CLIENT_METRICS keys (none is a LIST to the controller) and legacy AlterConfigs replaces a
GROUP or CLIENT_METRICS resource's configs whole and refuses BROKER_LOGGER.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Protocol

from kbroker.config import broker_loggers
from kbroker.config.client_metrics_config import describe_client_metrics, validate_client_metrics
from kbroker.config.group_config import describe_group, validate_group_configs
from kbroker.protocol.codec import NO_THROTTLE, build
from kbroker.protocol.errors import ErrorCode, KafkaError
from kbroker.storage.log_config import ConfigEntry, ConfigSource

RESOURCE_TOPIC = 2
RESOURCE_BROKER = 4
RESOURCE_BROKER_LOGGER = 8
RESOURCE_CLIENT_METRICS = 16
RESOURCE_GROUP = 32
OTHER_TYPES = frozenset({RESOURCE_BROKER_LOGGER, RESOURCE_CLIENT_METRICS, RESOURCE_GROUP})
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
DUPLICATE_RESOURCE = "Each resource must appear at most once."
DEFAULT_TOPIC_RESOURCE = "Default topic resources are not allowed."


def null_value_error(key: str) -> KafkaError:
    """AlterConfigs / IncrementalAlterConfigs (other than DELETE) with a null value."""
    return KafkaError(ErrorCode.invalid_request, f"Null value not supported for : {key}")


def duplicate_resources(resources: Sequence[object]) -> set[tuple[int, str]]:
    """(type, name) of config resources named more than once in one request."""
    seen: set[tuple[int, str]] = set()
    twice: set[tuple[int, str]] = set()
    for resource in resources:
        key = (resource.resource_type, resource.resource_name)
        (twice if key in seen else seen).add(key)
    return twice


def check_broker_resource(node_id: int, name: str, describing: bool = False) -> None:
    """A BROKER / BROKER_LOGGER config resource must name this node or be "" (Kafka's message
    differs between DescribeConfigs and the two alter APIs)."""
    if name == "":
        return
    try:
        broker_id = int(name)
    except ValueError:
        raise KafkaError(
            ErrorCode.invalid_request, f"Broker id must be an integer, but it is: {name}"
        ) from None
    if broker_id != node_id:
        raise KafkaError(
            ErrorCode.invalid_request,
            f"Unexpected broker id, expected {node_id}{' or empty string' if describing else ''}, "
            f"but received {name}",
        )


async def answer_each_resource(m: Any, response_type: type, request: Any,
                               alter: Callable[[Any], Awaitable[None]]) -> Any:
    """AlterConfigs / IncrementalAlterConfigs: run ``alter`` on each resource and answer per resource.

    A resource named twice in one request is INVALID_REQUEST for each of its entries, as in Kafka.
    """
    duplicates = duplicate_resources(request.resources)
    responses = []
    for resource in request.resources:
        error, message = ErrorCode.none, None
        try:
            if (resource.resource_type, resource.resource_name) in duplicates:
                raise KafkaError(ErrorCode.invalid_request, DUPLICATE_RESOURCE)
            await alter(resource)
        except KafkaError as exc:
            error, message = exc.code, exc.message
        responses.append(build(
            m.AlterConfigsResourceResponse,
            error_code=error,
            error_message=message,
            resource_type=resource.resource_type,
            resource_name=resource.resource_name,
        ))
    return build(response_type, throttle_time=NO_THROTTLE, responses=tuple(responses))


class ResourceConfigStore(Protocol):
    """What the other resource types need of the broker's catalogue (ForwardingController)."""

    def broker_layers(self, key: str) -> list[tuple[str, ConfigSource]]: ...

    def resource_configs(self, resource_type: int, resource_name: str) -> dict[str, str]: ...

    async def set_resource_configs(self, resource_type: int, resource_name: str, wanted: Mapping[str, str],
                                   validate_only: bool = False) -> None: ...


def describe_other(store: ResourceConfigStore, node_id: int, resource_type: int, name: str) -> list[ConfigEntry]:
    """DescribeConfigs of a GROUP, CLIENT_METRICS or BROKER_LOGGER resource, sorted by name."""
    if resource_type == RESOURCE_GROUP:
        return describe_group(name, store.resource_configs(RESOURCE_GROUP, name), store.broker_layers)
    if resource_type == RESOURCE_CLIENT_METRICS:
        return describe_client_metrics(name, store.resource_configs(RESOURCE_CLIENT_METRICS, name))
    if name == "":
        raise KafkaError(ErrorCode.invalid_request, "Broker id must not be empty")
    try:
        broker_id = int(name)
    except ValueError:
        raise KafkaError(ErrorCode.invalid_request, f"Broker id must be an integer, but it is: {name}") from None
    if broker_id != node_id:
        raise KafkaError(ErrorCode.invalid_request, f"Unexpected broker id, expected {node_id} but received {name}")
    return broker_loggers.describe_loggers()


def _operations(resource: Any) -> list[tuple[int, str, str | None]]:
    """(operation, key, value) of an IncrementalAlterConfigs resource, after the broker's own
    checks: a key given twice, then null values (other than DELETE), INVALID_REQUEST."""
    changes = [(int(c.config_operation), c.name, c.value) for c in resource.configs]
    if len({key for _op, key, _value in changes}) != len(changes):
        raise KafkaError(ErrorCode.invalid_request, "Error due to duplicate config keys")
    nulls = [key for op, key, value in changes if op != DELETE and value is None]
    if nulls:
        raise KafkaError(ErrorCode.invalid_request, f"Null value not supported for : {', '.join(nulls)}")
    return changes


async def incremental_alter_other(store: ResourceConfigStore, node_id: int, resource: Any,
                                  validate_only: bool) -> None:
    """IncrementalAlterConfigs of a GROUP, CLIENT_METRICS or BROKER_LOGGER resource."""
    changes = _operations(resource)
    kind, name = resource.resource_type, resource.resource_name
    if kind == RESOURCE_BROKER_LOGGER:
        _check_logger_node(node_id, name)
        broker_loggers.validate_changes(changes)
        if not validate_only:
            broker_loggers.apply_changes(changes)
        return
    configs: dict[str, str] = store.resource_configs(kind, name)
    for op, key, value in changes:
        if op == SET and value is not None:
            configs[key] = value
        elif op == DELETE:
            configs.pop(key, None)
        elif op in (APPEND, SUBTRACT):
            raise KafkaError(ErrorCode.invalid_config, f"Can't {'APPEND' if op == APPEND else 'SUBTRACT'} to key "
                             f"{key} because its type is not LIST.")
        else:
            raise KafkaError(ErrorCode.invalid_request, f"Unknown operation type {op}")
    await _store(store, kind, name, configs, validate_only)


async def alter_other(store: ResourceConfigStore, resource_type: int, name: str, configs: dict[str, str],
                      validate_only: bool) -> None:
    """Legacy AlterConfigs of a GROUP or CLIENT_METRICS resource: ``configs`` replace its own."""
    if resource_type not in (RESOURCE_GROUP, RESOURCE_CLIENT_METRICS):
        raise KafkaError(ErrorCode.invalid_request, f"Unknown resource type {resource_type}")
    await _store(store, resource_type, name, configs, validate_only)


async def _store(store: ResourceConfigStore, kind: int, name: str, configs: dict[str, str],
                 validate_only: bool) -> None:
    if kind == RESOURCE_GROUP:
        validate_group_configs(name, configs, lambda key: _broker_value(store, key))
    else:
        validate_client_metrics(name, configs)
    await store.set_resource_configs(kind, name, configs, validate_only)


def _broker_value(store: ResourceConfigStore, key: str) -> str | None:
    layers = store.broker_layers(key)
    return layers[0][0] if layers else None


def _check_logger_node(node_id: int, name: str) -> None:
    """The BROKER_LOGGER alter checks of Kafka's RuntimeLoggerManager (its own wording)."""
    try:
        requested = int(name)
    except ValueError:
        raise KafkaError(ErrorCode.invalid_request, f"Node id must be an integer, but it is: {name}") from None
    if requested != node_id:
        raise KafkaError(ErrorCode.invalid_request, f"Unexpected node id. Expected {node_id}, but received {requested}")
