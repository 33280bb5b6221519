"""Reading a few records of one partition for the console's message browser.

The read is this broker's replica's, as a consumer sees it: up to the high watermark
(read_uncommitted) or the last stable offset (read_committed, which also leaves out records of
aborted transactions, as the consumer does with the aborted-transaction list Fetch returns).
Control batches (transaction markers) are never shown. Keys, values and header values go out
as base64 bytes; the page renders them as text, JSON or hex.
"""

from __future__ import annotations

import base64
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from kbroker.protocol.records import BatchHeader, batch_size_at, iter_records, read_header

if TYPE_CHECKING:
    from kbroker.replication.partition import Partition

JSON = dict[str, Any]
READ_BYTES = 1024 * 1024  # one read's worth; the page asks again from next_offset for more
MAX_RECORDS = 500


def _b64(data: bytes | None) -> str | None:
    return None if data is None else base64.b64encode(data).decode("ascii")


def _whole_batches(data: bytes) -> list[tuple[int, BatchHeader]]:
    """(position, header) of each whole batch in a read (the last one may be cut short)."""
    out = []
    position = 0
    while (size := batch_size_at(data, position)) is not None and position + size <= len(data):
        out.append((position, read_header(data, position)))
        position += size
    return out


def start_offset_for_timestamp(partition: Partition, timestamp_ms: int) -> int:
    """ListOffsets' answer: the first offset whose timestamp is at or after ``timestamp_ms``
    (the log end offset when there is none)."""
    found = partition.log.offset_for_timestamp(timestamp_ms)
    return found[0] if found is not None else partition.log_end_offset


def decode_records(data: bytes, offset: int, bound: int, records: list[JSON], max_records: int,
                   hidden: Callable[[BatchHeader], bool]) -> int | None:
    """Add the records of ``data``'s whole batches from ``offset`` and below ``bound`` to
    ``records`` (up to ``max_records``), leaving out control batches and those ``hidden`` says a
    consumer would not see; the offset after the last batch read (None: no batch reached
    ``offset``)."""
    position = None
    for start, header in _whole_batches(data):
        if header.last_offset < offset:
            continue
        position = header.last_offset + 1
        if hidden(header) or header.is_control:  # hidden sees every batch, in order
            continue
        for record in iter_records(data[start:start + header.size]):
            if offset <= record.offset < bound and len(records) < max_records:
                records.append({
                    "offset": record.offset, "timestamp": record.timestamp, "key": _b64(record.key),
                    "value": _b64(record.value), "leader_epoch": header.partition_leader_epoch,
                    "headers": [{"key": name, "value": _b64(value)} for name, value in record.headers],
                })
        if len(records) >= max_records:
            break
    return position


def answer(records: list[JSON], position: int, bound: int, read_committed: bool, log_start_offset: int) -> JSON:
    """The message browser's answer (``read_from`` is added by a read from another broker)."""
    next_offset = records[-1]["offset"] + 1 if records else position
    return {"records": records, "next_offset": next_offset, "bound": bound,
            "isolation": "read_committed" if read_committed else "read_uncommitted",
            "log_start_offset": log_start_offset, "read_from": None}


def read(partition: Partition, offset: int, max_records: int, read_committed: bool) -> JSON:
    """Up to ``max_records`` records from ``offset`` (raised to the log start offset)."""
    max_records = max(1, min(max_records, MAX_RECORDS))
    bound = partition.last_stable_offset if read_committed else partition.high_watermark
    offset = max(offset, partition.log_start_offset)
    records: list[JSON] = []
    aborted: dict[int, list[tuple[int, int]]] = {}  # producer id -> [(first, last)] aborted ranges
    if read_committed and offset < bound:
        for txn in partition.log.collect_aborted_txns(offset, bound):
            aborted.setdefault(txn.producer_id, []).append((txn.first_offset, txn.last_offset))

    def hidden(header: BatchHeader) -> bool:
        return any(first <= header.base_offset <= last for first, last in aborted.get(header.producer_id, ()))

    position = offset
    while position < bound and len(records) < max_records:
        piece = partition.log.read(position, READ_BYTES, bound, True)
        if piece is None:
            break
        moved = decode_records(piece.segment.read_bytes(piece.position, piece.length), position, bound, records,
                               max_records, hidden)
        if moved is None:
            break
        position = moved
    return answer(records, position, bound, read_committed, partition.log_start_offset)

