"""The Fetch handler's fetch-session half (KIP-227, Kafka's FetchManager and FetchContext):
opening a session after a full fetch, and serving an incremental fetch from one.

An incremental fetch reads only the session's partitions that changed (``FetchSession.take_changed``:
named by the request, woken by the partition, or still holding data), keeps what Kafka's rules
say the answer must carry, and, when that is fewer than min_bytes and nothing must be answered
at once, long-polls on the session's one waiter until max_wait — no per-partition work for the
partitions that stay quiet. Session errors are Kafka's: FETCH_SESSION_ID_NOT_FOUND for an id the
cache does not hold, INVALID_FETCH_SESSION_EPOCH for another epoch than the expected one (also
when the session was closed or used again while this fetch waited), FETCH_SESSION_TOPIC_ID_ERROR
when the request version disagrees with the session about topic ids.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Iterable
from typing import Protocol

from kbroker.handlers.security import HasSecurity, denied_names
from kbroker.handlers.services import HasCatalogue, HasFetchSessions, HasReplicas
from kbroker.network.context import RequestContext
from kbroker.protocol.acl import AclOperation, ResourceType
from kbroker.protocol.errors import ErrorCode
from kbroker.replication.fetch_metadata import next_epoch
from kbroker.replication.fetch_session import CachedPartition, FetchSession, SessionKey
from kbroker.replication.replica_manager import FetchParams, FetchRequestPartition, FetchResult

FIRST_TOPIC_ID = 13
READ_COMMITTED = 1
# One partition of an answer: (topic name for v<13 answers, topic id for v13+, partition, refusal).
Asked = tuple[str | None, uuid.UUID | None, int, ErrorCode]


class Services(HasCatalogue, HasReplicas, HasSecurity, HasFetchSessions, Protocol): ...


def open_session(services: Services, version: int, params: FetchParams, keys: list[Asked],
                 wanted: list[FetchRequestPartition], names: list[str | None], results: list[FetchResult]) -> int:
    """After a full fetch asking for one (epoch 0): a new session holding its partitions, and
    its id; 0 when the cache has no room for it."""
    sessions = services.fetch_sessions
    now_ms = int(time.time() * 1000)
    session = sessions.maybe_create(now_ms, params.is_from_follower, len(keys), version >= FIRST_TOPIC_ID)
    if session is None:
        return 0
    for (topic, topic_id, index, _e), asked, name, result in zip(keys, wanted, names, results, strict=True):
        key: SessionKey = (topic_id if session.uses_topic_ids else topic, index)
        asked.topic = name or ""
        cached = CachedPartition(key, name, topic_id, asked, result.high_watermark, result.log_start_offset)
        if result.error != ErrorCode.none:
            cached.high_watermark = -1
        # Every partition is read again at the first incremental fetch (what changed while this
        # answer was built is caught there), and watched from then on.
        session.add(cached)
    sessions.touch(session, now_ms)
    return session.id


async def incremental_fetch(
    ctx: RequestContext[Services], request: object, session_id: int, epoch: int, params: FetchParams,
    everything_denied: bool,
) -> tuple[ErrorCode, int, list[Asked], list[FetchResult]]:
    """Serve a fetch naming session ``session_id`` at ``epoch``: (top-level error, session id
    to answer with, the partitions the answer carries and their results)."""
    services = ctx.services
    sessions = services.fetch_sessions
    version = ctx.api_version
    session = sessions.get(session_id)
    if session is None:
        return ErrorCode.fetch_session_id_not_found, 0, [], []
    if session.epoch != epoch:
        return ErrorCode.invalid_fetch_session_epoch, 0, [], []
    if session.uses_topic_ids != (version >= FIRST_TOPIC_ID):
        return ErrorCode.fetch_session_topic_id_error, 0, [], []
    _update(ctx, session, request)
    now_ms = int(time.time() * 1000)
    if not session.partitions:
        sessions.remove(session.id)  # nothing left to fetch: Kafka answers sessionless
        return ErrorCode.none, 0, [], []
    session.epoch = next_epoch(session.epoch)
    sessions.touch(session, now_ms)
    expected = session.epoch
    max_wait_s = request.max_wait.total_seconds()
    deadline = time.monotonic() + max_wait_s
    answer: dict[SessionKey, tuple[CachedPartition, FetchResult]] = {}
    while True:
        changed = session.take_changed(time.monotonic())
        if changed:
            rereading = {c.key for c in changed}
            taken = sum(_size(r) for k, (_c, r) in answer.items() if k not in rereading)
            results = await _read(ctx, session, changed, params, everything_denied, max(0, request.max_bytes - taken),
                                  request.isolation_level)
            for cached, result in zip(changed, results, strict=True):
                if cached.must_respond(result) or cached.key in answer:
                    answer.pop(cached.key, None)
                    answer[cached.key] = (cached, result)  # a partition with data goes last (Kafka's rotation)
                if _more_to_read(cached, result, params, request.isolation_level):
                    session.carry_over(cached)
        if _complete(answer.values(), request.min_bytes, params) or max_wait_s <= 0:
            break
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            break
        done, _pending = await asyncio.wait({session.waiter.future}, timeout=remaining)
        if not done or sessions.get(session.id) is not session or session.epoch != expected:
            break
    if sessions.get(session.id) is not session or session.epoch != expected:
        # Closed, evicted or used by another request while this one waited.
        return ErrorCode.invalid_fetch_session_epoch, session.id, [], []
    return ErrorCode.none, session.id, *_grouped(session, answer)


def _update(ctx: RequestContext[Services], session: FetchSession, request: object) -> None:
    """Apply the request to the session: its partitions added or updated, the forgotten removed."""
    by_id = session.uses_topic_ids
    topics_by_id = ctx.services.catalogue.topics_by_id
    for topic in request.topics:
        if by_id:
            info = topics_by_id.get(topic.topic_id) if topic.topic_id is not None else None
            name, topic_id = (info.name if info is not None else None), topic.topic_id
        else:
            name, topic_id = topic.topic, None
        for p in topic.partitions:
            key: SessionKey = (topic_id if by_id else name, p.partition)
            session.add(CachedPartition(key, name, topic_id, FetchRequestPartition(
                name or "", p.partition, p.fetch_offset, p.partition_max_bytes,
                getattr(p, "current_leader_epoch", -1), getattr(p, "last_fetched_epoch", -1),
                getattr(p, "log_start_offset", -1),
            )))
    for forgotten in request.forgotten_topics_data:
        topic_key = forgotten.topic_id if by_id else forgotten.topic
        for index in forgotten.partitions:
            session.forget((topic_key, index))


async def _read(ctx: RequestContext[Services], session: FetchSession, changed: list[CachedPartition],
                params: FetchParams, everything_denied: bool, max_bytes: int,
                isolation_level: int) -> list[FetchResult]:
    """Read the changed partitions now (no wait), refusing as a full fetch would; each is
    watched again (a partition forgets its waiters when it wakes them)."""
    services = ctx.services
    hosted = services.replicas.partitions
    topics_by_id = services.catalogue.topics_by_id
    if session.uses_topic_ids:  # a topic id learnt, or deleted, since the partition was added
        for cached in changed:
            info = topics_by_id.get(cached.topic_id) if cached.topic_id is not None else None
            cached.name = info.name if info is not None else None
            cached.request.topic = cached.name or ""
    denied: frozenset[str] = frozenset()
    if params.replica_id < 0:
        denied = denied_names(ctx, AclOperation.READ, ResourceType.TOPIC,
                              {c.name for c in changed if c.name is not None})
    refused: list[ErrorCode] = []
    wanted: list[FetchRequestPartition] = []
    for cached in changed:
        name = cached.name
        session.watch(cached, hosted.get((name, cached.request.partition)) if name is not None else None)
        if everything_denied or (name is not None and name in denied):
            refused.append(ErrorCode.topic_authorization_failed)
        elif name is None:
            refused.append(ErrorCode.unknown_topic_id)
        else:
            refused.append(ErrorCode.none)
            wanted.append(cached.request)
    read = iter(await services.replicas.fetch(wanted, 0, 0, max_bytes, isolation_level, params)) if wanted else iter(())
    results = [next(read) if error == ErrorCode.none else FetchResult(error) for error in refused]
    if params.replica_id < 0:  # a consumer's error answer carries no offsets, as Kafka's
        results = [FetchResult(r.error) if r.error != ErrorCode.none else r for r in results]
    return results


def _more_to_read(cached: CachedPartition, result: FetchResult, params: FetchParams, isolation_level: int) -> bool:
    """Read again at the next fetch even if nothing wakes it: an error (answered each time, as
    Kafka's), or data past the fetch position the fetcher has not taken yet."""
    partition = cached.watched
    if result.error != ErrorCode.none or partition is None:
        return True
    if params.is_from_follower:
        end = partition.log_end_offset
    else:
        end = partition.last_stable_offset if isolation_level == READ_COMMITTED else partition.high_watermark
    return cached.request.fetch_offset < end


def _complete(answer: Iterable[tuple[CachedPartition, FetchResult]], min_bytes: int, params: FetchParams) -> bool:
    """Kafka's delayed fetch completes with min_bytes ready or a partition to report at once (an
    error, a divergence, a preferred read replica; to a follower, any news: a moved high
    watermark is what its own consumers and acks=all wait on)."""
    entries = list(answer)
    if params.is_from_follower and entries:
        return True
    ready = 0
    for _cached, result in entries:
        if result.error != ErrorCode.none or result.diverging_epoch is not None or result.preferred_read_replica >= 0:
            return True
        ready += _size(result)
    return ready >= min_bytes


def _size(result: FetchResult) -> int:
    return result.records.length if result.records is not None else 0


def _grouped(session: FetchSession, answer: dict[SessionKey, tuple[CachedPartition, FetchResult]],
             ) -> tuple[list[Asked], list[FetchResult]]:
    """The answer's partitions with each topic's together (one entry per topic in the answer)."""
    by_topic: dict[object, list[tuple[CachedPartition, FetchResult]]] = {}
    for cached, result in answer.values():
        by_topic.setdefault(cached.key[0], []).append((cached, result))
    keys: list[Asked] = []
    results: list[FetchResult] = []
    for entries in by_topic.values():
        for cached, result in entries:
            topic = None if session.uses_topic_ids else cached.key[0]
            assert topic is None or isinstance(topic, str)
            keys.append((topic, cached.topic_id, cached.key[1], result.error))
            results.append(result)
    return keys, results
