"""The fetcher's half of a fetch session (KIP-227, Kafka's FetchSessionHandler): which
partitions the next Fetch must name, which it must forget, and with which session id and epoch.

The first fetch is full (session id 0, epoch 0) and asks the leader for a session; once the
answer names one, each fetch is incremental: it names only the partitions whose fetch position,
log start offset, epochs or byte limit changed since the leader last heard them, forgets the
ones no longer fetched, and carries the next epoch. A session error (FETCH_SESSION_ID_NOT_FOUND,
INVALID_FETCH_SESSION_EPOCH, ...) or a failed request falls back to a full fetch: a new session
(after an unknown id) or the same id at epoch 0, which closes the old one and opens another.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from kbroker.protocol.errors import ErrorCode

from .fetch_metadata import FINAL_EPOCH, INITIAL_EPOCH, INVALID_SESSION_ID, next_epoch

# What a fetcher asks of one partition: (fetch offset, log start offset, current leader epoch,
# last fetched epoch, max bytes); the session resends it when any of these changes.
PartitionAsk = tuple[int, int, int, int, int]
PartitionKey = tuple[str, int]


@dataclass(slots=True)
class SessionRequest:
    """What the next Fetch says about the session."""

    session_id: int
    epoch: int
    send: list[PartitionKey]  # the partitions the request names (all of them when full)
    forget: list[tuple[uuid.UUID, int]]  # (topic id, partition) the leader's session drops


@dataclass(slots=True)
class FetchSessionHandler:
    sessionless: bool = False  # every fetch full, asking for no session (session id 0, epoch -1)
    session_id: int = INVALID_SESSION_ID
    epoch: int = INITIAL_EPOCH
    # What the leader's session holds, as of the last answered request.
    session: dict[PartitionKey, tuple[uuid.UUID, PartitionAsk]] = field(default_factory=dict)
    _pending: dict[PartitionKey, tuple[uuid.UUID, PartitionAsk]] = field(default_factory=dict)
    full_fetches: int = 0  # counts, for tests and the DEBUG log
    incremental_fetches: int = 0

    @property
    def is_full(self) -> bool:
        return self.epoch == INITIAL_EPOCH

    def build(self, wanted: dict[PartitionKey, tuple[uuid.UUID, PartitionAsk]]) -> SessionRequest:
        """The session part of the next Fetch for ``wanted`` (every partition to fetch now)."""
        self._pending = dict(wanted)
        if self.sessionless:
            self.full_fetches += 1
            return SessionRequest(INVALID_SESSION_ID, FINAL_EPOCH, list(wanted), [])
        if self.is_full:
            self.full_fetches += 1
            return SessionRequest(self.session_id, self.epoch, list(wanted), [])
        self.incremental_fetches += 1
        send = [key for key, ask in wanted.items() if self.session.get(key) != ask]
        forget = [(topic_id, key[1]) for key, (topic_id, _ask) in self.session.items() if key not in wanted]
        return SessionRequest(self.session_id, self.epoch, send, forget)

    def handle_response(self, error: ErrorCode, session_id: int) -> bool:
        """Apply the answer's top-level error and session id; False if it was a session error
        (the next fetch is full, and nothing in the answer is to be used)."""
        if error != ErrorCode.none:
            if error == ErrorCode.fetch_session_id_not_found:
                self.session_id = INVALID_SESSION_ID
            self.epoch = INITIAL_EPOCH
            self.session = {}
            return False
        if self.sessionless:
            return True
        if self.is_full:
            self.session_id = session_id
            self.epoch = next_epoch(INITIAL_EPOCH) if session_id != INVALID_SESSION_ID else INITIAL_EPOCH
        else:
            self.epoch = next_epoch(self.epoch)
        self.session = self._pending
        return True

    def handle_error(self) -> None:
        """The request failed (no answer): the next fetch is full, closing the session it names."""
        self.epoch = INITIAL_EPOCH
        self.session = {}
