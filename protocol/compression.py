"""Decompression of record-batch payloads, used only where Kafka semantics need records.

Produce and Fetch never decompress (batches are stored as produced). The records are read
only for compacted-topic key checks, ListOffsets by timestamp and log compaction.
Codecs follow the batch attribute bits: 1 gzip, 2 snappy, 3 lz4, 4 zstd. Java clients frame
snappy in xerial's stream format, librdkafka sends raw snappy; both are accepted.
"""

from __future__ import annotations

import struct

import cramjam

from .errors import ErrorCode, KafkaError

NONE, GZIP, SNAPPY, LZ4, ZSTD = 0, 1, 2, 3, 4
CODEC_NAMES = {NONE: "none", GZIP: "gzip", SNAPPY: "snappy", LZ4: "lz4", ZSTD: "zstd"}

_XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER_SIZE = 16


def decompress(codec: int, data: bytes | memoryview) -> bytes:
    """Return the uncompressed records section of a batch compressed with ``codec``."""
    try:
        if codec == NONE:
            return bytes(data)
        if codec == GZIP:
            return bytes(cramjam.gzip.decompress(data))
        if codec == SNAPPY:
            return _snappy_decompress(bytes(data))
        if codec == LZ4:
            return bytes(cramjam.lz4.decompress(data))
        if codec == ZSTD:
            return bytes(cramjam.zstd.decompress(data))
    except (cramjam.DecompressionError, ValueError) as exc:
        raise KafkaError(ErrorCode.corrupt_message, f"cannot decompress batch: {exc}") from exc
    raise KafkaError(ErrorCode.unsupported_compression_type, f"unknown compression codec {codec}")


def _snappy_decompress(data: bytes) -> bytes:
    if not data.startswith(_XERIAL_MAGIC):
        return bytes(cramjam.snappy.decompress_raw(data))
    out = bytearray()
    pos = _XERIAL_HEADER_SIZE
    while pos < len(data):
        if len(data) - pos < 4 or data[pos] & 0x80:
            raise KafkaError(ErrorCode.corrupt_message, "xerial snappy chunk length is cut or negative")
        (length,) = struct.unpack_from(">i", data, pos)
        pos += 4
        out += cramjam.snappy.decompress_raw(data[pos : pos + length])
        pos += length
    return bytes(out)
