"""In-memory Raft storage (Kafka's MockLog and MockQuorumStateStore) for the Raft tests and simulation."""

from __future__ import annotations

from kbroker.replication.quorum.raft_messages import LogEntry
from kbroker.replication.quorum.raft_storage import QuorumState


class MemoryRaftLog:
    """An in-memory `RaftLog`. Invariants: `_entries[i].offset == i`; `_epoch_starts` holds one
    (epoch, start_offset) per epoch present, strictly increasing in both fields."""

    def __init__(self) -> None:
        self._entries: list[LogEntry] = []
        self._epoch_starts: list[tuple[int, int]] = []

    @property
    def end_offset(self) -> int:
        return len(self._entries)

    @property
    def last_epoch(self) -> int:
        return self._epoch_starts[-1][0] if self._epoch_starts else 0

    def append(self, epoch: int, payloads: list[bytes]) -> int:
        """Append `payloads` in `epoch`; returns the last offset written."""
        if epoch < self.last_epoch or epoch < 1:
            raise ValueError(f"epoch {epoch} below the log's last epoch {self.last_epoch}")
        if payloads and epoch > self.last_epoch:
            self._epoch_starts.append((epoch, len(self._entries)))
        for payload in payloads:
            self._entries.append(LogEntry(len(self._entries), epoch, payload))
        return len(self._entries) - 1

    def truncate_to(self, offset: int) -> None:
        """Drop every entry at `offset` and above."""
        del self._entries[offset:]
        while self._epoch_starts and self._epoch_starts[-1][1] >= offset:
            self._epoch_starts.pop()

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        for index in range(len(self._epoch_starts) - 1, -1, -1):
            found_epoch, _ = self._epoch_starts[index]
            if found_epoch <= epoch:
                if index + 1 < len(self._epoch_starts):
                    return found_epoch, self._epoch_starts[index + 1][1]
                return found_epoch, len(self._entries)
        return 0, 0

    def entries(self, from_offset: int, max_count: int) -> list[LogEntry]:
        return self._entries[from_offset : from_offset + max_count]


class MemoryQuorumState:
    """An in-memory `QuorumStateStore` (survives a simulated crash because the simulator keeps the object)."""

    def __init__(self) -> None:
        self.state = QuorumState()

    def read(self) -> QuorumState:
        return self.state

    def write(self, state: QuorumState) -> None:
        self.state = state
