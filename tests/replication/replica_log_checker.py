"""The replication simulation's safety checker: what every replica's log may and may not do.

It keeps a copy of each broker process's log (``Mirror``: batch headers only, re-read from where
the log changed; truncations are seen through an observation hook on the ``PartitionLog``) and
the one committed prefix every replica must agree with. A broken property is reported through
the ``fail`` callback the simulation passes in (which raises, with its trace):

* committed prefix: a replica's batches below its high watermark are that prefix (the first
  replica to commit a batch fixes it), contiguous; acknowledged produces are in it;
* no truncation cuts a replica's log below where it matches the committed prefix;
* leader completeness: the leader the controller names holds every batch committed up to its
  epoch;
* a leader's high watermark never goes backwards within its leader epoch (per broker, across restarts);
* log matching: never two different batches at one (leader epoch, base offset), in any log.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import NoReturn

from kbroker.protocol.records import HEADER_SIZE, read_header
from kbroker.replication.partition import Partition
from kbroker.storage.log import PartitionLog

# A replica as the checker names it: (broker id, process incarnation).
ReplicaKey = tuple[int, int]


@dataclass(frozen=True, slots=True)
class Batch:
    """A batch as the checker identifies it: where it sits, who wrote it, which produce it carries."""

    base_offset: int
    last_offset: int
    leader_epoch: int
    produce_id: int  # the producer's unique base timestamp, less the simulation's base


@dataclass
class Mirror:
    """The checker's copy of one replica's log (re-read only from where it changed)."""

    batches: list[Batch] = field(default_factory=list)
    cut_at: int | None = None  # lowest offset truncated since the last check
    verified: int = 0  # how many of ``batches`` were checked against the committed prefix

    @property
    def end(self) -> int:
        return self.batches[-1].last_offset + 1 if self.batches else 0


class ReplicaLogChecker:
    def __init__(self, fail: Callable[[str], NoReturn], base_timestamp: int) -> None:
        self.fail = fail
        self.base_timestamp = base_timestamp
        self.mirrors: dict[ReplicaKey, Mirror] = {}
        self.committed: dict[int, Batch] = {}  # base offset -> batch
        self.committed_order: list[Batch] = []
        self.commit_epoch: list[int] = []  # the leader epoch under which each was committed
        self.by_epoch_offset: dict[tuple[int, int], Batch] = {}
        self.leader_hw: dict[tuple[int, int, int], int] = {}
        self.leader_verified: dict[tuple[int, int], int] = {}
        self.truncations = 0

    def forget(self, broker_id: int) -> None:
        """A broker process is gone: its next one is read afresh."""
        for key in [k for k in self.mirrors if k[0] == broker_id]:
            del self.mirrors[key]

    def mirror(self, key: ReplicaKey, plog: PartitionLog) -> Mirror:
        """The replica's log as it is now, checking truncations and log matching on the way."""
        mirror = self.mirrors.get(key)
        if mirror is None:
            mirror = self.mirrors[key] = Mirror()
            watch_truncation(plog, mirror)
        if mirror.cut_at is not None:
            self._apply_cut(key, mirror, mirror.cut_at)
        position = mirror.end
        end = plog.log_end_offset
        while position < end:
            found = plog.read(max(position, plog.log_start_offset), 1 << 30, end, True)
            if found is None:
                break
            data = found.segment.read_bytes(found.position, found.length)
            pos = 0
            while pos + HEADER_SIZE <= len(data):
                header = read_header(data, pos)
                batch = Batch(header.base_offset, header.last_offset, header.partition_leader_epoch,
                              header.base_timestamp - self.base_timestamp)
                known = self.by_epoch_offset.setdefault((batch.leader_epoch, batch.base_offset), batch)
                if known != batch:
                    self.fail(f"log matching: b{key[0]} holds {batch}, another log holds {known}")
                mirror.batches.append(batch)
                pos += header.size
                position = batch.last_offset + 1
        return mirror

    def _apply_cut(self, key: ReplicaKey, mirror: Mirror, cut: int) -> None:
        mirror.cut_at = None
        self.truncations += 1
        matching = 0
        for batch in mirror.batches:
            if self.committed.get(batch.base_offset) != batch:
                break
            matching = batch.last_offset + 1
        if cut < matching:
            self.fail(f"b{key[0]} truncated to {cut}, cutting committed batches below {matching}")
        while mirror.batches and mirror.batches[-1].last_offset >= cut:
            mirror.batches.pop()
        mirror.verified = min(mirror.verified, len(mirror.batches))

    def check_replica(self, key: ReplicaKey, partition: Partition, named_leader: bool) -> None:
        """Every property of one replica; ``named_leader``: the controller's current leader is it."""
        mirror = self.mirror(key, partition.log)
        hw = partition.high_watermark
        if hw > partition.log_end_offset:
            self.fail(f"b{key[0]} high watermark {hw} beyond its log end {partition.log_end_offset}")
        self._check_committed_prefix(key, mirror, hw, partition.leader_epoch if partition.is_leader else -1)
        if partition.is_leader:
            hw_key = (key[0], partition.leader_epoch)  # per broker: a restart must not lower it either
            if hw < self.leader_hw.get(hw_key, 0):
                self.fail(f"b{key[0]} leading epoch {partition.leader_epoch} moved its high watermark back "
                          f"from {self.leader_hw[hw_key]} to {hw}")
            self.leader_hw[hw_key] = hw
            if named_leader:
                self._check_leader_completeness(key, mirror, partition.leader_epoch)

    def check_acknowledged(self, acked: dict[int, int]) -> None:
        """Every acks=all acknowledgement (produce id -> base offset) is in the committed prefix."""
        for produce_id, offset in acked.items():
            batch = self.committed.get(offset)
            if batch is None or batch.produce_id != produce_id:
                self.fail(f"acknowledged p{produce_id} at offset {offset} is not committed there (committed: {batch})")

    def check_holds_committed(self, batches: list[Batch]) -> None:
        """A converged log holds the whole committed prefix."""
        held = {b.base_offset: b for b in batches}
        for batch in self.committed_order:
            if held.get(batch.base_offset) != batch:
                self.fail(f"committed {batch} is not in the converged log")

    def _check_committed_prefix(self, key: ReplicaKey, mirror: Mirror, hw: int, leading_epoch: int) -> None:
        committed_end = self.committed_order[-1].last_offset + 1 if self.committed_order else 0
        for index in range(mirror.verified, len(mirror.batches)):
            batch = mirror.batches[index]
            if batch.last_offset >= hw:
                break
            mirror.verified = index + 1
            if batch.base_offset < committed_end:
                if self.committed.get(batch.base_offset) != batch:
                    self.fail(f"b{key[0]} holds {batch} below its high watermark {hw}; committed there is "
                              f"{self.committed.get(batch.base_offset)}")
                continue
            if batch.base_offset != committed_end:
                self.fail(f"b{key[0]} commits {batch}, not contiguous with the committed end {committed_end}")
            self.committed[batch.base_offset] = batch
            self.committed_order.append(batch)
            self.commit_epoch.append(leading_epoch)
            committed_end = batch.last_offset + 1

    def _check_leader_completeness(self, key: ReplicaKey, mirror: Mirror, epoch: int) -> None:
        verified_key = (key[0], epoch)
        start = self.leader_verified.get(verified_key, 0)
        if start == len(self.committed_order):
            return
        held = {b.base_offset: b for b in mirror.batches}
        for index in range(start, len(self.committed_order)):
            batch = self.committed_order[index]
            if self.commit_epoch[index] > epoch:
                continue  # committed under a later leader
            if held.get(batch.base_offset) != batch:
                self.fail(f"leader completeness: b{key[0]} leads epoch {epoch} without committed {batch}")
        self.leader_verified[verified_key] = len(self.committed_order)


def watch_truncation(plog: PartitionLog, mirror: Mirror) -> None:
    """Tell ``mirror`` whenever the replica's log is cut (an observation hook on this one log object)."""
    truncate_to, truncate_fully = plog.truncate_to, plog.truncate_fully_and_start_at

    def cut(offset: int) -> None:
        if offset < plog.log_end_offset:
            mirror.cut_at = offset if mirror.cut_at is None else min(mirror.cut_at, offset)
        truncate_to(offset)

    def cut_fully(offset: int) -> None:
        mirror.cut_at = plog.log_start_offset if mirror.cut_at is None else min(mirror.cut_at, plog.log_start_offset)
        truncate_fully(offset)

    plog.truncate_to = cut  # type: ignore[method-assign]
    plog.truncate_fully_and_start_at = cut_fully  # type: ignore[method-assign]
