"""BrokerRegistration (key 62), v0–4: a broker joins the cluster and gets its broker epoch.

The broker epoch is the metadata offset of the registration record, so a restarted broker
always gets a higher epoch (KIP-903). A second live incarnation of the same node id is refused
with DUPLICATE_BROKER_REGISTRATION until the old one's session expires — unless it registers
from this controller's own process (a restarted combined node: its predecessor is gone). A cluster id other than
the metadata log's gets INCONSISTENT_CLUSTER_ID. The broker's address is its inter-broker listener;
every listener it names is registered too (clients are answered the endpoint of their own listener).
"""

from __future__ import annotations

import logging
from typing import Protocol

from kbroker.cluster.controller_channel import LOCAL_HOST
from kbroker.controller_handlers.services import HasClock, HasControllerIdentity, HasQuorumController
from kbroker.network.context import RequestContext
from kbroker.network.rate_limited_log import RateLimitedLogger
from kbroker.protocol.codec import NO_THROTTLE, build, response_module
from kbroker.protocol.errors import ErrorCode, KafkaError

API_KEY = 62
MIN_VERSION = 0
MAX_VERSION = 4

_refusals = RateLimitedLogger(logging.getLogger(__name__), burst=3)


class Services(HasQuorumController, HasControllerIdentity, HasClock, Protocol): ...


async def handle(ctx: RequestContext[Services], request: object) -> object:
    services = ctx.services
    m = response_module(API_KEY, ctx.api_version)
    epoch, error = -1, ErrorCode.none
    if request.cluster_id != services.controller.image.cluster_id and services.controller.active:
        _refusals.error("refused the registration of broker %d: INCONSISTENT_CLUSTER_ID (it is of cluster %s, "
                        "this cluster is %s)", request.broker_id, request.cluster_id,
                        services.controller.image.cluster_id, key=str(request.broker_id))
        error = ErrorCode.inconsistent_cluster_id
    else:
        listener = request.listeners[0] if request.listeners else None
        wanted = services.inter_broker_listener_name
        for candidate in request.listeners:
            if candidate.name == wanted:
                listener = candidate
        try:
            if listener is None:
                raise KafkaError(ErrorCode.invalid_request)
            epoch = services.controller.register_broker(
                request.broker_id, str(request.incarnation_id), listener.host, listener.port, request.rack,
                services.clock.wall_ms(), getattr(request, "previous_broker_epoch", -1),
                same_process=ctx.client_host == LOCAL_HOST, connection=ctx.connection,
                endpoints=tuple((lis.name, lis.host, lis.port) for lis in request.listeners),
            )
            await services.committed()
        except KafkaError as exc:
            error = exc.code
    return build(m.BrokerRegistrationResponse, throttle_time=NO_THROTTLE, error_code=error,
                 broker_epoch=epoch)
