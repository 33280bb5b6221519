"""In-memory Raft storage (Kafka's MockLog and MockQuorumStateStore) for the Raft tests and simulation."""

from __future__ import annotations

from kbroker.replication.quorum import raft_snapshot
from kbroker.replication.quorum.raft_messages import LogEntry, SnapshotId
from kbroker.replication.quorum.raft_storage import QuorumState


class MemoryRaftLog:
    """An in-memory `RaftLog`. Invariants: `_entries[i].offset == start_offset + i`; `_epoch_starts` holds one
    (epoch, start_offset) per epoch present, strictly increasing in both fields; snapshots are kept as the
    bytes of a snapshot file (`raft_snapshot.encode`), oldest first, the first ending at or above the start
    offset; as on disk, cutting the log moves its start to the end of the snapshot before the latest."""

    def __init__(self) -> None:
        self._start = 0
        self._entries: list[LogEntry] = []
        self._epoch_starts: list[tuple[int, int]] = []
        self._snapshots: list[tuple[SnapshotId, bytes]] = []

    @property
    def start_offset(self) -> int:
        return self._start

    @property
    def end_offset(self) -> int:
        return self._start + len(self._entries)

    @property
    def last_epoch(self) -> int:
        if self._epoch_starts:
            return self._epoch_starts[-1][0]
        return self._snapshots[-1][0].epoch if self._snapshots else 0

    @property
    def latest_snapshot_id(self) -> SnapshotId | None:
        return self._snapshots[-1][0] if self._snapshots else None

    @property
    def earliest_snapshot_id(self) -> SnapshotId | None:
        if self._snapshots and self._snapshots[0][0].end_offset == self._start > 0:
            return self._snapshots[0][0]
        return None

    def append(self, epoch: int, payloads: list[bytes]) -> int:
        """Append `payloads` in `epoch`; returns the last offset written."""
        if epoch < self.last_epoch or epoch < 1:
            raise ValueError(f"epoch {epoch} below the log's last epoch {self.last_epoch}")
        if payloads and (not self._epoch_starts or epoch > self._epoch_starts[-1][0]):
            self._epoch_starts.append((epoch, self.end_offset))
        for payload in payloads:
            self._entries.append(LogEntry(self.end_offset, epoch, payload))
        return self.end_offset - 1

    def truncate_to(self, offset: int) -> None:
        """Drop every entry at `offset` and above (never below the start: a snapshot holds those)."""
        assert offset >= self._start, (offset, self._start)
        del self._entries[offset - self._start:]
        while self._epoch_starts and self._epoch_starts[-1][1] >= offset:
            self._epoch_starts.pop()

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        for index in range(len(self._epoch_starts) - 1, -1, -1):
            found_epoch, _ = self._epoch_starts[index]
            if found_epoch <= epoch:
                if index + 1 < len(self._epoch_starts):
                    return found_epoch, self._epoch_starts[index + 1][1]
                return found_epoch, self.end_offset
        earliest = self.earliest_snapshot_id
        if earliest is not None and earliest.epoch <= epoch:
            return earliest.epoch, earliest.end_offset
        return 0, 0

    def entries(self, from_offset: int, max_count: int) -> list[LogEntry]:
        assert from_offset >= self._start, (from_offset, self._start)
        first = from_offset - self._start
        return self._entries[first : first + max_count]

    def epoch_of(self, offset: int) -> int:
        """The epoch of the entry at `offset` (below the start: the snapshot's)."""
        if offset < self._start:
            earliest = self.earliest_snapshot_id
            assert earliest is not None and offset == earliest.end_offset - 1, (offset, earliest)
            return earliest.epoch
        return self._entries[offset - self._start].epoch

    def create_snapshot(self, end_offset: int, payloads: list[bytes]) -> SnapshotId:
        latest = self.latest_snapshot_id
        if latest is not None and end_offset <= latest.end_offset:
            return latest
        snapshot_id = SnapshotId(end_offset, self.epoch_of(end_offset - 1) if end_offset else 0)
        self._snapshots.append((snapshot_id, raft_snapshot.encode(snapshot_id, payloads, 0)))
        return snapshot_id

    def delete_before_snapshot(self) -> int:
        if len(self._snapshots) >= 2 and self._snapshots[-2][0].end_offset > self._start:
            cut = self._snapshots[-2][0].end_offset
            del self._entries[: cut - self._start]
            self._start = cut
            kept = [(e, max(s, cut)) for i, (e, s) in enumerate(self._epoch_starts)
                    if i + 1 == len(self._epoch_starts) or self._epoch_starts[i + 1][1] > cut]
            self._epoch_starts = kept if self._entries else []
            self._snapshots = self._snapshots[-2:]
        return self._start

    def _latest(self, snapshot_id: SnapshotId) -> bytes | None:
        return self._snapshots[-1][1] if self._snapshots and self._snapshots[-1][0] == snapshot_id else None

    def snapshot_size(self, snapshot_id: SnapshotId) -> int | None:
        data = self._latest(snapshot_id)
        return None if data is None else len(data)

    def read_snapshot(self, snapshot_id: SnapshotId, position: int, max_bytes: int) -> bytes:
        data = self._latest(snapshot_id)
        return b"" if data is None else data[position : position + max_bytes]

    def snapshot_payloads(self, snapshot_id: SnapshotId) -> list[bytes]:
        data = self._latest(snapshot_id)
        assert data is not None
        return raft_snapshot.decode(data)

    def install_snapshot(self, snapshot_id: SnapshotId, data: bytes) -> None:
        raft_snapshot.decode(data)
        self._snapshots = [(snapshot_id, data)]
        self._start = snapshot_id.end_offset
        self._entries = []
        self._epoch_starts = []


class MemoryQuorumState:
    """An in-memory `QuorumStateStore` (survives a simulated crash because the simulator keeps the object)."""

    def __init__(self) -> None:
        self.state = QuorumState()

    def read(self) -> QuorumState:
        return self.state

    def write(self, state: QuorumState) -> None:
        self.state = state
