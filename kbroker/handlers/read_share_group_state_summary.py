"""ReadShareGroupStateSummary (key 87), v0–1.

Every partition is answered NOT_COORDINATOR "Unable to read share group state summary: This is not the correct
coordinator." (kbroker has no share groups, see handlers/share_group_state.py).
"""

from __future__ import annotations

from kbroker.network.context import RequestContext
from kbroker.protocol.codec import build, response_module

from .share_group_state import not_coordinator

API_KEY = 87
MIN_VERSION = 0
MAX_VERSION = 1


async def handle(ctx: RequestContext[object], request: object) -> object:
    m = response_module(API_KEY, ctx.api_version)
    return build(m.ReadShareGroupStateSummaryResponse, results=not_coordinator(
        m, m.ReadStateSummaryResult, request, "read share group state summary", state_epoch=0, leader_epoch=0,
        start_offset=0, delivery_complete_count=-1))
