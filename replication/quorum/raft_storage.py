"""What the sans-IO Raft core keeps durable, as protocols: the replicated log and the election state.

``RaftNode`` (raft.py) reads and writes only through these two (Kafka's ``ReplicatedLog`` and
``QuorumStateStore``). On disk they are ``PartitionRaftLog`` and ``FileQuorumState`` (raft_log.py);
the tests and the Raft simulation use in-memory ones (tests/support/raft_memory.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from .raft_messages import LogEntry


class RaftLog(Protocol):
    """The replicated log. Offsets start at 0; epochs are >= 1 and never decrease along the log; an empty
    log's last epoch is 0. `end_offset_for_epoch(e)` returns (largest epoch <= e present in the log, the
    offset where that epoch ends), or (0, 0) when the log holds no such epoch."""

    @property
    def end_offset(self) -> int: ...

    @property
    def last_epoch(self) -> int: ...

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
