"""The controller quorum's durable state: the metadata log as a RaftLog, and the quorum-state file.

``PartitionRaftLog`` keeps Raft entries in an ordinary PartitionLog (``__cluster_metadata-0``):
one entry is one record, its offset the record offset, its epoch the batch's partition leader
epoch (so the LeaderEpochCache is the Raft epoch history). Every append is fsynced before it
returns: a voter acknowledges entries (by fetching past them) only once they are on disk.
Its snapshots are files beside the segments (``raft_snapshot``). As Kafka keeps the log back to
its older snapshot, a new snapshot cuts the log at the previous one's end (the log start offset
moves there, segments wholly below it and older snapshots are deleted): a broker or voter a
little behind goes on fetching entries instead of reloading a whole image after every snapshot.
At start the log starts at the oldest snapshot kept (the PartitionLog keeps no start offset of
its own here) and the latest valid one is what the state machine loads.
``FileQuorumState`` is Kafka's ``quorum-state`` file: epoch, vote and known leader, replaced
atomically and fsynced before the node acts on it.
"""

from __future__ import annotations

import bisect
import json
import logging
import os

from kbroker.protocol.record_builder import build_batch
from kbroker.protocol.records import batch_size_at, iter_records, read_header
from kbroker.storage.file_io import replace_atomically
from kbroker.storage.log import PartitionLog

from . import raft_snapshot
from .raft_messages import LogEntry, SnapshotId
from .raft_storage import QuorumState

log = logging.getLogger(__name__)

QUORUM_STATE_FILE = "quorum-state"
_READ_CHUNK = 1 << 20
# Payload bytes per record batch of the metadata log: under the log's max.message.bytes default
# (1 MiB) with room for record overhead.
MAX_BATCH_BYTES = 512 * 1024


def entries_batch(epoch: int, first_offset: int, payloads: list[bytes], now_ms: int) -> bytearray:
    """One record batch holding ``payloads`` as records, stamped with the Raft epoch."""
    batch = bytearray(build_batch([(None, p) for p in payloads], base_offset=first_offset, base_timestamp=now_ms))
    batch[12:16] = epoch.to_bytes(4, "big", signed=True)  # partitionLeaderEpoch (outside the CRC)
    return batch


def _chunks(payloads: list[bytes], max_bytes: int) -> list[list[bytes]]:
    """Consecutive runs of ``payloads`` of at most ``max_bytes`` each (at least one payload each)."""
    chunks: list[list[bytes]] = [[]]
    size = 0
    for payload in payloads:
        if chunks[-1] and size + len(payload) > max_bytes:
            chunks.append([])
            size = 0
        chunks[-1].append(payload)
        size += len(payload)
    return chunks


def batch_entries(data: bytes | memoryview) -> list[LogEntry]:
    """The entries of whole record batches (a cut-off last batch, as a read of a byte range ends
    in, is ignored)."""
    out: list[LogEntry] = []
    view = memoryview(data)
    position = 0
    while True:
        size = batch_size_at(view, position)
        if size is None or position + size > len(view):
            return out
        header = read_header(view, position)
        for record in iter_records(bytes(view[position:position + size])):
            out.append(LogEntry(record.offset, header.partition_leader_epoch, record.value or b""))
        position += size


class PartitionRaftLog:
    """A loaded PartitionLog as a RaftLog, with the snapshot files of its directory."""

    def __init__(self, plog: PartitionLog) -> None:
        self.plog = plog
        self.directory = plog.directory
        raft_snapshot.delete_parts(self.directory)
        self._snapshots: list[SnapshotId] = []  # kept, oldest first; the first ends at the log start
        latest = self._latest_valid_snapshot()
        if latest is not None:
            self._start_at_snapshot(latest)
            log.info("metadata log %s: latest snapshot %s; log start offset %d, end offset %d",
                     self.directory, raft_snapshot.file_name(latest), self.start_offset, self.end_offset)

    def _latest_valid_snapshot(self) -> SnapshotId | None:
        """The newest snapshot that passes its checks; a torn or corrupt one is set aside (logged)."""
        for snapshot_id in reversed(raft_snapshot.snapshot_ids(self.directory)):
            path = os.path.join(self.directory, raft_snapshot.file_name(snapshot_id))
            try:
                with open(path, "rb") as fh:
                    raft_snapshot.decode(fh.read())
                return snapshot_id
            except raft_snapshot.InvalidSnapshot as exc:
                log.error("metadata snapshot %s is not valid (%s): ignored; renamed to %s.deleted",
                          path, exc, path)
                os.replace(path, path + ".deleted")
        if self.plog.segments[0].base_offset > 0:
            # Entries were dropped behind a snapshot that is gone: what is left cannot be replayed.
            # Start empty; the leader sends its snapshot.
            log.error("%s starts at offset %d and no valid snapshot holds what came before: "
                      "the metadata log starts again empty", self.directory, self.plog.segments[0].base_offset)
            self.plog.truncate_fully_and_start_at(0)
        return None

    def _start_at_snapshot(self, latest: SnapshotId) -> None:
        """The log starts where the oldest snapshot it reaches back to ends; a log that ends before
        the latest, or holds another epoch there (a follower that crashed while installing its
        leader's snapshot), starts empty at its end."""
        plog = self.plog
        # (Below the previous start the epoch history is gone: unknown there is no disagreement.)
        epoch_before = plog.leader_epoch_cache.epoch_for_offset(latest.end_offset - 1)
        if plog.log_end_offset < latest.end_offset or epoch_before not in (-1, latest.epoch):
            plog.truncate_fully_and_start_at(latest.end_offset)
        self._snapshots = [s for s in raft_snapshot.snapshot_ids(self.directory)
                           if plog.log_start_offset <= s.end_offset and s <= latest]
        self._cut_at(self._snapshots[0])

    @property
    def start_offset(self) -> int:
        return self.plog.log_start_offset

    @property
    def end_offset(self) -> int:
        return self.plog.log_end_offset

    @property
    def last_epoch(self) -> int:
        epoch = self.plog.leader_epoch_cache.latest_epoch
        if epoch < 0 and self._snapshots:
            return self._snapshots[-1].epoch  # the log is empty after its snapshot
        return max(epoch, 0)

    @property
    def latest_snapshot_id(self) -> SnapshotId | None:
        return self._snapshots[-1] if self._snapshots else None

    @property
    def earliest_snapshot_id(self) -> SnapshotId | None:
        if self._snapshots and self._snapshots[0].end_offset == self.start_offset > 0:
            return self._snapshots[0]
        return None

    def create_snapshot(self, end_offset: int, payloads: list[bytes]) -> SnapshotId:
        """Write a snapshot of the state after the entries below ``end_offset`` (committed ones)."""
        latest = self.latest_snapshot_id
        if latest is not None and end_offset <= latest.end_offset:
            return latest
        epoch = self.plog.leader_epoch_cache.epoch_for_offset(end_offset - 1)
        if epoch < 0 and latest is not None:
            epoch = latest.epoch
        snapshot_id = SnapshotId(end_offset, max(epoch, 0))
        raft_snapshot.write(self.directory, snapshot_id,
                            raft_snapshot.encode(snapshot_id, payloads, self.plog.clock.wall_ms()))
        self._snapshots.append(snapshot_id)
        return snapshot_id

    def delete_before_snapshot(self) -> int:
        """Move the log start to the end of the snapshot before the latest (Kafka keeps the log
        back to it): segments wholly below it are deleted (the active one is rolled first when
        all of it is), and so are older snapshots."""
        if len(self._snapshots) >= 2:
            self._cut_at(self._snapshots[-2])
        return self.plog.log_start_offset

    def _cut_at(self, snapshot: SnapshotId) -> None:
        if snapshot.end_offset > self.plog.log_start_offset:
            self.plog.delete_records_before(snapshot.end_offset, snapshot.end_offset)
        for older in raft_snapshot.snapshot_ids(self.directory):
            if older < snapshot:
                os.unlink(os.path.join(self.directory, raft_snapshot.file_name(older)))
        self._snapshots = [s for s in self._snapshots if s >= snapshot]

    def _snapshot_path(self, snapshot_id: SnapshotId) -> str | None:
        if snapshot_id != self.latest_snapshot_id:
            return None
        return os.path.join(self.directory, raft_snapshot.file_name(snapshot_id))

    def snapshot_size(self, snapshot_id: SnapshotId) -> int | None:
        path = self._snapshot_path(snapshot_id)
        return None if path is None else os.path.getsize(path)

    def read_snapshot(self, snapshot_id: SnapshotId, position: int, max_bytes: int) -> bytes:
        path = self._snapshot_path(snapshot_id)
        if path is None:
            return b""
        with open(path, "rb") as fh:
            fh.seek(position)
            return fh.read(max_bytes)

    def snapshot_payloads(self, snapshot_id: SnapshotId) -> list[bytes]:
        """The entries of a snapshot, as the state machine gave them to ``create_snapshot``."""
        path = self._snapshot_path(snapshot_id)
        if path is None:
            raise raft_snapshot.InvalidSnapshot(f"no snapshot {snapshot_id}")
        with open(path, "rb") as fh:
            return raft_snapshot.decode(fh.read())

    def install_snapshot(self, snapshot_id: SnapshotId, data: bytes) -> None:
        """A follower takes its leader's snapshot: stored, then the log restarts empty at its end."""
        raft_snapshot.decode(data)  # InvalidSnapshot: nothing is changed
        raft_snapshot.write(self.directory, snapshot_id, data)
        self.plog.truncate_fully_and_start_at(snapshot_id.end_offset)
        self._snapshots = [snapshot_id]
        self._cut_at(snapshot_id)
        log.info("took the leader's snapshot %s (%d bytes): the metadata log restarts at offset %d",
                 raft_snapshot.file_name(snapshot_id), len(data), snapshot_id.end_offset)

    def append(self, epoch: int, payloads: list[bytes]) -> int:
        """Append as record batches of at most MAX_BATCH_BYTES of payload each (one decision can
        be thousands of records: a topic of 10,000 partitions), then fsync once."""
        if not payloads:
            return self.end_offset - 1
        now_ms = self.plog.clock.wall_ms()
        last = self.end_offset - 1
        for chunk in _chunks(payloads, MAX_BATCH_BYTES):
            batch = entries_batch(epoch, self.end_offset, chunk, now_ms)
            last = self.plog.append_as_leader(memoryview(batch), epoch, now_ms).last_offset
        self.plog.flush(now_ms)
        return last

    def truncate_to(self, offset: int) -> None:
        self.plog.truncate_to(offset)

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        cache = self.plog.leader_epoch_cache
        i = bisect.bisect_right(cache.epochs, epoch) - 1
        if i < 0:
            snapshot = self.earliest_snapshot_id
            if snapshot is not None and snapshot.epoch <= epoch:
                return snapshot.epoch, snapshot.end_offset
            return 0, 0
        end = cache.start_offsets[i + 1] if i + 1 < len(cache.epochs) else self.end_offset
        return cache.epochs[i], end

    def entries(self, from_offset: int, max_count: int) -> list[LogEntry]:
        out: list[LogEntry] = []
        offset = from_offset
        while len(out) < max_count and offset < self.end_offset:
            piece = self.plog.read(offset, _READ_CHUNK, self.end_offset, True)
            if piece is None:
                break
            found = [e for e in batch_entries(piece.segment.read_bytes(piece.position, piece.length))
                     if e.offset >= offset]
            if not found:
                break
            out.extend(found[: max_count - len(out)])
            offset = out[-1].offset + 1
        return out



class FileQuorumState:
    def __init__(self, directory: str) -> None:
        self.path = os.path.join(directory, QUORUM_STATE_FILE)

    def read(self) -> QuorumState:
        try:
            with open(self.path, encoding="utf-8") as fh:
                data = json.load(fh)
        except FileNotFoundError:
            return QuorumState()
        return QuorumState(data["leaderEpoch"], data.get("votedId"), data.get("leaderId"))

    def write(self, state: QuorumState) -> None:
        data = {"leaderEpoch": state.epoch, "votedId": state.voted_id, "leaderId": state.leader_id,
                "data_version": 0}
        replace_atomically(self.path, json.dumps(data).encode())
