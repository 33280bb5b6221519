"""AddRaftVoter (key 80), v0–1: ``kafka-metadata-quorum add-controller``.

kbroker's quorum has static voters (kraft.version 0): the request is refused as Kafka refuses
it then (handlers/raft_voters.py).
"""

from __future__ import annotations

from typing import Protocol

from kbroker.handlers.services import HasCluster
from kbroker.network.context import RequestContext
from kbroker.protocol.codec import NO_THROTTLE, build, response_module

from .raft_voters import refusal

API_KEY = 80
MIN_VERSION = 0
MAX_VERSION = 1


class Services(HasCluster, Protocol): ...


async def handle(ctx: RequestContext[Services], request: object) -> object:
    m = response_module(API_KEY, ctx.api_version)
    error = refusal(request, ctx.services.cluster.cluster_id, "adding", "Add voter")
    return build(m.AddRaftVoterResponse, throttle_time=NO_THROTTLE, error_code=error.code,
                 error_message=error.message)
