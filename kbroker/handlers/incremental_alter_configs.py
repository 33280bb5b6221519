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
BROKER resources (this broker's id, or "" for the cluster-wide default) change dynamic broker
configs the same way, validated as Kafka does (kbroker/config/dynamic_broker_config.py) and
stored by the controller.
GROUP, CLIENT_METRICS and BROKER_LOGGER resources: kbroker/config/config_resources.py
(incremental_alter_other); other resource types answer INVALID_REQUEST.
With an authorizer each resource needs ALTER_CONFIGS (a topic or group on itself, the others on
the cluster), else that resource's TOPIC/GROUP/CLUSTER_AUTHORIZATION_FAILED, as Kafka answers.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import Protocol

from kbroker.config.config_resources import (
    DEFAULT_TOPIC_RESOURCE,
    OTHER_TYPES,
    RESOURCE_BROKER,
    RESOURCE_TOPIC,
    answer_each_resource,
    check_broker_resource,
    incremental_alter_other,
    null_value_error,
)
from kbroker.config.dynamic_broker_config import not_acted_on, validate_dynamic_broker_configs
from kbroker.config.kafka_config import BROKER_CONFIGS
from kbroker.handlers.security import HasSecurity, config_resource_denied
from kbroker.handlers.services import HasCatalogue, HasCluster
from kbroker.network.context import RequestContext
from kbroker.protocol.acl import AclOperation
from kbroker.protocol.codec import response_module
from kbroker.protocol.errors import ErrorCode, KafkaError
from kbroker.storage.log_config import TOPIC_CONFIGS, ConfigType

API_KEY = 44
MIN_VERSION = 0
MAX_VERSION = 1

SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
_OP_NAMES = {APPEND: "APPEND", SUBTRACT: "SUBTRACT"}

log = logging.getLogger(__name__)


class Services(HasCatalogue, HasCluster, HasSecurity, Protocol): ...


async def handle(ctx: RequestContext[Services], request: object) -> object:
    m = response_module(API_KEY, ctx.api_version)
    return await answer_each_resource(
        m, m.IncrementalAlterConfigsResponse, request, lambda resource: _alter(ctx, resource, request.validate_only)
    )


async def _alter(ctx: RequestContext[Services], resource: object, validate_only: bool) -> None:
    denied = config_resource_denied(ctx, AclOperation.ALTER_CONFIGS, resource.resource_type, resource.resource_name)
    if denied is not None:
        raise KafkaError(denied.code)  # Kafka answers these without a message
    if resource.resource_type in OTHER_TYPES:  # GROUP, CLIENT_METRICS, BROKER_LOGGER
        await incremental_alter_other(ctx.services.catalogue, ctx.services.cluster.node_id, resource, validate_only)
        return
    if resource.resource_type == RESOURCE_BROKER:
        check_broker_resource(ctx.services.cluster.node_id, resource.resource_name)
        await _alter_broker(ctx, resource, validate_only)
        return
    if resource.resource_type != RESOURCE_TOPIC:
        raise KafkaError(ErrorCode.invalid_request, f"Unknown resource type {resource.resource_type}")
    if resource.resource_name == "":
        raise KafkaError(ErrorCode.invalid_request, DEFAULT_TOPIC_RESOURCE)
    catalogue = ctx.services.catalogue
    overrides: dict[str, str | None] = dict(catalogue.topic_overrides(resource.resource_name))
    _apply_operations(resource.configs, overrides, _topic_list_default)
    await catalogue.set_topic_configs(resource.resource_name, overrides, validate_only)


async def _alter_broker(ctx: RequestContext[Services], resource: object, validate_only: bool) -> None:
    """Dynamic broker configs: this broker's own, or the cluster-wide default (name "")."""
    catalogue = ctx.services.catalogue
    configs: dict[str, str | None] = dict(catalogue.dynamic_broker_configs(resource.resource_name))
    _apply_operations(resource.configs, configs, _broker_list_default)
    wanted = {key: value for key, value in configs.items() if value is not None}
    changed = {c.name: wanted[c.name] for c in resource.configs if c.name in wanted}
    validate_dynamic_broker_configs(resource.resource_name, changed)
    await catalogue.set_broker_configs(resource.resource_name, wanted, validate_only)
    stored_only = not_acted_on(list(changed))
    if stored_only and not validate_only:
        log.info("dynamic broker config(s) %s stored; kbroker does not act on them at runtime yet", stored_only)


def _apply_operations(operations: Iterable[object], configs: dict[str, str | None],
                      list_default: Callable[[str], str | None]) -> None:
    """Apply SET / DELETE / APPEND / SUBTRACT to ``configs`` in request order."""
    keys = [c.name for c in operations]
    if len(set(keys)) != len(keys):
        raise KafkaError(ErrorCode.invalid_request, "Error due to duplicate config keys")
    for config in operations:
        op, key = config.config_operation, config.name
        if op != DELETE and config.value is None:
            raise null_value_error(key)
        if op == SET:
            configs[key] = config.value
        elif op == DELETE:
            configs.pop(key, None)
        elif op in (APPEND, SUBTRACT):
            configs[key] = _edit_list(key, configs.get(key), config.value, op, list_default)
        else:
            raise KafkaError(ErrorCode.invalid_request, f"Unknown operation type {op}")


def _topic_list_default(key: str) -> str | None:
    definition = TOPIC_CONFIGS.get(key)
    return definition.default if definition is not None and definition.type == ConfigType.LIST else None


def _broker_list_default(key: str) -> str | None:
    definition = BROKER_CONFIGS.get(key)
    if definition is None or definition.type != ConfigType.LIST:
        return None
    return definition.default or ""


def _edit_list(key: str, current: str | None, operand: str | None, op: int,
               list_default: Callable[[str], str | None]) -> str:
    default = list_default(key)
    if default is None:
        raise KafkaError(
            ErrorCode.invalid_config,
            f"Can't {_OP_NAMES[op]} to key {key} because its type is not LIST.",
        )
    items = _split(default if current is None else current)
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
