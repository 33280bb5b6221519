"""Benchmark payloads: half random bytes, half one repeated byte, never all zeros.

One pool of distinct record values is written to a file that every load generator reads, so
Kafka's ProducerPerformance (``--payload-file``, newline-delimited, decoded as UTF-8) and the
librdkafka driver send the same bytes. To survive ProducerPerformance's UTF-8 decoding each
value byte is 7-bit ASCII: the random half draws from the 126 byte values 0x01..0x7f other
than newline (≈ 6.98 bits of entropy per byte, incompressible for LZ4, which has no entropy
coder), the other half repeats one printable byte per value.
"""

from __future__ import annotations

import os
from pathlib import Path

POOL_SIZE = 2048  # distinct values per pool (ProducerPerformance picks one at random per record)
ALPHABET = bytes(b for b in range(1, 128) if b != 0x0A)


def make_values(record_size: int, count: int = POOL_SIZE) -> list[bytes]:
    """``count`` values of ``record_size`` bytes: a random first half, a repeated-byte second half."""
    random_len = record_size // 2
    raw = os.urandom(random_len * count)
    values = []
    for i in range(count):
        chunk = raw[i * random_len:(i + 1) * random_len]
        random_half = bytes(ALPHABET[b % len(ALPHABET)] for b in chunk)
        fill = bytes([0x61 + i % 26]) * (record_size - random_len)
        values.append(random_half + fill)
    return values


def payload_file(directory: Path, record_size: int) -> Path:
    """The newline-delimited payload file for ``record_size`` in ``directory`` (created once)."""
    path = directory / f"payload-{record_size}.txt"
    if not path.exists():
        directory.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_bytes(b"\n".join(make_values(record_size)))
        tmp.rename(path)
    return path


def read_values(path: Path) -> list[bytes]:
    """The values of a payload file (as ProducerPerformance splits it)."""
    return [v for v in path.read_bytes().split(b"\n") if v]
