"""AlterConfigs (key 33), v0-2.

TOPIC resources: the given configs replace all of the topic's overrides (keys left out go
back to their defaults), after validation; validate_only checks and changes nothing.
Unknown topic UNKNOWN_TOPIC_OR_PARTITION; an unknown key or bad value INVALID_CONFIG; a null
value, a key given twice, a resource named twice in one request or the topic "" (Kafka's
"default topic resource") INVALID_REQUEST with Kafka's message. Logs of the topic pick up the
new configuration at once.
BROKER resources (this broker's id, or "" for the cluster-wide default): the given configs
replace that resource's dynamic broker configs, validated as Kafka does
(kbroker/config/dynamic_broker_config.py). GROUP and CLIENT_METRICS resources: the given
configs replace the resource's (kbroker/config/config_resources.py alter_other). BROKER_LOGGER
(which Kafka rejects here too) and other resource types answer INVALID_REQUEST.
With an authorizer each resource needs ALTER_CONFIGS (a topic or group on itself, the others on
the cluster), else that resource's TOPIC/GROUP/CLUSTER_AUTHORIZATION_FAILED, as Kafka answers.
"""

from __future__ import annotations

from typing import Protocol

from kbroker.config.config_resources import (
    DEFAULT_TOPIC_RESOURCE,
    RESOURCE_BROKER,
    RESOURCE_CLIENT_METRICS,
    RESOURCE_GROUP,
    RESOURCE_TOPIC,
    alter_other,
    answer_each_resource,
    check_broker_resource,
    null_value_error,
)
from kbroker.config.dynamic_broker_config import validate_dynamic_broker_configs
from kbroker.handlers.security import HasSecurity, config_resource_denied
from kbroker.handlers.services import HasCatalogue, HasCluster
from kbroker.network.context import RequestContext
from kbroker.protocol.acl import AclOperation
from kbroker.protocol.codec import response_module
from kbroker.protocol.errors import ErrorCode, KafkaError

API_KEY = 33
MIN_VERSION = 0
MAX_VERSION = 2


class Services(HasCatalogue, HasCluster, HasSecurity, Protocol): ...


async def handle(ctx: RequestContext[Services], request: object) -> object:
    m = response_module(API_KEY, ctx.api_version)
    return await answer_each_resource(
        m, m.AlterConfigsResponse, request, lambda resource: _alter(ctx, resource, request.validate_only)
    )


async def _alter(ctx: RequestContext[Services], resource: object, validate_only: bool) -> None:
    denied = config_resource_denied(ctx, AclOperation.ALTER_CONFIGS, resource.resource_type, resource.resource_name)
    if denied is not None:
        raise KafkaError(denied.code)  # Kafka answers these without a message
    if resource.resource_type not in (RESOURCE_TOPIC, RESOURCE_BROKER, RESOURCE_GROUP, RESOURCE_CLIENT_METRICS):
        raise KafkaError(ErrorCode.invalid_request, f"Unknown resource type {resource.resource_type}")
    if resource.resource_type == RESOURCE_BROKER:
        check_broker_resource(ctx.services.cluster.node_id, resource.resource_name)
    elif resource.resource_type == RESOURCE_TOPIC and resource.resource_name == "":
        raise KafkaError(ErrorCode.invalid_request, DEFAULT_TOPIC_RESOURCE)
    configs: dict[str, str] = {}
    for config in resource.configs:
        if config.name in configs:
            raise KafkaError(ErrorCode.invalid_request, "Error due to duplicate config keys")
        if config.value is None:
            raise null_value_error(config.name)
        configs[config.name] = config.value
    catalogue = ctx.services.catalogue
    if resource.resource_type in (RESOURCE_GROUP, RESOURCE_CLIENT_METRICS):
        await alter_other(catalogue, resource.resource_type, resource.resource_name, configs, validate_only)
    elif resource.resource_type == RESOURCE_BROKER:
        validate_dynamic_broker_configs(resource.resource_name, configs)
        await catalogue.set_broker_configs(resource.resource_name, configs, validate_only)
    else:
        await catalogue.set_topic_configs(resource.resource_name, dict(configs), validate_only)
