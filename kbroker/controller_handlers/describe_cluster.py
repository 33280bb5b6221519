"""DescribeCluster (key 60), v1–2, on a controller listener: the controllers (KIP-919).

``--bootstrap-controller`` clients (kafka-metadata-quorum, Admin) ask with endpoint type 2 and
get the controller nodes; asking a controller for brokers (type 1) is MISMATCHED_ENDPOINT_TYPE,
as Kafka answers.
"""

from __future__ import annotations

from typing import Protocol

from kbroker.controller_handlers.services import HasControllerIdentity
from kbroker.handlers.describe_cluster import ENDPOINT_BROKERS, ENDPOINT_CONTROLLERS
from kbroker.handlers.metadata import AUTHORIZED_OPERATIONS_OMITTED
from kbroker.network.context import RequestContext
from kbroker.protocol.codec import NO_THROTTLE, build, response_module
from kbroker.protocol.errors import ErrorCode

API_KEY = 60
MIN_VERSION = 1
MAX_VERSION = 2


class Services(HasControllerIdentity, Protocol): ...


async def handle(ctx: RequestContext[Services], request: object) -> object:
    services = ctx.services
    m = response_module(API_KEY, ctx.api_version)
    error, message, brokers = ErrorCode.none, None, ()
    if request.endpoint_type == ENDPOINT_BROKERS:
        error = ErrorCode.mismatched_endpoint_type
        message = "The request was sent to an endpoint of type CONTROLLER, but we wanted an endpoint of type BROKER"
    elif request.endpoint_type != ENDPOINT_CONTROLLERS:
        error, message = ErrorCode.unsupported_endpoint_type, f"Unsupported endpoint type {request.endpoint_type}"
    else:
        brokers = tuple(
            build(m.DescribeClusterBroker, broker_id=services.node_id, host=host, port=port, rack=None, is_fenced=False)
            for _name, host, port in services.bound[:1]
        )
    return build(
        m.DescribeClusterResponse, throttle_time=NO_THROTTLE, error_code=error, error_message=message,
        endpoint_type=ENDPOINT_CONTROLLERS, cluster_id=services.cluster_id, controller_id=services.node_id,
        brokers=brokers, cluster_authorized_operations=AUTHORIZED_OPERATIONS_OMITTED,
    )
