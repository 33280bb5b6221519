"""Vote (key 52), v0, between controller voters: handed to this node's Raft state machine.

See replication/quorum/raft.py for the rules and replication/quorum/raft_wire.py for the mapping; the answer
is what the RaftNode replies. Only the metadata partition (``__cluster_metadata-0``) exists.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from kbroker.controller_handlers.services import HasRaftQuorum
from kbroker.network.context import RequestContext

if TYPE_CHECKING:  # annotations only: the codec imports an API's kio module when it is first used
    from kio.schema.vote.v0.request import VoteRequest
    from kio.schema.vote.v0.response import VoteResponse

API_KEY = 52
MIN_VERSION = 0
MAX_VERSION = 0


class Services(HasRaftQuorum, Protocol): ...


async def handle(ctx: RequestContext[Services], request: VoteRequest) -> VoteResponse:
    return ctx.services.handle_raft_request(API_KEY, request)
