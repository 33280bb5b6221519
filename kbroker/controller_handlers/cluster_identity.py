"""Kafka's cluster id check on the requests between a quorum's members (INCONSISTENT_CLUSTER_ID).

Vote, BeginQuorumEpoch, EndQuorumEpoch, Fetch and FetchSnapshot carry the sender's cluster id. As
in Kafka's Raft client, a request that names none is not checked (older senders, and a voter that
has not learnt its id yet), and one that names another cluster's is answered with the top-level
error INCONSISTENT_CLUSTER_ID and nothing else, so a node formatted for another cluster can neither
vote nor replicate here. Kafka's controller says nothing of it; this one logs it (rate-limited),
naming the sender and both ids, because the refused node is the one to fix.
"""

from __future__ import annotations

import logging
from typing import Any

from kbroker.controller_handlers.services import HasControllerIdentity
from kbroker.network.rate_limited_log import RateLimitedLogger
from kbroker.protocol.codec import NO_THROTTLE, build, response_schema
from kbroker.protocol.errors import ErrorCode

_refusals = RateLimitedLogger(logging.getLogger(__name__), burst=3)


def is_foreign(services: HasControllerIdentity, request_cluster_id: str | None, sender: int, api: str) -> bool:
    """True (and logged) when the request names a cluster other than this controller's.

    A voter that does not know its own cluster id yet (a quorum of several, started with no
    ``--cluster-id``, before the metadata log's first record reached it) cannot judge and accepts."""
    own = services.cluster_id
    if not request_cluster_id or not own or request_cluster_id == own:
        return False
    _refusals.error("refused %s from node %d: INCONSISTENT_CLUSTER_ID (it is of cluster %s, this quorum is %s)",
                    api, sender, request_cluster_id, own, key=f"{api}:{sender}")
    return True


def inconsistent_cluster_id(api_key: int, api_version: int) -> Any:
    """Kafka's refusal of a request from another cluster: the top-level error and nothing else."""
    return build(response_schema(api_key, api_version), throttle_time=NO_THROTTLE,
                 error_code=ErrorCode.inconsistent_cluster_id, session_id=0, topics=(), responses=())
