"""BeginQuorumEpoch (key 53), v0, between controller voters: handed to this node's Raft state machine.

See replication/quorum/raft.py for the rules and replication/quorum/raft_wire.py for the mapping; the answer
is what the RaftNode replies. Only the metadata partition (``__cluster_metadata-0``) exists.
"""

from __future__ import annotations

from kbroker.network.context import RequestContext

API_KEY = 53
MIN_VERSION = 0
MAX_VERSION = 0


async def handle(ctx: RequestContext, request: object) -> object:
    return ctx.broker.quorum.handle_request(API_KEY, request)
