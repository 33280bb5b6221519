"""BeginQuorumEpoch (key 53), v0, between controller voters: handed to this node's Raft state machine.

See replication/quorum/raft.py for the rules and replication/quorum/raft_wire.py for the mapping; the answer
is what the RaftNode replies. Only the metadata partition (``__cluster_metadata-0``) exists. A
request naming another cluster's id gets INCONSISTENT_CLUSTER_ID (controller_handlers/cluster_identity.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from kbroker.controller_handlers.cluster_identity import inconsistent_cluster_id, is_foreign
from kbroker.controller_handlers.services import HasControllerIdentity, HasRaftQuorum
from kbroker.network.context import RequestContext

if TYPE_CHECKING:  # annotations only: the codec imports an API's kio module when it is first used
    from kio.schema.begin_quorum_epoch.v0.request import BeginQuorumEpochRequest
    from kio.schema.begin_quorum_epoch.v0.response import BeginQuorumEpochResponse

API_KEY = 53
MIN_VERSION = 0
MAX_VERSION = 0


class Services(HasRaftQuorum, HasControllerIdentity, Protocol): ...


async def handle(ctx: RequestContext[Services], request: BeginQuorumEpochRequest) -> BeginQuorumEpochResponse:
    sender = request.topics[0].partitions[0].leader_id  # a Raft request names one partition
    if is_foreign(ctx.services, request.cluster_id, sender, "BeginQuorumEpoch"):
        return inconsistent_cluster_id(API_KEY, ctx.api_version)
    return ctx.services.handle_raft_request(API_KEY, request)
