"""DescribeConfigs (key 32), v1-4.

TOPIC resources: every topic config with its effective value and source (topic override,
static broker setting or default), synonyms (the topic override and the broker keys it
falls back to) when include_synonyms, the type (v3+) and a description when
include_documentation (v3+). Unknown topic: UNKNOWN_TOPIC_OR_PARTITION with message "";
an invalid name (e.g. "") INVALID_TOPIC_EXCEPTION, as Kafka answers.
BROKER resources named with this node's id: every key of Kafka 4.3.1's broker catalogue
(kbroker/config/broker_catalogue.py; its internal keys only when set), with its value from the
first layer that sets it — this broker's dynamic config (DYNAMIC_BROKER_CONFIG), the
cluster-wide dynamic default (DYNAMIC_DEFAULT_BROKER_CONFIG;
a new cluster has min.insync.replicas=1 there, as Kafka 4 formats it), the config file or
command line (STATIC_BROKER_CONFIG), the built-in default (DEFAULT_CONFIG) — as Kafka prints
it once parsed, whether it is read-only, sensitive (passwords: no value), its type and a
description; synonyms are the layers of the key and of the keys that set it in other units
(log.retention.hours for log.retention.ms). Named "": only the cluster-wide dynamic defaults,
as in Kafka. Another broker id: INVALID_REQUEST ("Unexpected broker id ..."), as Kafka answers.
configuration_keys restricts the answer (null or empty: all); an unknown key is simply absent.
A successful resource has error message "" (Kafka's answer), a failed one the reason.
GROUP, CLIENT_METRICS and BROKER_LOGGER resources: kbroker/config/config_resources.py
(describe_other). Deviation: group and client-metrics keys carry no documentation (Kafka's
ConfigDef texts), and loggers none instead of "".
With an authorizer each resource needs DESCRIBE_CONFIGS (a topic or group on itself, the others
on the cluster), else that resource's TOPIC/GROUP/CLUSTER_AUTHORIZATION_FAILED, as Kafka answers.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Protocol

from kbroker.config.broker_catalogue import BROKER_CONFIGS, BrokerConfigDef, InvalidValue, kafka_string, synonyms
from kbroker.config.config_resources import (
    OTHER_TYPES,
    RESOURCE_BROKER,
    RESOURCE_TOPIC,
    check_broker_resource,
    describe_other,
)
from kbroker.handlers.security import HasSecurity, config_resource_denied
from kbroker.handlers.services import HasCatalogue, HasCluster
from kbroker.network.context import RequestContext
from kbroker.protocol.acl import AclOperation
from kbroker.protocol.codec import NO_THROTTLE, build, response_module
from kbroker.protocol.errors import ErrorCode, KafkaError
from kbroker.replication.quorum.topic_rules import validate_topic_name
from kbroker.storage.log_config import ConfigEntry, ConfigSource, ConfigType

API_KEY = 32
MIN_VERSION = 1
MAX_VERSION = 4


class Services(HasCatalogue, HasCluster, HasSecurity, Protocol): ...


async def handle(ctx: RequestContext[Services], request: object) -> object:
    m = response_module(API_KEY, ctx.api_version)
    results = []
    for resource in request.resources:
        configs: tuple = ()
        error, message = ErrorCode.none, ""
        try:
            denied = config_resource_denied(ctx, AclOperation.DESCRIBE_CONFIGS, resource.resource_type,
                                            resource.resource_name)
            if denied is not None:
                raise denied
            entries = _entries(ctx, resource.resource_type, resource.resource_name)
            wanted = resource.configuration_keys
            if wanted:  # null or empty: every key, as Kafka answers
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
    if resource_type in OTHER_TYPES:  # GROUP, CLIENT_METRICS, BROKER_LOGGER
        entries = describe_other(ctx.services.catalogue, ctx.services.cluster.node_id, resource_type, name)
        return [(entry, False) for entry in entries]
    raise KafkaError(ErrorCode.invalid_request, f"Unsupported resource type: {resource_type}")


def _broker_entries(ctx: RequestContext[Services]) -> Iterable[tuple[ConfigEntry, bool]]:
    """Every key of Kafka 4.3.1's broker catalogue (internal and kbroker's own keys only when
    set), and the unknown keys set dynamically on this broker."""
    catalogue = ctx.services.catalogue
    unknown = [key for key in catalogue.dynamic_broker_configs(str(ctx.services.cluster.node_id))
               if key not in BROKER_CONFIGS]
    for key in unknown:
        yield _unknown_key(key, ConfigSource.DYNAMIC_BROKER_CONFIG), False
    for key, definition in BROKER_CONFIGS.items():
        synonyms = _broker_synonyms(catalogue.broker_layers, key)
        if definition.internal and not any(source != ConfigSource.DEFAULT_CONFIG for _n, _v, source in synonyms):
            continue
        yield _broker_entry(definition, synonyms), definition.read_only


def _broker_synonyms(layers_of: Callable[[str], list[tuple[str, ConfigSource]]],
                     key: str) -> tuple[tuple[str, str | None, ConfigSource], ...]:
    """Kafka's synonym list: the layers of the key and of the keys that set it in other units
    (log.retention.hours for log.retention.ms, ...), by source and then by precedence, from the
    key's own first entry on (a more precise synonym set above it does not show)."""
    found = [(source, rank, name, value) for rank, name in enumerate(synonyms(key))
             for value, source in layers_of(name)]
    found.sort(key=lambda f: (_ORDER[f[0]], f[1]))
    ordered = [(name, value, source) for source, _rank, name, value in found]
    while ordered and ordered[0][0] != key:
        ordered.pop(0)
    return tuple(ordered)


# Kafka lists synonyms by source: this broker's dynamic configs, the cluster default, static, default.
_ORDER = {ConfigSource.DYNAMIC_BROKER_CONFIG: 0, ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG: 1,
          ConfigSource.STATIC_BROKER_CONFIG: 2, ConfigSource.DEFAULT_CONFIG: 3}


def _broker_entry(definition: BrokerConfigDef, synonyms: tuple[tuple[str, str | None, ConfigSource], ...],
                  ) -> ConfigEntry:
    """One broker key: its value (as Kafka prints it once parsed; a password's never), source and synonyms."""
    value, source = None, ConfigSource.DEFAULT_CONFIG
    if synonyms:
        _name, raw, source = synonyms[0]
        value = _kafka_string(definition, raw)
    if definition.sensitive:
        value, synonyms = None, tuple((name, None, src) for name, _v, src in synonyms)
    return ConfigEntry(definition.name, value, source, definition.type, definition.doc, synonyms)


def _kafka_string(definition: BrokerConfigDef, raw: str | None) -> str | None:
    if raw is None:
        return None
    try:
        return kafka_string(definition, raw)
    except InvalidValue:  # a dynamic value Kafka would have refused: shown as stored
        return raw


def _cluster_default_entries(ctx: RequestContext[Services]) -> Iterable[tuple[ConfigEntry, bool]]:
    """The broker resource named "": only the cluster-wide dynamic defaults, as Kafka answers."""
    source = ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG
    for key, value in sorted(ctx.services.catalogue.cluster_configs.items()):
        definition = BROKER_CONFIGS.get(key)
        if definition is None:
            yield _unknown_key(key, source), False
            continue
        yield _broker_entry(definition, ((key, value, source),)), definition.read_only


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
        # A dynamic key of unknown type may be a secret; a logger's level (no type either) is not.
        is_sensitive=entry.type == ConfigType.PASSWORD
        or (entry.type == ConfigType.UNKNOWN and entry.source != ConfigSource.DYNAMIC_BROKER_LOGGER_CONFIG),
        synonyms=synonyms,
        config_type=int(entry.type),
        documentation=documentation,
    )
