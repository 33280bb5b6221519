"""DescribeCluster (key 60), v0-2.

Answers the cluster id, the controller (on a single node, this node; in a cluster, a live
broker, as KRaft brokers answer) and the live brokers with their advertised endpoints on the
listener the request came on.
endpoint_type (v1+) must be 1 (brokers), as on a Kafka broker listener: asking for controllers
(2) is MISMATCHED_ENDPOINT_TYPE, anything else UNSUPPORTED_ENDPOINT_TYPE, both answered with
endpoint type 1 and no brokers. include_fenced_brokers (v2) changes nothing: fenced brokers
are never listed (deviation). Cluster authorized operations are returned only when asked for,
and then all of them without an authorizer, or those the ACLs allow; otherwise Kafka's "omitted"
value, INT32_MIN.
"""

from __future__ import annotations

from typing import Protocol

from kbroker.handlers.security import HasSecurity, authorized_operations
from kbroker.handlers.services import HasCluster
from kbroker.network.context import RequestContext
from kbroker.protocol.acl import CLUSTER_NAME, ResourceType
from kbroker.protocol.codec import NO_THROTTLE, build, response_module
from kbroker.protocol.errors import ErrorCode

from .metadata import AUTHORIZED_OPERATIONS_OMITTED, CLUSTER_OPERATIONS

API_KEY = 60
MIN_VERSION = 0
MAX_VERSION = 2

ENDPOINT_BROKERS = 1
ENDPOINT_CONTROLLERS = 2


class Services(HasCluster, HasSecurity, Protocol): ...


async def handle(ctx: RequestContext[Services], request: object) -> object:
    services = ctx.services
    m = response_module(API_KEY, ctx.api_version)
    endpoint_type = getattr(request, "endpoint_type", ENDPOINT_BROKERS)
    error, message = ErrorCode.none, None
    brokers: tuple = ()
    if endpoint_type == ENDPOINT_CONTROLLERS:
        error = ErrorCode.mismatched_endpoint_type
        message = "The request was sent to an endpoint of type BROKER, but we wanted an endpoint of type CONTROLLER"
    elif endpoint_type != ENDPOINT_BROKERS:
        error = ErrorCode.unsupported_endpoint_type
        message = f"Unsupported endpoint type {endpoint_type}"
    else:
        brokers = tuple(
            build(m.DescribeClusterBroker, broker_id=node, host=host, port=port, rack=rack, is_fenced=False)
            for node, host, port, rack in services.cluster.live_brokers(ctx.listener)
        )
    operations = AUTHORIZED_OPERATIONS_OMITTED
    if request.include_cluster_authorized_operations and error == ErrorCode.none:
        operations = authorized_operations(ctx, ResourceType.CLUSTER, CLUSTER_NAME, CLUSTER_OPERATIONS)
    return build(
        m.DescribeClusterResponse,
        throttle_time=NO_THROTTLE,
        error_code=error,
        error_message=message,
        endpoint_type=ENDPOINT_BROKERS,
        cluster_id=services.cluster.cluster_id,
        controller_id=services.cluster.controller_id,
        brokers=brokers,
        cluster_authorized_operations=operations,
    )
