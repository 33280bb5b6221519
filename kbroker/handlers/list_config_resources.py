"""ListConfigResources (key 74), v0-1 (KIP-1142; v0 was ListClientMetricsResources).

The config resources of the asked types: GROUP (the groups that have group configs), then
CLIENT_METRICS (the subscriptions), BROKER_LOGGER and BROKER (the live brokers' ids), TOPIC
(every topic, internal ones too), in that order as Kafka lists them, names sorted within a type.
An empty type list means every type the version supports (v0: CLIENT_METRICS only); a type the
version does not support makes the whole answer UNSUPPORTED_VERSION with no resources, as
Kafka answers. ``kafka-client-metrics --list`` and ``kafka-configs --describe`` of groups and
client-metrics use it.
With an authorizer the caller needs DESCRIBE_CONFIGS on the cluster (else
CLUSTER_AUTHORIZATION_FAILED), as Kafka.
"""

from __future__ import annotations

from typing import Protocol

from kbroker.config.config_resources import (
    RESOURCE_BROKER,
    RESOURCE_BROKER_LOGGER,
    RESOURCE_CLIENT_METRICS,
    RESOURCE_GROUP,
    RESOURCE_TOPIC,
)
from kbroker.handlers.security import HasSecurity, cluster_allowed
from kbroker.handlers.services import HasCatalogue, HasCluster
from kbroker.network.context import RequestContext
from kbroker.protocol.acl import AclOperation
from kbroker.protocol.codec import NO_THROTTLE, build, response_module
from kbroker.protocol.errors import ErrorCode

API_KEY = 74
MIN_VERSION = 0
MAX_VERSION = 1
# In the order Kafka lists them.
_V1_TYPES = (RESOURCE_GROUP, RESOURCE_CLIENT_METRICS, RESOURCE_BROKER_LOGGER, RESOURCE_BROKER, RESOURCE_TOPIC)


class Services(HasCatalogue, HasCluster, HasSecurity, Protocol): ...


async def handle(ctx: RequestContext[Services], request: object) -> object:
    m = response_module(API_KEY, ctx.api_version)
    supported = _V1_TYPES if ctx.api_version >= 1 else (RESOURCE_CLIENT_METRICS,)
    wanted = set(getattr(request, "resource_types", ())) or set(supported)  # v0 has no type list
    if not wanted <= set(supported):
        return build(m.ListConfigResourcesResponse, throttle_time=NO_THROTTLE,
                     error_code=ErrorCode.unsupported_version, config_resources=())
    if not cluster_allowed(ctx, AclOperation.DESCRIBE_CONFIGS):
        return build(m.ListConfigResourcesResponse, throttle_time=NO_THROTTLE,
                     error_code=ErrorCode.cluster_authorization_failed, config_resources=())
    catalogue = ctx.services.catalogue
    resources = []
    for kind in (k for k in supported if k in wanted):
        if kind in (RESOURCE_GROUP, RESOURCE_CLIENT_METRICS):
            names = catalogue.resource_names(kind)
        elif kind == RESOURCE_TOPIC:
            names = sorted(catalogue.topics)
        else:
            names = [str(broker[0]) for broker in sorted(ctx.services.cluster.live_brokers())]
        resources += [build(m.ConfigResource, resource_name=name, resource_type=kind) for name in names]
    return build(m.ListConfigResourcesResponse, throttle_time=NO_THROTTLE, error_code=ErrorCode.none,
                 config_resources=tuple(resources))
