"""Sans-IO Raft state machine of the controller quorum, in the manner of KRaft (KIP-595).

No sockets, no asyncio, no clock: the caller feeds `tick(now_ms)` and `handle(now_ms, sender_id, message)`
and delivers the returned `Outbound` messages best effort. Replication is pull based: followers and
observers send Fetch(fetch_offset, last_fetched_epoch); the leader answers with entries or a DivergingEpoch
computed from its epoch history (KIP-101/KIP-279 "largest epoch <= requested"), and advances the high
watermark to the majority-replicated offset once an entry of its own epoch (the LeaderChange entry it
appends when elected) is among them.

Snapshots (KIP-630): the state machine stores a snapshot of its committed state in the log
(``RaftLog.create_snapshot``) and the log may then drop the entries behind a snapshot. A fetcher whose
position lies below the leader's log start (or whose last fetched epoch is older than the snapshot at
the log start) is answered with the latest snapshot's id instead of entries; it pulls the snapshot with
FetchSnapshot in chunks, installs it (its log restarts empty at the snapshot's end) and goes on fetching
from there.
"""

from __future__ import annotations

import enum
import random
from collections.abc import Iterable
from dataclasses import dataclass

from kbroker.protocol.errors import ErrorCode
from kbroker.replication.quorum.raft_leader_state import LeaderState
from kbroker.replication.quorum.raft_messages import (
    BeginQuorumEpochRequest,
    BeginQuorumEpochResponse,
    DivergingEpoch,
    EndQuorumEpochRequest,
    EndQuorumEpochResponse,
    FetchRequest,
    FetchResponse,
    FetchSnapshotRequest,
    FetchSnapshotResponse,
    LogEntry,
    Outbound,
    RaftMessage,
    SnapshotId,
    VoteRequest,
    VoteResponse,
)
from kbroker.replication.quorum.raft_storage import QuorumState, QuorumStateStore, RaftLog

__all__ = ["LEADER_CHANGE_PAYLOAD", "RaftConfig", "RaftNode", "RaftRole"]

# KRaft writes a LeaderChange control record; the on-disk log will map this payload onto one.
LEADER_CHANGE_PAYLOAD = b"\x00kraft:LeaderChange"


class RaftRole(enum.Enum):
    UNATTACHED = "unattached"
    VOTED = "voted"
    CANDIDATE = "candidate"
    LEADER = "leader"
    FOLLOWER = "follower"


@dataclass(frozen=True, slots=True)
class RaftConfig:
    """Timeouts of Kafka's controller.quorum.{election.timeout,fetch.timeout,request.timeout,retry.backoff}.ms;
    election timeouts are drawn from [election_timeout_ms, 2 * election_timeout_ms) as Kafka does."""

    election_timeout_ms: int = 1000
    fetch_timeout_ms: int = 2000
    request_timeout_ms: int = 2000
    retry_backoff_ms: int = 20
    # A follower re-fetches this long after an empty answer (stands in for the leader's long poll).
    fetch_backoff_ms: int = 50
    max_fetch_records: int = 64
    # Bytes of snapshot per FetchSnapshot answer.
    max_snapshot_chunk_bytes: int = 1 << 20


@dataclass(slots=True)
class _SnapshotFetch:
    """A snapshot being pulled from the leader: its id and the bytes received so far."""

    snapshot_id: SnapshotId
    data: bytearray


class RaftNode:
    """One member (voter or observer) of the controller quorum.

    Invariants:
    - the (epoch, voted_id) pair is written to the `QuorumStateStore` before any message that depends on it
      leaves, so a node votes at most once per epoch, across restarts;
    - a node is leader of an epoch only after a majority of voters granted it their vote in that epoch, and
      a node never becomes leader twice in one epoch (after a restart it must win a new epoch);
    - the log only changes by appends at its end, by truncation of a follower's tail the leader reported
      as divergent (the leader never truncates), by dropping entries a snapshot of committed entries holds,
      or by a follower replacing it with the leader's snapshot;
    - `high_watermark` never decreases while the node runs and never exceeds entries shared by a majority of
      voters; a leader moves it only to an offset above its own epoch's first entry.
    """

    def __init__(
        self,
        node_id: int,
        voters: Iterable[int],
        log: RaftLog,
        store: QuorumStateStore,
        rng: random.Random,
        config: RaftConfig | None = None,
        now_ms: int = 0,
    ) -> None:
        self.node_id = node_id
        self.voters = frozenset(voters)
        self.is_voter = node_id in self.voters
        self.config = config or RaftConfig()
        self._log = log
        self._store = store
        self._rng = rng
        # Everything a snapshot holds was committed when it was taken.
        snapshot = log.latest_snapshot_id
        self._high_watermark = 0 if snapshot is None else snapshot.end_offset
        self._snapshot_fetch: _SnapshotFetch | None = None
        self._next_correlation_id = 0
        self._inflight_fetch: int | None = None
        self._inflight_sent_ms = 0
        self._next_fetch_ms = now_ms
        self._timeout_ms = now_ms
        self._votes: set[int] = set()
        self._next_vote_retry_ms = now_ms
        self._leader_state: LeaderState | None = None
        persisted = store.read()
        self._epoch = persisted.epoch
        self._voted_id = persisted.voted_id
        self._leader_id: int | None = None
        if persisted.leader_id is not None and persisted.leader_id != node_id:
            self._become_follower(now_ms, persisted.epoch, persisted.leader_id)
        else:
            # A leader that restarts comes back as having voted for itself: it must win a new epoch.
            self._role = RaftRole.VOTED if self._voted_id is not None else RaftRole.UNATTACHED
            self._reset_election_timeout(now_ms)

    # -- read-only state -------------------------------------------------------------------------------

    @property
    def role(self) -> RaftRole:
        return self._role

    @property
    def epoch(self) -> int:
        return self._epoch

    @property
    def leader_id(self) -> int | None:
        return self._leader_id

    @property
    def voted_id(self) -> int | None:
        return self._voted_id

    @property
    def high_watermark(self) -> int:
        return self._high_watermark

    @property
    def log(self) -> RaftLog:
        return self._log

    def voter_progress(self) -> dict[int, tuple[int, int]]:
        """Leader only: each other voter's (log end offset, last fetch time) as last seen."""
        return {} if self._leader_state is None else self._leader_state.voter_progress()

    # -- inputs ----------------------------------------------------------------------------------------

    def propose(self, payloads: list[bytes]) -> int | None:
        """Append `payloads` if this node leads; returns the last offset, or None when not the leader."""
        if self._role is not RaftRole.LEADER or not payloads:
            return None
        last = self._log.append(self._epoch, payloads)
        self._maybe_advance_high_watermark()
        return last

    def resign(self, now_ms: int) -> list[Outbound]:
        """Graceful resignation (EndQuorumEpoch): voters are told who is best placed to succeed."""
        out: list[Outbound] = []
        if self._role is RaftRole.LEADER:
            self._resign(now_ms, out)
        return out

    def tick(self, now_ms: int) -> list[Outbound]:
        """Fire due timers (election, fetch timeout, fetch pacing, retries, check quorum); call every few ms."""
        out: list[Outbound] = []
        role = self._role
        if role is RaftRole.LEADER:
            self._leader_tick(now_ms, out)
        elif role is RaftRole.FOLLOWER:
            if now_ms >= self._timeout_ms:
                if self.is_voter:
                    self._become_candidate(now_ms, out)
                else:
                    self._become_unattached(now_ms, self._epoch)
            else:
                self._maybe_send_fetch(now_ms, out)
        elif not self.is_voter:
            self._discover_leader(now_ms, out)
        elif now_ms >= self._timeout_ms:
            self._become_candidate(now_ms, out)
        elif role is RaftRole.CANDIDATE and now_ms >= self._next_vote_retry_ms:
            self._request_votes(now_ms, out)
        return out

    def handle(self, now_ms: int, sender_id: int, message: RaftMessage) -> list[Outbound]:
        """Process one request or response from node `sender_id`; returns what to send in reaction."""
        out: list[Outbound] = []
        if isinstance(message, FetchRequest):
            self._on_fetch_request(now_ms, sender_id, message, out)
        elif isinstance(message, FetchResponse):
            self._on_fetch_response(now_ms, sender_id, message)
        elif isinstance(message, FetchSnapshotRequest):
            self._on_fetch_snapshot_request(now_ms, sender_id, message, out)
        elif isinstance(message, FetchSnapshotResponse):
            self._on_fetch_snapshot_response(now_ms, sender_id, message)
        elif isinstance(message, VoteRequest):
            self._on_vote_request(now_ms, sender_id, message, out)
        elif isinstance(message, VoteResponse):
            self._observe_epoch(now_ms, message.leader_epoch, message.leader_id)
            if self._role is RaftRole.CANDIDATE and message.leader_epoch == self._epoch and message.vote_granted:
                self._votes.add(sender_id)
                if self._has_majority(self._votes):
                    self._become_leader(now_ms, out)
        elif isinstance(message, BeginQuorumEpochRequest):
            if message.leader_epoch >= self._epoch:
                self._observe_epoch(now_ms, message.leader_epoch, message.leader_id)
                code = ErrorCode.none
            else:
                code = ErrorCode.fenced_leader_epoch
            out.append(Outbound(sender_id, BeginQuorumEpochResponse(code, self._leader_id, self._epoch)))
        elif isinstance(message, EndQuorumEpochRequest):
            self._on_end_quorum_epoch(now_ms, sender_id, message, out)
        elif isinstance(message, BeginQuorumEpochResponse | EndQuorumEpochResponse):
            self._observe_epoch(now_ms, message.leader_epoch, message.leader_id)
        if self._role is RaftRole.FOLLOWER:
            self._maybe_send_fetch(now_ms, out)
        return out

    # -- transitions -----------------------------------------------------------------------------------

    def _persist(self) -> None:
        self._store.write(QuorumState(self._epoch, self._voted_id, self._leader_id))

    def _reset_election_timeout(self, now_ms: int) -> None:
        if self.voters == {self.node_id}:
            # The only voter needs nobody's vote and has no leader to hear from: it stands at once
            # (a single node is ready in milliseconds, not after an election timeout).
            self._timeout_ms = now_ms
            return
        timeout = self.config.election_timeout_ms
        self._timeout_ms = now_ms + timeout + self._rng.randrange(timeout)

    def _clear_role_state(self) -> None:
        self._votes = set()
        self._leader_state = None
        self._inflight_fetch = None
        self._snapshot_fetch = None

    def _become_unattached(self, now_ms: int, epoch: int) -> None:
        was_leaderless = self._role in (RaftRole.UNATTACHED, RaftRole.VOTED, RaftRole.CANDIDATE)
        deadline = self._timeout_ms
        if epoch > self._epoch:
            self._epoch = epoch
            self._voted_id = None
        self._leader_id = None
        self._persist()
        self._role = RaftRole.VOTED if self._voted_id is not None else RaftRole.UNATTACHED
        self._clear_role_state()
        self._reset_election_timeout(now_ms)
        if was_leaderless:
            # Only a live leader or a granted vote pushes an election back; otherwise a voter that keeps
            # standing with a log that cannot win would postpone, forever, the election of one that can.
            self._timeout_ms = min(self._timeout_ms, deadline)
        self._next_fetch_ms = now_ms

    def _become_follower(self, now_ms: int, epoch: int, leader_id: int) -> None:
        if epoch > self._epoch:
            self._epoch = epoch
            self._voted_id = None
        self._leader_id = leader_id
        self._persist()
        self._role = RaftRole.FOLLOWER
        self._clear_role_state()
        self._timeout_ms = now_ms + self.config.fetch_timeout_ms
        self._next_fetch_ms = now_ms

    def _become_candidate(self, now_ms: int, out: list[Outbound]) -> None:
        self._epoch += 1
        self._voted_id = self.node_id
        self._leader_id = None
        self._persist()
        self._role = RaftRole.CANDIDATE
        self._clear_role_state()
        self._votes = {self.node_id}
        self._reset_election_timeout(now_ms)
        if self._has_majority(self._votes):
            self._become_leader(now_ms, out)
        else:
            self._request_votes(now_ms, out)

    def _request_votes(self, now_ms: int, out: list[Outbound]) -> None:
        request = VoteRequest(self._epoch, self.node_id, self._log.last_epoch, self._log.end_offset)
        for voter in sorted(self.voters - self._votes):
            out.append(Outbound(voter, request))
        self._next_vote_retry_ms = now_ms + self.config.request_timeout_ms

    def _become_leader(self, now_ms: int, out: list[Outbound]) -> None:
        self._role = RaftRole.LEADER
        self._leader_id = self.node_id
        self._persist()
        self._clear_role_state()
        # The LeaderChange entry is the first of this epoch: committing it commits every earlier entry.
        self._leader_state = LeaderState(self.node_id, self.voters, self._log.end_offset, now_ms)
        self._log.append(self._epoch, [LEADER_CHANGE_PAYLOAD])
        announce = BeginQuorumEpochRequest(self.node_id, self._epoch)
        for voter in self._leader_state.other_voters():
            out.append(Outbound(voter, announce))
        self._maybe_advance_high_watermark()

    def _resign(self, now_ms: int, out: list[Outbound]) -> None:
        assert self._leader_state is not None
        successors = self._leader_state.preferred_successors()
        request = EndQuorumEpochRequest(self.node_id, self._epoch, tuple(successors))
        for voter in successors:
            out.append(Outbound(voter, request))
        # Still voted for itself in this epoch, so it cannot vote for anyone else here.
        self._leader_id = None
        self._persist()
        self._role = RaftRole.VOTED
        self._clear_role_state()
        self._reset_election_timeout(now_ms)

    def _observe_epoch(self, now_ms: int, epoch: int, leader_id: int | None) -> None:
        """Adopt a higher epoch (and its leader when known), or learn the leader of the current epoch."""
        if epoch > self._epoch:
            if leader_id is not None and leader_id != self.node_id:
                self._become_follower(now_ms, epoch, leader_id)
            else:
                self._become_unattached(now_ms, epoch)
        elif (
            epoch == self._epoch
            and leader_id is not None
            and leader_id != self.node_id
            and self._leader_id is None
            and self._role is not RaftRole.LEADER
        ):
            self._become_follower(now_ms, epoch, leader_id)

    def _has_majority(self, members: set[int]) -> bool:
        return 2 * len(members & self.voters) > len(self.voters)

    # -- elections -------------------------------------------------------------------------------------

    def _candidate_log_is_up_to_date(self, request: VoteRequest) -> bool:
        return (request.last_offset_epoch, request.last_offset) >= (self._log.last_epoch, self._log.end_offset)

    def _on_vote_request(self, now_ms: int, sender_id: int, request: VoteRequest, out: list[Outbound]) -> None:
        granted = False
        if self.is_voter and request.candidate_id in self.voters and request.candidate_epoch >= self._epoch:
            if request.candidate_epoch > self._epoch:
                self._become_unattached(now_ms, request.candidate_epoch)
            if self._voted_id is not None:
                # Repeating a vote already cast (a retried or duplicated request) is harmless.
                granted = self._voted_id == request.candidate_id and self._role is not RaftRole.LEADER
            elif self._leader_id is None and self._candidate_log_is_up_to_date(request):
                self._voted_id = request.candidate_id
                self._persist()
                self._role = RaftRole.VOTED
                self._reset_election_timeout(now_ms)
                granted = True
        out.append(Outbound(sender_id, VoteResponse(ErrorCode.none, self._leader_id, self._epoch, granted)))

    def _on_end_quorum_epoch(
        self, now_ms: int, sender_id: int, request: EndQuorumEpochRequest, out: list[Outbound]
    ) -> None:
        if request.leader_epoch > self._epoch:
            self._become_unattached(now_ms, request.leader_epoch)
        if (
            self.is_voter
            and request.leader_epoch == self._epoch
            and self._role is not RaftRole.LEADER
            and self._leader_id in (None, request.leader_id)
        ):
            if self._role is RaftRole.FOLLOWER:
                self._become_unattached(now_ms, self._epoch)
            if self._role is not RaftRole.CANDIDATE:
                if self.node_id in request.preferred_successors:
                    position = request.preferred_successors.index(self.node_id)
                    # The best-placed successor stands at once; the others leave it room to win.
                    backoff = position * self.config.election_timeout_ms // 2
                    jitter = self._rng.randrange(self.config.retry_backoff_ms) if position else 0
                    self._timeout_ms = now_ms + backoff + jitter
                if now_ms >= self._timeout_ms:
                    self._become_candidate(now_ms, out)
        out.append(Outbound(sender_id, EndQuorumEpochResponse(ErrorCode.none, self._leader_id, self._epoch)))

    # -- leader ----------------------------------------------------------------------------------------

    def _leader_tick(self, now_ms: int, out: list[Outbound]) -> None:
        # Check quorum: a leader cut off from a majority for 1.5 fetch timeouts steps down, so a stale
        # leader does not sit on proposals forever and rejoins the quorum once the partition heals.
        leader_state = self._leader_state
        assert leader_state is not None
        if not leader_state.has_quorum(now_ms, self.config.fetch_timeout_ms * 3 // 2):
            self._resign(now_ms, out)
            return
        for voter in leader_state.due_announcements(now_ms, self.config.request_timeout_ms):
            out.append(Outbound(voter, BeginQuorumEpochRequest(self.node_id, self._epoch)))

    def _maybe_advance_high_watermark(self) -> None:
        assert self._leader_state is not None
        majority_offset = self._leader_state.majority_offset(self._log.end_offset)
        if majority_offset is not None and majority_offset > self._high_watermark:
            self._high_watermark = majority_offset

    def _on_fetch_request(self, now_ms: int, sender_id: int, request: FetchRequest, out: list[Outbound]) -> None:
        def answer(code: ErrorCode, diverging_epoch: DivergingEpoch | None = None,
                   records: tuple[LogEntry, ...] = (), snapshot_id: SnapshotId | None = None) -> None:
            response = FetchResponse(
                request.correlation_id, code, self._high_watermark, self._leader_id, self._epoch,
                diverging_epoch, records, snapshot_id,
            )
            out.append(Outbound(sender_id, response))

        if self._role is not RaftRole.LEADER or request.current_leader_epoch > self._epoch:
            code = ErrorCode.not_leader_or_follower
            if request.current_leader_epoch > self._epoch:
                code = ErrorCode.unknown_leader_epoch
            answer(code)
            return
        if request.current_leader_epoch < self._epoch:
            answer(ErrorCode.fenced_leader_epoch)
            return
        leader_state = self._leader_state
        assert leader_state is not None
        leader_state.on_fetch(sender_id, now_ms)
        snapshot = self._needed_snapshot(request.fetch_offset, request.last_fetched_epoch)
        if snapshot is not None:
            answer(ErrorCode.none, snapshot_id=snapshot)
            return
        epoch, end_offset = self._log.end_offset_for_epoch(request.last_fetched_epoch)
        if epoch != request.last_fetched_epoch or end_offset < request.fetch_offset:
            answer(ErrorCode.none, diverging_epoch=DivergingEpoch(epoch, end_offset))
            return
        # The fetcher's log matches ours up to fetch_offset (checked above), so that many entries count.
        if leader_state.maybe_update_end_offset(sender_id, request.fetch_offset):
            self._maybe_advance_high_watermark()
        max_records = min(request.max_records, self.config.max_fetch_records)
        answer(ErrorCode.none, records=tuple(self._log.entries(request.fetch_offset, max_records)))

    def _needed_snapshot(self, fetch_offset: int, last_fetched_epoch: int) -> SnapshotId | None:
        """The snapshot a fetcher must load first (Kafka's rule): its position lies below the log start, or
        at it with another epoch than the snapshot's, or its last epoch is older than the snapshot's."""
        earliest = self._log.earliest_snapshot_id
        start = self._log.start_offset
        if earliest is None:
            return None
        if (fetch_offset < start or (fetch_offset == start and last_fetched_epoch != earliest.epoch)
                or last_fetched_epoch < earliest.epoch):
            return self._log.latest_snapshot_id
        return None

    def _on_fetch_snapshot_request(self, now_ms: int, sender_id: int, request: FetchSnapshotRequest,
                                   out: list[Outbound]) -> None:
        def answer(code: ErrorCode, size: int = 0, data: bytes = b"") -> None:
            response = FetchSnapshotResponse(request.correlation_id, code, self._leader_id, self._epoch,
                                             request.snapshot_id, size, request.position, data)
            out.append(Outbound(sender_id, response))

        if self._role is not RaftRole.LEADER or request.current_leader_epoch > self._epoch:
            answer(ErrorCode.not_leader_or_follower if request.current_leader_epoch <= self._epoch
                   else ErrorCode.unknown_leader_epoch)
            return
        if 0 <= request.current_leader_epoch < self._epoch:
            answer(ErrorCode.fenced_leader_epoch)
            return
        assert self._leader_state is not None
        self._leader_state.on_fetch(sender_id, now_ms)
        size = self._log.snapshot_size(request.snapshot_id)
        if size is None:
            answer(ErrorCode.snapshot_not_found)
            return
        if not 0 <= request.position <= size:
            answer(ErrorCode.position_out_of_range, size)
            return
        max_bytes = min(request.max_bytes, self.config.max_snapshot_chunk_bytes)
        answer(ErrorCode.none, size, self._log.read_snapshot(request.snapshot_id, request.position, max_bytes))

    # -- followers and observers -----------------------------------------------------------------------

    def _send_fetch(self, now_ms: int, destination: int, out: list[Outbound]) -> None:
        self._next_correlation_id += 1
        self._inflight_fetch = self._next_correlation_id
        self._inflight_sent_ms = now_ms
        pulling = self._snapshot_fetch
        if pulling is not None:
            out.append(Outbound(destination, FetchSnapshotRequest(
                self._next_correlation_id, self.node_id, self._epoch, pulling.snapshot_id, len(pulling.data),
                self.config.max_snapshot_chunk_bytes)))
            return
        request = FetchRequest(
            self._next_correlation_id,
            self.node_id,
            self._epoch,
            self._log.end_offset,
            self._log.last_epoch,
            self.config.max_fetch_records,
        )
        out.append(Outbound(destination, request))

    def _maybe_send_fetch(self, now_ms: int, out: list[Outbound]) -> None:
        if self._inflight_fetch is not None:
            if now_ms - self._inflight_sent_ms < self.config.request_timeout_ms:
                return
        elif now_ms < self._next_fetch_ms:
            return
        assert self._leader_id is not None
        self._send_fetch(now_ms, self._leader_id, out)

    def _discover_leader(self, now_ms: int, out: list[Outbound]) -> None:
        """An observer without a leader asks a random voter; any answer names the leader it knows."""
        if now_ms >= self._next_fetch_ms:
            self._next_fetch_ms = now_ms + self.config.request_timeout_ms
            self._send_fetch(now_ms, self._rng.choice(sorted(self.voters)), out)

    def _on_fetch_response(self, now_ms: int, sender_id: int, response: FetchResponse) -> None:
        self._observe_epoch(now_ms, response.leader_epoch, response.leader_id)
        if (
            self._role is not RaftRole.FOLLOWER
            or response.correlation_id != self._inflight_fetch
            or sender_id != self._leader_id
            or response.leader_epoch != self._epoch
        ):
            return
        self._inflight_fetch = None
        if response.error_code != ErrorCode.none:
            self._next_fetch_ms = now_ms + self.config.retry_backoff_ms
            return
        self._timeout_ms = now_ms + self.config.fetch_timeout_ms
        if response.snapshot_id is not None:
            self._snapshot_fetch = _SnapshotFetch(response.snapshot_id, bytearray())
            self._next_fetch_ms = now_ms
            return
        diverging = response.diverging_epoch
        if diverging is not None:
            _, local_end = self._log.end_offset_for_epoch(diverging.epoch)
            # Committed entries (those a snapshot holds) never diverge: the cut stays above the log start.
            self._log.truncate_to(max(min(diverging.end_offset, local_end), self._log.start_offset))
            self._next_fetch_ms = now_ms
            return
        records = response.records
        if records and records[0].offset == self._log.end_offset:
            start = 0
            for index in range(1, len(records) + 1):
                if index == len(records) or records[index].epoch != records[start].epoch:
                    self._log.append(records[start].epoch, [r.payload for r in records[start:index]])
                    start = index
        # Everything up to our end offset now matches the leader's log, so its high watermark applies to it.
        self._high_watermark = max(self._high_watermark, min(response.high_watermark, self._log.end_offset))
        self._next_fetch_ms = now_ms if records else now_ms + self.config.fetch_backoff_ms

    def _on_fetch_snapshot_response(self, now_ms: int, sender_id: int, response: FetchSnapshotResponse) -> None:
        self._observe_epoch(now_ms, response.leader_epoch, response.leader_id)
        pulling = self._snapshot_fetch
        if (
            self._role is not RaftRole.FOLLOWER
            or pulling is None
            or response.correlation_id != self._inflight_fetch
            or sender_id != self._leader_id
            or response.leader_epoch != self._epoch
            or response.snapshot_id != pulling.snapshot_id
        ):
            return
        self._inflight_fetch = None
        if response.error_code in (ErrorCode.snapshot_not_found, ErrorCode.position_out_of_range):
            # The leader has a newer snapshot by now: fetch again to learn it.
            self._snapshot_fetch = None
            self._next_fetch_ms = now_ms
            return
        if response.error_code != ErrorCode.none:
            self._next_fetch_ms = now_ms + self.config.retry_backoff_ms
            return
        self._timeout_ms = now_ms + self.config.fetch_timeout_ms
        self._next_fetch_ms = now_ms
        if response.position != len(pulling.data):
            return  # an answer to an older position: ask again from where we are
        pulling.data += response.data
        if len(pulling.data) < response.size:
            return
        self._snapshot_fetch = None
        try:
            self._log.install_snapshot(pulling.snapshot_id, bytes(pulling.data))
        except ValueError:
            return  # not a whole snapshot (InvalidSnapshot): the next fetch starts over
        # A snapshot holds committed entries only.
        self._high_watermark = max(self._high_watermark, pulling.snapshot_id.end_offset)
