"""ReadShareGroupState (key 84), v0–0.

Every partition is answered NOT_COORDINATOR "Unable to read share group state: This is not the correct
coordinator." (kbroker has no share groups, see handlers/share_group_state.py).
"""

from __future__ import annotations

from kbroker.network.context import RequestContext
from kbroker.protocol.codec import build, response_module

from .share_group_state import not_coordinator

API_KEY = 84
MIN_VERSION = 0
MAX_VERSION = 0


async def handle(ctx: RequestContext[object], request: object) -> object:
    m = response_module(API_KEY, ctx.api_version)
    return build(m.ReadShareGroupStateResponse, results=not_coordinator(
        m, m.ReadStateResult, request, "read share group state", state_epoch=0, start_offset=0, state_batches=()))
