"""RemoveRaftVoter (key 81), v0–0: ``kafka-metadata-quorum remove-controller``.

kbroker's quorum has static voters (kraft.version 0): the request is refused as Kafka refuses
it then (handlers/raft_voters.py).
With an authorizer the caller needs ALTER on the cluster (else CLUSTER_AUTHORIZATION_FAILED).
"""

from __future__ import annotations

from typing import Protocol

from kbroker.handlers.security import HasSecurity, cluster_allowed
from kbroker.handlers.services import HasCluster
from kbroker.network.context import RequestContext
from kbroker.protocol.acl import AclOperation
from kbroker.protocol.codec import NO_THROTTLE, build, response_module
from kbroker.protocol.errors import ErrorCode, KafkaError

from .raft_voters import refusal

API_KEY = 81
MIN_VERSION = 0
MAX_VERSION = 0


class Services(HasCluster, HasSecurity, Protocol): ...


async def handle(ctx: RequestContext[Services], request: object) -> object:
    m = response_module(API_KEY, ctx.api_version)
    # Kafka checks ALTER on the cluster before anything else.
    error = refusal(request, ctx.services.cluster.cluster_id, "removing", "Remove voter") if cluster_allowed(
        ctx, AclOperation.ALTER) else KafkaError(ErrorCode.cluster_authorization_failed)
    return build(m.RemoveRaftVoterResponse, throttle_time=NO_THROTTLE, error_code=error.code,
                 error_message=error.message)
