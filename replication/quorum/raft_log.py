"""The controller quorum's durable state: the metadata log as a RaftLog, and the quorum-state file.

``PartitionRaftLog`` keeps Raft entries in an ordinary PartitionLog (``__cluster_metadata-0``):
one entry is one record, its offset the record offset, its epoch the batch's partition leader
epoch (so the LeaderEpochCache is the Raft epoch history). Every append is fsynced before it
returns: a voter acknowledges entries (by fetching past them) only once they are on disk.
``FileQuorumState`` is Kafka's ``quorum-state`` file: epoch, vote and known leader, replaced
atomically and fsynced before the node acts on it.
"""

from __future__ import annotations

import bisect
import json
import os

from kbroker.protocol.record_builder import build_batch
from kbroker.protocol.records import iter_records, split_batches
from kbroker.storage.file_io import replace_atomically
from kbroker.storage.log import PartitionLog

from .raft_messages import LogEntry
from .raft_storage import QuorumState

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
    """The entries of whole record batches (a cut-off last batch is ignored)."""
    out: list[LogEntry] = []
    for position, header in split_batches(memoryview(data)):
        batch = bytes(data[position:position + header.size])
        if len(batch) < header.size:
            break
        for record in iter_records(batch):
            out.append(LogEntry(record.offset, header.partition_leader_epoch, record.value or b""))
    return out


class PartitionRaftLog:
    def __init__(self, plog: PartitionLog) -> None:
        self.plog = plog

    @property
    def end_offset(self) -> int:
        return self.plog.log_end_offset

    @property
    def last_epoch(self) -> int:
        return max(self.plog.leader_epoch_cache.latest_epoch, 0)

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
