"""Kafka's default partitioner for keyed records (``Utils.murmur2``, positive, modulo the
partition count), so tests can predict where the Java producer or Spark's sink puts a key."""

from __future__ import annotations


def murmur2_partition(key: bytes, partitions: int) -> int:
    """The partition Kafka's default partitioner picks for a key (``Utils.murmur2``)."""
    m, mask = 0x5BD1E995, 0xFFFFFFFF
    h = (0x9747B28C ^ len(key)) & mask
    whole = len(key) & ~3
    for i in range(0, whole, 4):
        k = int.from_bytes(key[i : i + 4], "little")
        k = (k * m) & mask
        k ^= k >> 24
        k = (k * m) & mask
        h = ((h * m) & mask) ^ k
    tail = key[whole:]
    if len(tail) == 3:
        h ^= tail[2] << 16
    if len(tail) >= 2:
        h ^= tail[1] << 8
    if tail:
        h ^= tail[0]
        h = (h * m) & mask
    h ^= h >> 13
    h = (h * m) & mask
    h ^= h >> 15
    return (h & 0x7FFFFFFF) % partitions
