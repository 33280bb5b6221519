"""Read one replica's partition log straight from its segment files (white-box checks C11).

Kafka and kbroker store record batches (magic v2) verbatim in ``<log.dirs>/<topic>-<partition>/
<base offset>.log``, so the same reader serves both: ``read_replica_log`` returns every complete
batch with its offsets, partition leader epoch, CRC and record values. A batch still being
written (a partial tail) is ignored. ``log_matching`` compares replicas batch by batch below an
offset (LogMatching), ``epoch_conflicts`` finds two different batches written at one (leader
epoch, offset) anywhere in a set of snapshots (two brokers accepting writes in one epoch).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from pathlib import Path

BATCH_HEADER = struct.Struct(">qiibIhiqqqhii")  # up to and including the record count
CONTROL_FLAG = 0x20
COMPRESSION_MASK = 0x07


@dataclass(frozen=True)
class Batch:
    """One record batch of a replica log."""

    base_offset: int
    last_offset: int
    leader_epoch: int
    crc: int
    control: bool
    values: tuple[bytes | None, ...] = field(default=(), compare=False)

    def key(self) -> tuple[int, int, int, int]:
        return (self.base_offset, self.last_offset, self.leader_epoch, self.crc)


@dataclass
class ReplicaLog:
    """The batches of one replica, in offset order."""

    batches: list[Batch]

    @property
    def log_end_offset(self) -> int:
        return self.batches[-1].last_offset + 1 if self.batches else 0

    def values(self, below: int | None = None) -> dict[int, bytes | None]:
        """``{offset: value}`` of the data records (below ``below`` if given)."""
        out: dict[int, bytes | None] = {}
        for batch in self.batches:
            if batch.control:
                continue
            for i, value in enumerate(batch.values):
                offset = batch.base_offset + i
                if below is None or offset < below:
                    out[offset] = value
        return out

    def epochs(self) -> list[tuple[int, int]]:
        """``(leader epoch, first offset)`` per epoch, like a leader-epoch cache."""
        out: list[tuple[int, int]] = []
        for batch in self.batches:
            if not out or out[-1][0] != batch.leader_epoch:
                out.append((batch.leader_epoch, batch.base_offset))
        return out


def partition_dir(log_dir: Path, topic: str, partition: int) -> Path:
    return Path(log_dir) / f"{topic}-{partition}"


def read_replica_log(log_dir: Path, topic: str, partition: int = 0) -> ReplicaLog:
    """Every complete batch in the partition's ``.log`` segments (empty when there is no directory)."""
    directory = partition_dir(log_dir, topic, partition)
    batches: list[Batch] = []
    if not directory.is_dir():
        return ReplicaLog(batches)
    segments = sorted(p for p in directory.iterdir() if p.suffix == ".log" and p.stem.isdigit())
    for segment in segments:
        try:
            data = segment.read_bytes()
        except FileNotFoundError:  # deleted by truncation or retention while listing
            continue
        batches += _batches(data)
    return ReplicaLog(batches)


def _batches(data: bytes) -> list[Batch]:
    out = []
    position = 0
    while position + BATCH_HEADER.size <= len(data):
        fields = BATCH_HEADER.unpack_from(data, position)
        base, length, epoch, magic, crc, attributes, last_delta = fields[:7]
        count = fields[12]
        end = position + 12 + length
        if length <= 0 or magic != 2 or end > len(data):
            break  # a partial tail (or zero fill): not a batch yet
        control = bool(attributes & CONTROL_FLAG)
        values: tuple[bytes | None, ...] = ()
        if not attributes & COMPRESSION_MASK:
            values = tuple(_record_values(data, position + BATCH_HEADER.size, count))
        out.append(Batch(base, base + last_delta, epoch, crc, control, values))
        position = end
    return out


def _record_values(data: bytes, position: int, count: int) -> list[bytes | None]:
    values = []
    for _ in range(count):
        length, position = _varint(data, position)
        end = position + length
        position += 1  # attributes
        _, position = _varint(data, position)  # timestamp delta
        _, position = _varint(data, position)  # offset delta
        key_length, position = _varint(data, position)
        position += max(key_length, 0)
        value_length, position = _varint(data, position)
        values.append(None if value_length < 0 else data[position : position + value_length])
        position = end
    return values


def _varint(data: bytes, position: int) -> tuple[int, int]:
    """A zig-zag varint (Kafka's signed varint/varlong)."""
    raw = shift = 0
    while True:
        byte = data[position]
        position += 1
        raw |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return (raw >> 1) ^ -(raw & 1), position
        shift += 7


def log_matching(logs: dict[int, ReplicaLog], below: int) -> list[str]:
    """Differences between replicas' batches that start below ``below`` (empty: LogMatching holds)."""
    problems = []
    views = {broker: [b.key() for b in log.batches if b.base_offset < below] for broker, log in logs.items()}
    reference_broker, reference = next(iter(views.items()))
    for broker, batches in views.items():
        if batches != reference:
            first = next((i for i, (a, b) in enumerate(zip(batches, reference, strict=False)) if a != b), None)
            if first is None:
                first = min(len(batches), len(reference))
            mine = batches[first] if first < len(batches) else None
            theirs = reference[first] if first < len(reference) else None
            problems.append(
                f"broker {broker} vs {reference_broker}: batch #{first} (base, last, epoch, crc) {mine} != {theirs}"
            )
    return problems


def epoch_conflicts(snapshots: list[dict[int, ReplicaLog]]) -> list[str]:
    """(leader epoch, base offset) positions holding two different batches in any of ``snapshots``."""
    seen: dict[tuple[int, int], set[tuple[int, int, int, int]]] = {}
    where: dict[tuple[int, int], set[int]] = {}
    for snapshot in snapshots:
        for broker, log in snapshot.items():
            for batch in log.batches:
                place = (batch.leader_epoch, batch.base_offset)
                seen.setdefault(place, set()).add(batch.key())
                where.setdefault(place, set()).add(broker)
    return [
        f"epoch {epoch} offset {offset}: {sorted(keys)} on brokers {sorted(where[(epoch, offset)])}"
        for (epoch, offset), keys in sorted(seen.items())
        if len(keys) > 1
    ]
