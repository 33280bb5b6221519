"""DescribeConfigs (key 32), v1-4.

TOPIC resources: every topic config with its effective value and source (topic override,
static broker setting or default), synonyms (the topic override and the broker keys it
falls back to) when include_synonyms, the type (v3+) and a description when
include_documentation (v3+). Unknown topic: UNKNOWN_TOPIC_OR_PARTITION with message "";
an invalid name (e.g. "") INVALID_TOPIC_EXCEPTION, as Kafka answers.
BROKER resources named with this node's id: every broker key kbroker knows, with its value
from the first layer that sets it — this broker's dynamic config (DYNAMIC_BROKER_CONFIG), the
cluster-wide dynamic default (DYNAMIC_DEFAULT_BROKER_CONFIG;
a new cluster has min.insync.replicas=1 there, as Kafka 4 formats it), the config file or
command line (STATIC_BROKER_CONFIG), the built-in default (DEFAULT_CONFIG) — and whether it
is read-only; synonyms are the key itself once per layer. Named "": only the cluster-wide
dynamic defaults, as in Kafka. Deviation: Kafka describes ~138 broker keys, kbroker the ones
it knows. Another broker id: INVALID_REQUEST ("Unexpected broker id ..."),
as Kafka answers.
configuration_keys restricts the answer (null: all); an unknown key is simply absent.
A successful resource has error message "" (Kafka's answer), a failed one the reason.
Deviations: BROKER_LOGGER answers an empty list (no per-logger levels exposed yet); broker
keys carry no documentation; other resource types (client metrics, groups) answer
INVALID_REQUEST.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol

from kbroker.config.config_resources import (
    RESOURCE_BROKER,
    RESOURCE_BROKER_LOGGER,
    RESOURCE_TOPIC,
    check_broker_resource,
)
from kbroker.config.kafka_config import BROKER_CONFIGS
from kbroker.handlers.services import HasCatalogue, HasCluster
from kbroker.network.context import RequestContext
from kbroker.protocol.codec import NO_THROTTLE, build, response_module
from kbroker.protocol.errors import ErrorCode, KafkaError
from kbroker.replication.quorum.topic_rules import validate_topic_name
from kbroker.storage.log_config import ConfigEntry, ConfigSource, ConfigType

API_KEY = 32
MIN_VERSION = 1
MAX_VERSION = 4


class Services(HasCatalogue, HasCluster, Protocol): ...


async def handle(ctx: RequestContext[Services], request: object) -> object:
    m = response_module(API_KEY, ctx.api_version)
    results = []
    for resource in request.resources:
        configs: tuple = ()
        error, message = ErrorCode.none, ""
        try:
            entries = _entries(ctx, resource.resource_type, resource.resource_name)
            wanted = resource.configuration_keys
            if wanted is not None:
                keep = set(wanted)
                entries = [(e, ro) for e, ro in entries if e.name in keep]
            configs = tuple(_describe(m, request, e, ro) for e, ro in entries)
        except KafkaError as exc:
            error, message = exc.code, exc.message
        results.append(build(
            m.DescribeConfigsResult,
            error_code=error,
            error_message=message,
            resource_type=resource.resource_type,
            resource_name=resource.resource_name,
            configs=configs,
        ))
    return build(m.DescribeConfigsResponse, throttle_time=NO_THROTTLE, results=tuple(results))


def _entries(
    ctx: RequestContext[Services], resource_type: int, name: str
) -> list[tuple[ConfigEntry, bool]]:
    """The resource's configs, sorted by name, each with whether it is read-only."""
    if resource_type == RESOURCE_TOPIC:
        catalogue = ctx.services.catalogue
        if name == "":
            raise KafkaError(
                ErrorCode.invalid_topic_exception, "Topic name is invalid: the empty string is not allowed"
            )
        validate_topic_name(name)
        if name not in catalogue.topics:
            raise KafkaError(ErrorCode.unknown_topic_or_partition, "")
        resolved = catalogue.resolved_configs(name)
        return [(resolved[key], False) for key in sorted(resolved)]
    if resource_type == RESOURCE_BROKER:
        check_broker_resource(ctx.services.cluster.node_id, name, describing=True)
        # "" names the cluster-wide dynamic defaults, not this node.
        return list(_broker_entries(ctx)) if name else list(_cluster_default_entries(ctx))
    if resource_type == RESOURCE_BROKER_LOGGER:
        check_broker_resource(ctx.services.cluster.node_id, name, describing=True)
        return []
    raise KafkaError(ErrorCode.invalid_request, f"Unsupported resource type: {resource_type}")


def _broker_entries(ctx: RequestContext[Services]) -> Iterable[tuple[ConfigEntry, bool]]:
    """Every broker key kbroker knows, and the unknown keys set dynamically on this broker."""
    catalogue = ctx.services.catalogue
    unknown = {key: ConfigSource.DYNAMIC_BROKER_CONFIG for key in catalogue.dynamic_broker_configs(
        str(ctx.services.cluster.node_id)) if key not in BROKER_CONFIGS}
    for key in sorted(BROKER_CONFIGS.keys() | unknown.keys()):
        if key in unknown:
            yield _unknown_key(key, unknown[key]), False
            continue
        definition = BROKER_CONFIGS[key]
        layers = catalogue.broker_layers(key)
        value, source = layers[0] if layers else (None, ConfigSource.DEFAULT_CONFIG)
        synonyms = tuple((key, v, src) for v, src in layers)
        yield ConfigEntry(key, value, source, definition.type, "", synonyms), definition.read_only


def _cluster_default_entries(ctx: RequestContext[Services]) -> Iterable[tuple[ConfigEntry, bool]]:
    """The broker resource named "": only the cluster-wide dynamic defaults, as Kafka answers."""
    source = ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG
    for key, value in sorted(ctx.services.catalogue.cluster_configs.items()):
        if key not in BROKER_CONFIGS:
            yield _unknown_key(key, source), False
            continue
        yield ConfigEntry(key, value, source, BROKER_CONFIGS[key].type, "", ((key, value, source),)), False


def _unknown_key(key: str, source: ConfigSource) -> ConfigEntry:
    """A dynamic key no broker config defines: Kafka cannot tell whether it is a secret, so it
    describes it as sensitive, with no value."""
    return ConfigEntry(key, None, source, ConfigType.UNKNOWN, "", ((key, None, source),))


def _describe(m: object, request: object, entry: ConfigEntry, read_only: bool) -> object:
    synonyms = ()
    if getattr(request, "include_synonyms", False):
        synonyms = tuple(
            build(m.DescribeConfigsSynonym, name=name, value=value, source=int(source))
            for name, value, source in entry.synonyms
        )
    documentation = None
    if getattr(request, "include_documentation", False) and entry.doc:
        documentation = entry.doc
    return build(
        m.DescribeConfigsResourceResult,
        name=entry.name,
        value=entry.value,
        read_only=read_only,
        config_source=int(entry.source),
        is_sensitive=entry.type == ConfigType.UNKNOWN,
        synonyms=synonyms,
        config_type=int(entry.type),
        documentation=documentation,
    )
