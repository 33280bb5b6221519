"""What the sans-IO Raft core keeps durable, as protocols: the replicated log and the election state.

``RaftNode`` (raft.py) reads and writes only through these two (Kafka's ``ReplicatedLog`` and
``QuorumStateStore``). On disk they are ``PartitionRaftLog`` and ``FileQuorumState`` (raft_log.py);
the tests and the Raft simulation use in-memory ones (tests/support/raft_memory.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from .raft_messages import LogEntry, SnapshotId


class RaftLog(Protocol):
    """The replicated log, and its snapshots (KIP-630). Offsets start at 0; epochs are >= 1 and never
    decrease along the log; an empty log's last epoch is 0, or its snapshot's epoch. `end_offset_for_epoch(e)`
    returns (largest epoch <= e present in the log or its latest snapshot, the offset where that epoch ends),
    or (0, 0) when there is no such epoch.

    Entries below `start_offset` are gone: a snapshot ends there (`earliest_snapshot_id`, None while the log
    starts at 0), and `latest_snapshot_id` holds the newest state. The snapshot's content is the state
    machine's business: `create_snapshot` stores the payloads it is given, `install_snapshot` stores the
    bytes a leader sent and restarts the log empty at the snapshot's end."""

    @property
    def start_offset(self) -> int: ...

    @property
    def end_offset(self) -> int: ...

    @property
    def last_epoch(self) -> int: ...

    @property
    def latest_snapshot_id(self) -> SnapshotId | None: ...

    @property
    def earliest_snapshot_id(self) -> SnapshotId | None: ...

    def create_snapshot(self, end_offset: int, payloads: list[bytes]) -> SnapshotId: ...

    def delete_before_snapshot(self) -> int: ...

    def snapshot_size(self, snapshot_id: SnapshotId) -> int | None: ...

    def read_snapshot(self, snapshot_id: SnapshotId, position: int, max_bytes: int) -> bytes: ...

    def install_snapshot(self, snapshot_id: SnapshotId, data: bytes) -> None: ...

    def snapshot_payloads(self, snapshot_id: SnapshotId) -> list[bytes]: ...

    def append(self, epoch: int, payloads: list[bytes]) -> int: ...

    def truncate_to(self, offset: int) -> None: ...

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]: ...

    def entries(self, from_offset: int, max_count: int) -> list[LogEntry]: ...


@dataclass(frozen=True, slots=True)
class QuorumState:
    """What survives a restart (Kafka's quorum-state file): the epoch, the vote cast in it, the leader known."""

    epoch: int = 0
    voted_id: int | None = None
    leader_id: int | None = None


class QuorumStateStore(Protocol):
    """Durable election state: `write` must be durable before the node acts on it (answers a vote, etc.)."""

    def read(self) -> QuorumState: ...

    def write(self, state: QuorumState) -> None: ...
