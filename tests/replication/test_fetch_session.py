"""Fetch sessions (KIP-227): the serving broker's cache (Kafka's eviction rule and counters), the
fetcher's session handler (full, then incremental; falling back on session errors), and
followers replicating through sessions over real sockets."""

from __future__ import annotations

import asyncio
import random
import uuid
from collections.abc import Callable

from kbroker.protocol.errors import ErrorCode
from kbroker.replication.fetch_session import CachedPartition, FetchSessionCache
from kbroker.replication.fetch_session_handler import FetchSessionHandler
from kbroker.replication.replica_manager import FetchRequestPartition
from kbroker.replication.replication_settings import ReplicationSettings

from tests.replication.cluster_harness import start_cluster, stop_cluster, wait_until
from tests.replication.test_replica_fetcher import batch, in_sync, partitions_of, produce

EVICTION_MS = 120_000


def in_loop(body: Callable[[], None]) -> None:
    """Run ``body`` inside an event loop (a session's waiter is a future)."""
    async def run() -> None:
        body()
    asyncio.run(run())


def cache_with(slots: int) -> FetchSessionCache:
    return FetchSessionCache(slots, EVICTION_MS, random.Random(7))


def open_session(cache: FetchSessionCache, now_ms: int, privileged: bool, size: int) -> int:
    session = cache.maybe_create(now_ms, privileged, size, True)
    if session is None:
        return 0
    for index in range(size):
        session.add(CachedPartition((uuid.UUID(int=1), index), "t", uuid.UUID(int=1),
                                    FetchRequestPartition("t", index, 0, 1024)))
    cache.touch(session, now_ms)
    return session.id


def test_a_full_cache_evicts_a_stale_session_first() -> None:
    def body() -> None:
        cache = cache_with(2)
        a = open_session(cache, 0, False, 5)
        b = open_session(cache, 10, False, 1)
        assert open_session(cache, 20, False, 1) == 0  # both young and in use: no room
        assert cache.incremental_fetch_session_evictions == 0
        # Unused for longer than the eviction time: the stalest goes, whatever its size.
        c = open_session(cache, EVICTION_MS + 5, False, 1)
        assert c and cache.get(a) is None and cache.get(b) is not None
        assert cache.incremental_fetch_session_evictions == 1
        assert (cache.num_incremental_fetch_sessions, cache.num_incremental_fetch_partitions_cached) == (2, 2)
    in_loop(body)


def test_followers_are_privileged_and_bigger_sessions_win_once_old_enough() -> None:
    def body() -> None:
        cache = cache_with(2)
        consumer = open_session(cache, 0, False, 10)
        follower = open_session(cache, 0, True, 1)
        # A young consumer session gives way to a follower's, never to another consumer's.
        assert open_session(cache, 100, False, 50) == 0
        newer_follower = open_session(cache, 100, True, 1)
        assert newer_follower and cache.get(consumer) is None
        # Past the eviction time (but recently used), a bigger session evicts the smallest
        # evictable one; a smaller one does not.
        now = EVICTION_MS + 200
        for session_id in (follower, newer_follower):
            session = cache.get(session_id)
            assert session is not None
            cache.touch(session, now)
        assert open_session(cache, now, False, 1) == 0  # not privileged: followers stay
        bigger_follower = open_session(cache, now, True, 2)
        assert bigger_follower and cache.incremental_fetch_session_evictions == 2
        assert len(cache.sessions) == 2
    in_loop(body)


def test_a_cache_of_zero_slots_opens_no_session() -> None:
    def body() -> None:
        assert open_session(cache_with(0), 0, True, 1) == 0
    in_loop(body)


TOPIC_ID = uuid.UUID(int=9)


def asks(**offsets: int) -> dict[tuple[str, int], tuple[uuid.UUID, tuple[int, int, int, int, int]]]:
    return {("t", int(p[1:])): (TOPIC_ID, (offset, 0, 0, -1, 1024)) for p, offset in offsets.items()}


def test_the_handler_sends_everything_once_then_only_what_changed() -> None:
    handler = FetchSessionHandler()
    full = handler.build(asks(p0=0, p1=0, p2=0))
    assert (full.session_id, full.epoch, len(full.send), full.forget) == (0, 0, 3, [])
    assert handler.handle_response(ErrorCode.none, 77)
    quiet = handler.build(asks(p0=0, p1=0, p2=0))
    assert (quiet.session_id, quiet.epoch, quiet.send, quiet.forget) == (77, 1, [], [])
    handler.handle_response(ErrorCode.none, 77)
    moved = handler.build(asks(p0=0, p1=5))  # p1 moved, p2 is no longer fetched
    assert (moved.epoch, moved.send, moved.forget) == (2, [("t", 1)], [(TOPIC_ID, 2)])
    handler.handle_response(ErrorCode.none, 77)
    assert handler.build(asks(p0=0, p1=5)).send == []
    assert (handler.full_fetches, handler.incremental_fetches) == (1, 3)


def test_session_errors_and_failed_requests_fall_back_to_a_full_fetch() -> None:
    handler = FetchSessionHandler()
    handler.build(asks(p0=0))
    handler.handle_response(ErrorCode.none, 77)
    handler.build(asks(p0=0))
    # Another epoch expected: the same id at epoch 0 closes that session and opens a new one.
    assert not handler.handle_response(ErrorCode.invalid_fetch_session_epoch, 0)
    retry = handler.build(asks(p0=0))
    assert (retry.session_id, retry.epoch, retry.send) == (77, 0, [("t", 0)])
    handler.handle_response(ErrorCode.none, 78)
    handler.build(asks(p0=0))
    assert not handler.handle_response(ErrorCode.fetch_session_id_not_found, 0)  # the leader restarted
    fresh = handler.build(asks(p0=0))
    assert (fresh.session_id, fresh.epoch, fresh.send) == (0, 0, [("t", 0)])
    handler.handle_response(ErrorCode.none, 79)
    handler.build(asks(p0=0))
    handler.handle_error()  # no answer: the next fetch is full and names the session to close
    assert (handler.build(asks(p0=1)).session_id, handler.epoch) == (79, 0)
    # A leader with no room answers session id 0: fetches stay full.
    handler.handle_response(ErrorCode.none, 0)
    assert (handler.build(asks(p0=1)).epoch, handler.session_id) == (0, 0)


SETTINGS = ReplicationSettings(replica_fetch_sessions=True, replica_fetch_wait_max_ms=200,
                               replica_fetch_backoff_ms=100, replica_lag_time_max_ms=10_000,
                               replica_socket_timeout_ms=5_000)


def test_followers_replicate_through_incremental_fetches(tmp_path) -> None:
    async def scenario() -> None:
        controller = await start_cluster(tmp_path, [1, 2, 3], SETTINGS)
        try:
            controller.create("t", [1, 2, 3], partitions=20)
            leader = controller.nodes[1]
            for i in range(5):
                assert await produce(leader, batch(2)) == (ErrorCode.none, 2 * i)  # acks=all
            await in_sync(controller, 1, [2, 3])
            sessions = leader.dispatcher.services.fetch_sessions
            for follower in (2, 3):
                fetcher = controller.nodes[follower].replica_manager.fetcher_manager.fetchers[1]
                await wait_until(lambda f=fetcher: f.session.incremental_fetches >= 3,
                                 lambda: partitions_of(controller))
                assert fetcher.session.session_id in sessions.sessions
                assert sessions.sessions[fetcher.session.session_id].privileged
                assert len(fetcher.session.session) == 20
            assert sessions.num_incremental_fetch_sessions == 2
            assert sessions.num_incremental_fetch_partitions_cached == 40
            # Idle: no partition is left to read at the next fetch (none woke, none carried over).
            await wait_until(lambda: all(not s.carry and not s.waiter.woken for s in sessions.sessions.values()),
                             lambda: partitions_of(controller))
            # A log start offset moved by DeleteRecords wakes nobody; the followers learn it anyway.
            assert leader.partition("t").delete_records(4) == 4
            await wait_until(lambda: all(controller.nodes[f].partition("t").log_start_offset == 4 for f in (2, 3)),
                             lambda: partitions_of(controller))
        finally:
            await stop_cluster(controller)

    asyncio.run(scenario())
