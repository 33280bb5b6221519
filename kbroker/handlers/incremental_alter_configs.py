"""IncrementalAlterConfigs (key 44), v0-1.

TOPIC resources: each operation changes one key of the topic's overrides, the rest stay:
SET (0) sets it, DELETE (1) removes the override (back to the default), APPEND (2) and
SUBTRACT (3) add or remove comma-separated items of a LIST config (starting from the
override, or the config's default when there is none, as Kafka does). The result is
validated as a whole and stored at once; validate_only checks and changes nothing.
Errors per resource: unknown topic UNKNOWN_TOPIC_OR_PARTITION; APPEND/SUBTRACT on a
non-LIST key, unknown key or bad value INVALID_CONFIG; a key given twice, a null value (other
than for DELETE), a resource named twice in one request, the topic "" or an unknown operation
INVALID_REQUEST, with Kafka's messages (Kafka answers UNKNOWN_SERVER_ERROR for an unknown
operation; kbroker says what is wrong).
Deviations: BROKER resources answer INVALID_REQUEST ("dynamic broker configs are not
supported by kbroker yet") unless every operation is a DELETE (a no-op success: nothing is set
dynamically); so do BROKER_LOGGER (log levels cannot be changed remotely yet)
and other resource types.
"""

from __future__ import annotations

from typing import Protocol

from kbroker.config.config_resources import (
    DEFAULT_TOPIC_RESOURCE,
    DYNAMIC_BROKER_CONFIGS_UNSUPPORTED,
    RESOURCE_BROKER,
    RESOURCE_BROKER_LOGGER,
    RESOURCE_TOPIC,
    answer_each_resource,
    check_broker_resource,
    null_value_error,
)
from kbroker.handlers.services import HasCatalogue, HasCluster
from kbroker.network.context import RequestContext
from kbroker.protocol.codec import response_module
from kbroker.protocol.errors import ErrorCode, KafkaError
from kbroker.storage.log_config import TOPIC_CONFIGS, ConfigType

API_KEY = 44
MIN_VERSION = 0
MAX_VERSION = 1

SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
_OP_NAMES = {APPEND: "APPEND", SUBTRACT: "SUBTRACT"}


class Services(HasCatalogue, HasCluster, Protocol): ...


async def handle(ctx: RequestContext[Services], request: object) -> object:
    m = response_module(API_KEY, ctx.api_version)
    return await answer_each_resource(
        m, m.IncrementalAlterConfigsResponse, request, lambda resource: _alter(ctx, resource, request.validate_only)
    )


async def _alter(ctx: RequestContext[Services], resource: object, validate_only: bool) -> None:
    if resource.resource_type in (RESOURCE_BROKER, RESOURCE_BROKER_LOGGER):
        check_broker_resource(ctx.services.cluster.node_id, resource.resource_name)
        if resource.resource_type == RESOURCE_BROKER and all(c.config_operation == DELETE for c in resource.configs):
            return  # nothing is set dynamically, so there is nothing to delete (kafka-reassign-partitions
            # clears its replication throttles this way when a reassignment completes)
        raise KafkaError(ErrorCode.invalid_request, DYNAMIC_BROKER_CONFIGS_UNSUPPORTED)
    if resource.resource_type != RESOURCE_TOPIC:
        raise KafkaError(ErrorCode.invalid_request, f"Unknown resource type {resource.resource_type}")
    if resource.resource_name == "":
        raise KafkaError(ErrorCode.invalid_request, DEFAULT_TOPIC_RESOURCE)
    keys = [c.name for c in resource.configs]
    if len(set(keys)) != len(keys):
        raise KafkaError(ErrorCode.invalid_request, "Error due to duplicate config keys")
    catalogue = ctx.services.catalogue
    overrides: dict[str, str | None] = dict(catalogue.topic_overrides(resource.resource_name))
    for config in resource.configs:
        op, key = config.config_operation, config.name
        if op != DELETE and config.value is None:
            raise null_value_error(key)
        if op == SET:
            overrides[key] = config.value
        elif op == DELETE:
            overrides.pop(key, None)
        elif op in (APPEND, SUBTRACT):
            overrides[key] = _edit_list(key, overrides.get(key), config.value, op)
        else:
            raise KafkaError(ErrorCode.invalid_request, f"Unknown operation type {op}")
    await catalogue.set_topic_configs(resource.resource_name, overrides, validate_only)


def _edit_list(key: str, current: str | None, operand: str | None, op: int) -> str:
    definition = TOPIC_CONFIGS.get(key)
    if definition is None or definition.type != ConfigType.LIST:
        raise KafkaError(
            ErrorCode.invalid_config,
            f"Can't {_OP_NAMES[op]} to key {key} because its type is not LIST.",
        )
    items = _split(definition.default if current is None else current)
    changes = _split(operand or "")
    if op == APPEND:
        for item in changes:
            if item not in items:
                items.append(item)
    else:
        items = [item for item in items if item not in changes]
    return ",".join(items)


def _split(value: str) -> list[str]:
    return [part.strip() for part in value.split(",") if part.strip()]
