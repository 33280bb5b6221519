"""LeaderState: what the quorum's leader tracks during its epoch (Kafka's ``LeaderState``).

Sans-IO like the rest of the Raft core: times are ``now_ms`` arguments. The leader knows each other
voter's log end offset from its fetches, so it decides the high watermark (the offset a majority of
voters hold), checks it still hears from a majority (check quorum), re-sends BeginQuorumEpoch to a
voter that has not fetched since it was told, and names its preferred successors when it resigns.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(slots=True)
class _ReplicaState:
    end_offset: int
    last_fetch_ms: int
    announced_ms: int


class LeaderState:
    """The leader's view of one epoch.

    Invariants: ``epoch_start_offset`` is the offset of the LeaderChange entry the leader appended
    when elected; a voter's ``end_offset`` only grows, and only to an offset the leader checked its
    log matches (a fetch offset past the divergence check); the high watermark it proposes is held by
    a majority of voters and lies above ``epoch_start_offset`` (Raft's own-epoch commit rule).
    """

    def __init__(self, node_id: int, voters: frozenset[int], epoch_start_offset: int, now_ms: int) -> None:
        self.voter_count = len(voters)
        self.epoch_start_offset = epoch_start_offset
        self._replicas = {v: _ReplicaState(0, now_ms, now_ms) for v in voters if v != node_id}

    def voter_progress(self) -> dict[int, tuple[int, int]]:
        """Each other voter's (log end offset, last fetch time) as last seen."""
        return {v: (r.end_offset, r.last_fetch_ms) for v, r in self._replicas.items()}

    def on_fetch(self, voter_id: int, now_ms: int) -> None:
        """A fetch arrived from ``voter_id`` (an observer's fetch counts for nothing)."""
        replica = self._replicas.get(voter_id)
        if replica is not None:
            replica.last_fetch_ms = now_ms

    def maybe_update_end_offset(self, voter_id: int, fetch_offset: int) -> bool:
        """The voter's log matches the leader's up to ``fetch_offset``; True if that is news."""
        replica = self._replicas.get(voter_id)
        if replica is None or fetch_offset <= replica.end_offset:
            return False
        replica.end_offset = fetch_offset
        return True

    def majority_offset(self, log_end_offset: int) -> int | None:
        """The offset a majority of voters hold, if the own-epoch rule lets it commit."""
        offsets = sorted([log_end_offset, *(r.end_offset for r in self._replicas.values())], reverse=True)
        offset = offsets[self.voter_count // 2]
        return offset if offset > self.epoch_start_offset else None

    def has_quorum(self, now_ms: int, window_ms: int) -> bool:
        """Whether a majority of voters (the leader included) fetched within ``window_ms``."""
        alive = 1 + sum(1 for r in self._replicas.values() if now_ms - r.last_fetch_ms <= window_ms)
        return 2 * alive > self.voter_count

    def due_announcements(self, now_ms: int, request_timeout_ms: int) -> list[int]:
        """Voters to tell BeginQuorumEpoch again: not fetched since the last telling, which timed out."""
        due = []
        for voter in sorted(self._replicas):
            replica = self._replicas[voter]
            fetched_in_epoch = replica.last_fetch_ms > replica.announced_ms
            if not fetched_in_epoch and now_ms - replica.announced_ms >= request_timeout_ms:
                replica.announced_ms = now_ms
                due.append(voter)
        return due

    def other_voters(self) -> list[int]:
        return sorted(self._replicas)

    def preferred_successors(self) -> list[int]:
        """The other voters, furthest along first (EndQuorumEpoch's preferred successors)."""
        return sorted(self._replicas, key=lambda v: (-self._replicas[v].end_offset, v))
