"""FetchSnapshot (key 59), v0-v1, on a controller: a chunk of the metadata log's latest snapshot (KIP-630).

A voter or a broker whose Fetch position fell below the active controller's log start was answered
with the snapshot's id; it pulls the snapshot here, ``max_bytes`` at a time from ``position``. The
Raft state machine answers (replication/quorum/raft.py): NOT_LEADER_OR_FOLLOWER from a controller
that does not lead, SNAPSHOT_NOT_FOUND for a snapshot that is not the latest (a newer one replaced
it: the fetcher fetches again and is told the new id), POSITION_OUT_OF_RANGE past its end. A
request naming another cluster's id gets INCONSISTENT_CLUSTER_ID (controller_handlers/cluster_identity.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from kbroker.controller_handlers.cluster_identity import inconsistent_cluster_id, is_foreign
from kbroker.controller_handlers.services import HasControllerIdentity, HasRaftQuorum
from kbroker.network.context import RequestContext

if TYPE_CHECKING:  # annotations only: the codec imports an API's kio module when it is first used
    from kio.schema.fetch_snapshot.v0.request import FetchSnapshotRequest
    from kio.schema.fetch_snapshot.v0.response import FetchSnapshotResponse

API_KEY = 59
MIN_VERSION = 0
MAX_VERSION = 0


class Services(HasRaftQuorum, HasControllerIdentity, Protocol): ...


async def handle(ctx: RequestContext[Services], request: FetchSnapshotRequest) -> FetchSnapshotResponse:
    if is_foreign(ctx.services, request.cluster_id, request.replica_id, "FetchSnapshot"):
        return inconsistent_cluster_id(API_KEY, ctx.api_version)
    return ctx.services.handle_raft_request(API_KEY, request)
