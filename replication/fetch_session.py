"""Incremental fetch sessions (KIP-227) on the serving broker: the session cache and a session's
cached partitions.

A Fetch v7+ with session id 0 and epoch 0 is a full fetch that may create a session (the answer
names it); later requests name the session and the next epoch and carry only the partitions whose
fetch position changed, plus the ones to forget; the answer carries only the partitions with
records, an error, a preferred read replica, a divergence, or a high watermark or log start
offset other than the one last sent — Kafka's rules (FetchSession, FetchSessionCacheShard).

What is kbroker's own: finding those partitions costs O(changed), not O(partitions in the
session). Each session holds one ``DataWaiter`` on its partitions; a partition wakes it when its
high watermark or (led, with followers) its log end offset moves, when leadership changes or
when it goes away, so the partitions to read again are the ones that woke it, the ones the
request named, and the ones still holding data the fetcher has not taken (``carry``). A log
start offset moved by retention or DeleteRecords wakes nobody, so those are looked for once a
second (``LOG_START_SWEEP_S``) over the whole session.

The cache is bounded by max.incremental.fetch.session.cache.slots; a full cache makes room as
Kafka's does: a session unused for min eviction time goes first, else the smallest evictable
session if the new one is bigger (follower sessions are privileged: only another follower session
may evict one younger than the eviction time). Its counters are Kafka's broker metrics
NumIncrementalFetchSessions, NumIncrementalFetchPartitionsCached and
IncrementalFetchSessionEvictionsPerSec (a running count here).
"""

from __future__ import annotations

import random
import uuid
from dataclasses import dataclass, field

from kbroker.protocol.errors import ErrorCode

from .fetch_metadata import INVALID_SESSION_ID
from .partition import DataWaiter, Partition
from .replica_manager import FetchRequestPartition, FetchResult

# Kafka's FetchSessionCache eviction time (120 s; a constant there, not a broker key).
MIN_INCREMENTAL_FETCH_SESSION_EVICTION_MS = 120_000
DEFAULT_CACHE_SLOTS = 1000  # max.incremental.fetch.session.cache.slots
LOG_START_SWEEP_S = 1.0
# A session's partitions by (topic id, partition) from Fetch v13, (topic name, partition) before.
SessionKey = tuple[uuid.UUID | str | None, int]


@dataclass(slots=True)
class CachedPartition:
    """One partition of a session: what the fetcher last asked and what it was last told."""

    key: SessionKey
    name: str | None  # None: a topic id this broker does not know (resolved again on each read)
    topic_id: uuid.UUID | None
    request: FetchRequestPartition
    high_watermark: int = -1
    log_start_offset: int = -1
    watched: Partition | None = None  # the Partition object the session's waiter is registered on

    def must_respond(self, result: FetchResult) -> bool:
        """Kafka's CachedPartition.maybeUpdateResponseData: whether the answer carries this
        partition; remembers what it tells."""
        respond = result.records is not None and result.records.length > 0
        if result.high_watermark != self.high_watermark:
            self.high_watermark = result.high_watermark
            respond = True
        if result.log_start_offset != self.log_start_offset:
            self.log_start_offset = result.log_start_offset
            respond = True
        if result.error != ErrorCode.none:
            self.high_watermark = -1  # so the partition is sent again once the error is gone
            respond = True
        return respond or result.preferred_read_replica >= 0 or result.diverging_epoch is not None


@dataclass(eq=False)
class FetchSession:
    id: int
    privileged: bool  # a follower's session
    uses_topic_ids: bool
    creation_ms: int
    last_used_ms: int
    epoch: int = 1
    cached_size: int = 0  # the partition count the cache last counted for it
    partitions: dict[SessionKey, CachedPartition] = field(default_factory=dict)
    waiter: DataWaiter = field(default_factory=DataWaiter)
    # Partitions to read at the next fetch whatever wakes: named by the last request, or still
    # holding data (or an error) not yet taken.
    carry: dict[SessionKey, None] = field(default_factory=dict)
    _by_name: dict[tuple[str, int], SessionKey] = field(default_factory=dict)
    _last_sweep_s: float = 0.0

    def __len__(self) -> int:
        return len(self.partitions)

    def add(self, cached: CachedPartition) -> None:
        """Add or update (by the request's new position) a partition; it is read at the next fetch."""
        current = self.partitions.get(cached.key)
        if current is not None:
            current.request = cached.request
            if cached.name is not None:
                current.name = cached.name
        else:
            self.partitions[cached.key] = cached
        self.carry[cached.key] = None

    def forget(self, key: SessionKey) -> None:
        cached = self.partitions.pop(key, None)
        self.carry.pop(key, None)
        if cached is not None and cached.watched is not None:
            cached.watched.remove_waiter(self.waiter)
            self._by_name.pop((cached.watched.topic, cached.watched.index), None)

    def watch(self, cached: CachedPartition, partition: Partition | None) -> None:
        """Have ``partition`` (the one hosted under the cached partition's name now) wake this
        session when it changes."""
        if cached.watched is not partition and cached.watched is not None:
            cached.watched.remove_waiter(self.waiter)
        cached.watched = partition
        if partition is not None:
            self._by_name[(partition.topic, partition.index)] = cached.key
            partition.add_waiter(self.waiter)  # a partition forgets its waiters when it wakes them

    def take_changed(self, now_s: float) -> list[CachedPartition]:
        """The partitions to read now: those that woke the session, those carried over, and
        (once a second) those whose log start offset moved since it was last sent."""
        keys = self.carry
        self.carry = {}
        for name_key in self.waiter.rearm():
            key = self._by_name.get(name_key)
            if key is not None:
                keys[key] = None
        if now_s - self._last_sweep_s >= LOG_START_SWEEP_S:
            self._last_sweep_s = now_s
            for key, cached in self.partitions.items():
                if cached.watched is not None and cached.watched.log_start_offset != cached.log_start_offset:
                    keys[key] = None
        return [found for key in keys if (found := self.partitions.get(key)) is not None]

    def carry_over(self, cached: CachedPartition) -> None:
        self.carry[cached.key] = None

    def close(self) -> None:
        """Stop watching every partition (the session left the cache)."""
        for cached in self.partitions.values():
            if cached.watched is not None:
                cached.watched.remove_waiter(self.waiter)
                cached.watched = None
        self._by_name.clear()
        self.carry.clear()


class FetchSessionCache:
    """The broker's fetch sessions, bounded by max.incremental.fetch.session.cache.slots."""

    def __init__(self, max_entries: int = DEFAULT_CACHE_SLOTS,
                 eviction_ms: int = MIN_INCREMENTAL_FETCH_SESSION_EVICTION_MS,
                 rng: random.Random | None = None) -> None:
        self.max_entries = max_entries
        self.eviction_ms = eviction_ms
        self.sessions: dict[int, FetchSession] = {}
        self._rng = rng or random.Random()
        # Kafka's metric names, read by the metrics exporter.
        self.num_incremental_fetch_sessions = 0
        self.num_incremental_fetch_partitions_cached = 0
        self.incremental_fetch_session_evictions = 0

    def get(self, session_id: int) -> FetchSession | None:
        return self.sessions.get(session_id)

    def maybe_create(self, now_ms: int, privileged: bool, size: int, uses_topic_ids: bool) -> FetchSession | None:
        """A new session if a slot is free or can be freed by Kafka's eviction rule, else None."""
        if self.max_entries <= 0:
            return None
        if len(self.sessions) >= self.max_entries and not self._try_evict(privileged, size, now_ms):
            return None
        session_id = INVALID_SESSION_ID
        while session_id == INVALID_SESSION_ID or session_id in self.sessions:
            session_id = self._rng.randint(1, 0x7FFFFFFF)
        session = FetchSession(session_id, privileged, uses_topic_ids, now_ms, now_ms)
        self.sessions[session_id] = session
        self.num_incremental_fetch_sessions = len(self.sessions)
        return session

    def remove(self, session_id: int) -> FetchSession | None:
        session = self.sessions.pop(session_id, None)
        if session is not None:
            self.num_incremental_fetch_partitions_cached -= session.cached_size
            self.num_incremental_fetch_sessions = len(self.sessions)
            session.close()
        return session

    def touch(self, session: FetchSession, now_ms: int) -> None:
        """The session was used (its partitions may have changed in number)."""
        session.last_used_ms = now_ms
        self.num_incremental_fetch_partitions_cached += len(session) - session.cached_size
        session.cached_size = len(session)

    def _try_evict(self, privileged: bool, size: int, now_ms: int) -> bool:
        """Kafka's FetchSessionCacheShard.tryEvict: a stale session (unused for the eviction
        time) first; else the least valuable evictable one — not privileged before privileged,
        then fewest partitions — if it is worth less than the new session."""
        stalest = min(self.sessions.values(), key=lambda s: (s.last_used_ms, s.id))
        if now_ms - stalest.last_used_ms > self.eviction_ms:
            self._evict(stalest)
            return True
        # Young sessions are evictable only by a privileged session, and only if not privileged.
        evictable = [s for s in self.sessions.values() if now_ms - s.creation_ms > self.eviction_ms
                     or (privileged and not s.privileged)]
        if not evictable:
            return False
        cheapest = min(evictable, key=lambda s: (s.privileged, s.cached_size, s.id))
        if (privileged, size, 0) < (cheapest.privileged, cheapest.cached_size, cheapest.id):
            return False
        self._evict(cheapest)
        return True

    def _evict(self, session: FetchSession) -> None:
        self.remove(session.id)
        self.incremental_fetch_session_evictions += 1
