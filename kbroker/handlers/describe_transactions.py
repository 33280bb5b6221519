"""DescribeTransactions (key 65), v0.

State (Kafka's names: Empty, Ongoing, PrepareCommit, …, CompleteAbort), timeout, start time
(-1 when no transaction is open), producer id/epoch and partitions of each transactional id,
answered only by the id's coordinator, as Kafka's getTransactionState: an id another broker
coordinates gets NOT_COORDINATOR (the admin client looks its coordinator up and asks there),
an unknown id TRANSACTIONAL_ID_NOT_FOUND, an empty one INVALID_REQUEST.
With an authorizer each id needs DESCRIBE (else TRANSACTIONAL_ID_AUTHORIZATION_FAILED) and the
topics answered are those the caller may DESCRIBE, as Kafka.
"""

from __future__ import annotations

import datetime
from typing import TYPE_CHECKING, Protocol

from kbroker.handlers.security import HasSecurity, allowed, denied_names
from kbroker.handlers.services import HasTransactions
from kbroker.network.context import RequestContext
from kbroker.protocol.acl import AclOperation, ResourceType
from kbroker.protocol.codec import NO_THROTTLE, build, response_module
from kbroker.protocol.errors import ErrorCode, KafkaError

if TYPE_CHECKING:  # annotations only: the codec imports an API's kio module when it is first used
    from kio.schema.describe_transactions.v0.request import DescribeTransactionsRequest
    from kio.schema.describe_transactions.v0.response import DescribeTransactionsResponse

API_KEY = 65
MIN_VERSION = 0
MAX_VERSION = 0


class Services(HasTransactions, HasSecurity, Protocol): ...


def _time(ms: int) -> datetime.datetime:
    return datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.UTC)


async def handle(ctx: RequestContext[Services], request: DescribeTransactionsRequest) -> DescribeTransactionsResponse:
    m = response_module(API_KEY, ctx.api_version)
    coordinator = ctx.services.transaction_coordinator
    states = []
    for transactional_id in request.transactional_ids:
        error = ErrorCode.transactional_id_not_found
        try:
            meta = coordinator.describe(transactional_id) if transactional_id else None
        except KafkaError as exc:
            meta, error = None, exc.code
        if not transactional_id:
            error = ErrorCode.invalid_request
        elif not allowed(ctx, AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, transactional_id):
            meta, error = None, ErrorCode.transactional_id_authorization_failed
        if meta is None:
            states.append(build(
                m.TransactionState, error_code=error,
                # Kafka leaves the other fields at their zero values (the start time too).
                transactional_id=transactional_id, transaction_state="", transaction_timeout=datetime.timedelta(0),
                transaction_start_time=_time(0), producer_id=0, producer_epoch=0, topics=()))
            continue
        by_topic: dict[str, list[int]] = {}
        hidden = denied_names(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, (t for t, _p in meta.partitions))
        for topic, partition in sorted(tp for tp in meta.partitions if tp[0] not in hidden):
            by_topic.setdefault(topic, []).append(partition)
        states.append(build(
            m.TransactionState, error_code=ErrorCode.none, transactional_id=transactional_id,
            transaction_state=meta.state.display,
            transaction_timeout=datetime.timedelta(milliseconds=meta.timeout_ms),
            transaction_start_time=_time(meta.start_ms), producer_id=meta.producer_id,
            producer_epoch=meta.producer_epoch,
            topics=tuple(build(m.TopicData, topic=t, partitions=tuple(ps)) for t, ps in by_topic.items()),
        ))
    return build(m.DescribeTransactionsResponse, throttle_time=NO_THROTTLE, transaction_states=tuple(states))
