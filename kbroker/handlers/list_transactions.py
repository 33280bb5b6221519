"""ListTransactions (key 66), v0–2.

Every transactional id the coordinator knows, filtered by state names (unknown names are
echoed in unknown_state_filters), producer ids, v1+ duration (transactions running at least
that many ms) and v2+ a regular expression on the transactional id (Java regex syntax is
taken as Python's, which agree for ordinary patterns; a full match, as Kafka's ``matches``).
With an authorizer only the ids the caller may DESCRIBE are listed, as Kafka.
"""

from __future__ import annotations

import re
from typing import Protocol

from kbroker.handlers.security import HasSecurity, denied_names
from kbroker.handlers.services import HasClock, HasTransactions
from kbroker.network.context import RequestContext
from kbroker.protocol.acl import AclOperation, ResourceType
from kbroker.protocol.codec import NO_THROTTLE, build, response_module
from kbroker.protocol.errors import ErrorCode
from kbroker.transactions.transaction_log import TransactionState

API_KEY = 66
MIN_VERSION = 0
MAX_VERSION = 2

_NAMES = {state.display for state in TransactionState}


class Services(HasTransactions, HasClock, HasSecurity, Protocol): ...


async def handle(ctx: RequestContext[Services], request: object) -> object:
    m = response_module(API_KEY, ctx.api_version)
    unknown = tuple(s for s in request.state_filters if s not in _NAMES)
    wanted_states = set(request.state_filters)
    wanted_pids = set(request.producer_id_filters)
    duration = getattr(request, "duration_filter", -1)
    pattern = getattr(request, "transactional_id_pattern", None)
    error = ErrorCode.none
    regex = None
    if pattern:
        try:
            regex = re.compile(pattern)
        except re.error:
            error = ErrorCode.invalid_regular_expression
    now_ms = ctx.services.clock.wall_ms()
    states = []
    for meta in ctx.services.transaction_coordinator.transactions.values():
        if wanted_states and meta.state.display not in wanted_states:
            continue
        if wanted_pids and meta.producer_id not in wanted_pids:
            continue
        if duration >= 0 and (meta.start_ms < 0 or now_ms - meta.start_ms < duration):
            continue
        if regex is not None and not regex.fullmatch(meta.transactional_id):
            continue
        states.append(build(m.TransactionState, transactional_id=meta.transactional_id,
                            producer_id=meta.producer_id, transaction_state=meta.state.display))
    if error:
        states = []
    hidden = denied_names(ctx, AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID,
                          (s.transactional_id for s in states))
    if hidden:
        states = [s for s in states if s.transactional_id not in hidden]
    return build(m.ListTransactionsResponse, throttle_time=NO_THROTTLE, error_code=error,
                 unknown_state_filters=unknown, transaction_states=tuple(states))
