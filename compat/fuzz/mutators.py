"""Turning a well-formed request frame into a fuzz case: the mutation operators.

``mutate(frame, layout, rng, limits)`` applies one primary operator (or none, for a few
percent of cases: valid requests keep the broker's state moving), sometimes a second,
byte-level one, and sometimes a wrong size prefix, and returns what goes on the wire.

Operators that aim use the frame's ``layout`` (see ``layout.py``):

- ``length`` / ``count``: a string, bytes or records length, or an array count, set to -1, -2,
  0, off by one, the bytes left, or the type's extremes; compact ones re-encoded as varints up
  to 2**35-1.
- ``varint``: a compact varint re-encoded overlong, unterminated or over five bytes.
- ``tagged_fields``: unknown tags added (the broker must skip them), tags duplicated or out of
  order, a section count or a field size that runs past the data, a known tag full of junk.
- ``number``: a fixed-width field set to 0, -1, off by one or its type's extremes.
- ``partitions``: CreateTopics' ``num_partitions`` / CreatePartitions' ``count`` (and replication
  factors) set to the values that matter: none, negative, 1,000, just past Kafka's limit of
  10,000 new partitions per request, far past it, 2**31-1.
- ``version``: the header's API version moved out of range or the API key to one not served.
- ``null_marker`` / ``uuid``: nullable-struct markers and topic ids.
- ``batch_header``, ``batch_records``, ``compressed``, ``batch_crc``, ``batch_cut``,
  ``batch_twice``: the v2 record batches of a Produce request. Header fields, records and
  compressed payloads are changed and the CRC32C is recomputed (so the batch passes the CRC
  check and reaches deeper validation), except in ``batch_crc`` and a quarter of
  ``batch_header`` cases, which leave it stale on purpose.

Byte-level operators need no layout: ``bit_flip``, ``byte_set``, ``truncate``,
``insert_delete``. ``size_prefix`` then may declare a size that is off by one, zero,
negative, at or over ``socket.request.max.bytes``, or larger than what is sent.

``Limits`` keeps two families out of a run on request: partition counts above a ceiling and
declared sizes near ``socket.request.max.bytes`` (both are known kbroker problems being fixed
in issue 13). Requests that would add between 1,001 and 10,000 partitions are always drawn
again: they are legal, so each one would create thousands of directories on both brokers, and
measuring that is the bounded-work test's job, not the protocol fuzzer's.
"""

from __future__ import annotations

import random
import struct
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

from crc32c import crc32c
from kbroker.protocol.compression import decompress
from kbroker.protocol.errors import KafkaError
from kbroker.protocol.records import ATTRIBUTES_OFFSET, CRC_OFFSET, HEADER_SIZE, LOG_OVERHEAD

from compat.fuzz.generate import COMPRESSORS
from compat.fuzz.layout import (
    COUNT,
    LENGTH,
    NULL_MARKER,
    NUMBER,
    RECORDS,
    TAG_SECTION,
    TAGGED_FIELD,
    UUID,
    Layout,
    LayoutError,
    Span,
    encode_uvarint,
    read_uvarint,
    walk,
)

CREATE_TOPICS, CREATE_PARTITIONS = 19, 37
KAFKA_PARTITIONS_PER_REQUEST = 10_000  # Kafka answers POLICY_VIOLATION for more new partitions
LEGAL_PARTITIONS_CAP = 1_000  # more new partitions than this, within Kafka's limit: drawn again
# CreatePartitions' count is the new total: it adds (count - current) partitions, and the
# runner keeps every topic under LEGAL_PARTITIONS_CAP plus a few, so a total up to this bound
# could still add a legal (heavy) number.
HEAVY_TOTAL_BOUND = KAFKA_PARTITIONS_PER_REQUEST + 2 * LEGAL_PARTITIONS_CAP
PARTITION_COUNTS = {  # num_partitions of CreateTopics, count of CreatePartitions
    CREATE_TOPICS: [-2, -1, 0, 1, 4, LEGAL_PARTITIONS_CAP, KAFKA_PARTITIONS_PER_REQUEST + 1, 100_000, 2**31 - 1],
    CREATE_PARTITIONS: [-2, -1, 0, 1, 4, LEGAL_PARTITIONS_CAP, HEAVY_TOTAL_BOUND + 1, 100_000, 2**31 - 1],
}
REPLICATION_FACTORS = [-2, -1, 0, 2, 3, 2**15 - 1, -(2**15)]
DEFAULT_MAX_REQUEST_BYTES = 104_857_600  # socket.request.max.bytes
UNMUTATED_SHARE = 0.04
SECOND_OPERATOR_SHARE = 0.25
SIZE_PREFIX_SHARE = 0.08
_SIGNED = {1: ">b", 2: ">h", 4: ">i", 8: ">q"}
_BOUNDS = {w: (-(2 ** (8 * w - 1)), 2 ** (8 * w - 1) - 1) for w in (1, 2, 4, 8)}


@dataclass(frozen=True)
class Limits:
    """What a run leaves out: ``max_partitions`` (None: counts above Kafka's limit are drawn
    too) and ``max_declared_size`` (None: size prefixes up to and past the maximum)."""

    max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES
    max_partitions: int | None = None
    max_declared_size: int | None = None


@dataclass(frozen=True)
class Mutated:
    """A mutated frame: the bytes after the size prefix, the size prefix, and the operators."""

    frame: bytes
    declared: int
    operators: tuple[str, ...]

    @property
    def wire(self) -> bytes:
        return struct.pack(">i", self.declared) + self.frame


Operator = Callable[[bytearray, Layout, random.Random], bytearray | None]


def _clamp(value: int, width: int) -> int:
    low, high = _BOUNDS[width]
    return max(low, min(high, value))


def _splice(frame: bytearray, span: Span, new: bytes) -> bytearray:
    return frame[: span.start] + new + frame[span.end :]


def _set_number(frame: bytearray, span: Span, value: int) -> bytearray:
    struct.pack_into(_SIGNED[span.width], frame, span.start, _clamp(value, span.width))
    return frame


def _length_values(span: Span, frame_length: int, rng: random.Random) -> int:
    """A new (decoded) length or count for ``span``: null, off by one, the rest of the frame, extremes."""
    left = frame_length - span.end
    choices = [-1, -2, 0, span.value - 1, span.value + 1, left, left + 1, 2**31 - 1, -(2**31)]
    if span.compact:
        choices += [2**32 - 2, 2**35 - 2]  # the largest values five varint bytes can carry
    return rng.choice(choices)


def _encode_length(span: Span, value: int) -> bytes:
    if span.compact:
        return encode_uvarint(max(value + 1, 0))
    return struct.pack(_SIGNED[span.width], _clamp(value, span.width))


# --- aimed operators ----------------------------------------------------------------------------


def op_prefix(frame: bytearray, layout: Layout, rng: random.Random, kind: str) -> bytearray | None:
    """A length (``kind`` LENGTH) or an array count (COUNT) set to a value it should not have."""
    spans = layout.of_kind(kind)
    if not spans:
        return None
    span = rng.choice(spans)
    return _splice(frame, span, _encode_length(span, _length_values(span, len(frame), rng)))


def op_varint(frame: bytearray, layout: Layout, rng: random.Random) -> bytearray | None:
    spans = [s for s in layout.spans if s.compact]
    if not spans:
        return None
    span = rng.choice(spans)
    raw = span.value if span.kind == TAG_SECTION else span.value + 1
    form = rng.randrange(4)
    if form == 0:  # overlong: the same value padded with continuation groups
        groups = bytearray(encode_uvarint(raw))
        groups[-1] |= 0x80
        new = bytes(groups) + b"\x80" * rng.randint(0, 4) + b"\x00"
    elif form == 1:  # unterminated: every byte says "more follows"
        new = b"\xff" * rng.randint(1, 10)
    elif form == 2:  # the largest five-byte value
        new = b"\xff\xff\xff\xff\x0f"
    else:  # longer than any int32 varint may be
        new = b"\x80" * 9 + b"\x01"
    return _splice(frame, span, new)


def _tagged_field(tag: int, data: bytes) -> bytes:
    return encode_uvarint(tag) + encode_uvarint(len(data)) + data


def _fields_of(layout: Layout, section: Span) -> list[Span]:
    """The tagged fields of one section: contiguous from the end of its count."""
    by_start = {s.start: s for s in layout.of_kind(TAGGED_FIELD)}
    found, pos = [], section.end
    for _ in range(section.value):
        field = by_start[pos]
        found.append(field)
        pos = field.end
    return found


def op_tagged_fields(frame: bytearray, layout: Layout, rng: random.Random) -> bytearray | None:
    sections = layout.of_kind(TAG_SECTION)
    if not sections:
        return None
    section = rng.choice(sections)
    fields_in = _fields_of(layout, section)
    form = rng.randrange(5)
    if form == 0 or (form >= 3 and not fields_in):  # an unknown tag: legal, the broker must skip it
        data = bytes(rng.randrange(256) for _ in range(rng.randrange(8)))
        tag = rng.choice([7, 100, 2**14, 2**31 - 1])
        return _splice(frame, section, encode_uvarint(section.value + 1) + _tagged_field(tag, data))
    if form == 1:  # more fields announced than present
        return _splice(frame, section, encode_uvarint(section.value + rng.choice([1, 2, 2**31])))
    if form == 2:  # the section's count gone; the field is read as whatever follows
        return _splice(frame, section, encode_uvarint(0) if section.value else encode_uvarint(1))
    field = rng.choice(fields_in)
    tag, after_tag = read_uvarint(frame, field.start, field.end)
    size, after_size = read_uvarint(frame, after_tag, field.end)
    if form == 3:  # duplicated (and so out of order after the next one)
        grown = frame[: field.end] + frame[field.start : field.end] + frame[field.end :]
        return _splice(grown, section, encode_uvarint(section.value + 1))
    # A known tag whose size or data is wrong.
    if rng.random() < 0.5:
        new_size = rng.choice([size + 1, max(size - 1, 0), 2**31 - 1])
        return frame[:after_tag] + encode_uvarint(new_size) + frame[after_size:]
    junk = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 12)))
    return frame[: field.start] + _tagged_field(tag, junk) + frame[field.end :]


def op_number(frame: bytearray, layout: Layout, rng: random.Random) -> bytearray | None:
    aimed_elsewhere = _partition_spans(layout)  # the partitions operator owns these
    spans = [s for s in layout.of_kind(NUMBER) if not s.path.startswith("header.") and s not in aimed_elsewhere]
    if not spans:
        return None
    span = rng.choice(spans)
    low, high = _BOUNDS[span.width]
    value = rng.choice([0, -1, 1, span.value - 1, span.value + 1, low, high, rng.randint(low, high)])
    return _set_number(frame, span, value)


def _partition_spans(layout: Layout) -> list[Span]:
    if layout.api_key == CREATE_TOPICS:
        return layout.named("num_partitions")
    if layout.api_key == CREATE_PARTITIONS:
        return layout.named("count")
    return []


def op_partitions(frame: bytearray, layout: Layout, rng: random.Random) -> bytearray | None:
    counts = _partition_spans(layout)
    factors = layout.named("replication_factor")
    if not counts and not factors:
        return None
    if counts and (not factors or rng.random() < 0.8):
        return _set_number(frame, rng.choice(counts), rng.choice(PARTITION_COUNTS[layout.api_key]))
    return _set_number(frame, rng.choice(factors), rng.choice(REPLICATION_FACTORS))


def op_version(frame: bytearray, layout: Layout, rng: random.Random) -> bytearray | None:
    if rng.random() < 0.75:
        version = layout.api_version
        return _set_number(frame, layout.spans[1], rng.choice([version - 1, version + 1, version + 10, -1, 2**15 - 1]))
    # Keys Kafka 4 no longer serves (LeaderAndIsr, StopReplica, ...), inter-controller ones, none at all.
    return _set_number(frame, layout.spans[0], rng.choice([4, 5, 6, 7, 52, 55, 57, 76, 1000, -1, 2**15 - 1]))


def op_null_marker(frame: bytearray, layout: Layout, rng: random.Random) -> bytearray | None:
    spans = layout.of_kind(NULL_MARKER)
    if not spans:
        return None
    return _set_number(frame, rng.choice(spans), rng.choice([-1, 1, 0, 2, -128, 127]))


def op_uuid(frame: bytearray, layout: Layout, rng: random.Random) -> bytearray | None:
    spans = layout.of_kind(UUID)
    if not spans:
        return None
    span = rng.choice(spans)
    new = rng.choice([bytes(16), b"\xff" * 16, rng.randbytes(16), b"\x00" * 15 + b"\x01"])
    return _splice(frame, span, new)


# --- record batches -------------------------------------------------------------------------------

# Batch header fields: (offset, struct format) of each one a mutation may set.
BATCH_FIELDS = {
    "base_offset": (0, ">q"), "batch_length": (8, ">i"), "partition_leader_epoch": (12, ">i"),
    "magic": (16, ">b"), "attributes": (21, ">h"), "last_offset_delta": (23, ">i"),
    "base_timestamp": (27, ">q"), "max_timestamp": (35, ">q"), "producer_id": (43, ">q"),
    "producer_epoch": (51, ">h"), "base_sequence": (53, ">i"), "record_count": (57, ">i"),
}  # fmt: skip
# attribute values: each codec (5-7 unknown), LogAppendTime, transactional, control, delete horizon
ATTRIBUTE_VALUES = [0, 1, 2, 3, 4, 5, 6, 7, 0x08, 0x10, 0x20, 0x30, 0x40, 0x7F, -1]


def _batches(records: bytes) -> list[tuple[int, int]]:
    """(position, size) of each batch in a record set, stopping at the first that does not fit."""
    found, pos = [], 0
    while len(records) - pos >= HEADER_SIZE:
        (length,) = struct.unpack_from(">i", records, pos + 8)
        size = length + LOG_OVERHEAD
        if length < HEADER_SIZE - LOG_OVERHEAD or pos + size > len(records):
            break
        found.append((pos, size))
        pos += size
    return found


def fix_crc(batch: bytearray) -> None:
    """Recompute a batch's CRC32C over what it holds now (attributes to the end)."""
    struct.pack_into(">I", batch, CRC_OFFSET, crc32c(bytes(batch[ATTRIBUTES_OFFSET:])))


def _fix_length(batch: bytearray) -> None:
    struct.pack_into(">i", batch, 8, len(batch) - LOG_OVERHEAD)


def _with_records(frame: bytearray, layout: Layout, records: Span, new: bytes) -> bytearray:
    length = layout.records_length(records)
    return frame[: length.start] + _encode_length(length, len(new)) + new + frame[records.end :]


def _flip_bits(data: bytearray, rng: random.Random, flips: int) -> None:
    for _ in range(flips):
        data[rng.randrange(len(data))] ^= 1 << rng.randrange(8)


def _mutate_records_body(data: bytearray, rng: random.Random) -> bytearray:
    """Break the records inside a batch: bits, a varint length made huge or negative, a cut."""
    if not data:
        return bytearray(b"\x01")
    form = rng.randrange(3)
    if form == 0:
        _flip_bits(data, rng, rng.randint(1, 3))
        return data
    if form == 1:  # the zig-zag varint at a random record position: length/key/value sizes
        pos = rng.randrange(len(data))
        varint = rng.choice([b"\x01", b"\xfe\xff\xff\xff\x0f", b"\xff\xff\xff\xff\x0f", b"\x80" * 10])
        return data[:pos] + varint + data[pos + 1 :]
    return data[: rng.randrange(len(data))]


def op_batch(frame: bytearray, layout: Layout, rng: random.Random, form: str) -> bytearray | None:
    spans = layout.of_kind(RECORDS)
    if not spans:
        return None
    records_span = rng.choice(spans)
    records = bytes(frame[records_span.start : records_span.end])
    batches = _batches(records)
    if not batches:
        return None
    pos, size = rng.choice(batches)
    batch = bytearray(records[pos : pos + size])
    codec = struct.unpack_from(">h", batch, ATTRIBUTES_OFFSET)[0] & 0x07
    fixed_crc = True
    if form == "batch_header":
        name, (offset, fmt) = rng.choice(list(BATCH_FIELDS.items()))
        width = struct.calcsize(fmt)
        (current,) = struct.unpack_from(fmt, batch, offset)
        low, high = _BOUNDS[width]
        candidates = [0, -1, 1, current - 1, current + 1, low, high]
        if name == "attributes":
            candidates = ATTRIBUTE_VALUES
        elif name == "magic":
            candidates = [0, 1, 3, -1]
        struct.pack_into(fmt, batch, offset, _clamp(rng.choice(candidates), width))
        fixed_crc = rng.random() < 0.75
    elif form == "batch_records":
        body = bytearray(batch[HEADER_SIZE:])
        if codec in COMPRESSORS:
            try:
                inner = bytearray(decompress(codec, bytes(body)))
            except KafkaError:
                return None
            body = bytearray(COMPRESSORS[codec](bytes(_mutate_records_body(inner, rng))))
        else:
            body = _mutate_records_body(body, rng)
        batch = batch[:HEADER_SIZE] + body
        _fix_length(batch)
    elif form == "compressed":
        if codec not in COMPRESSORS:
            return None
        if rng.random() < 0.5:  # the compressed stream itself damaged
            body = bytearray(batch[HEADER_SIZE:])
            if rng.random() < 0.5 and len(body) > 1:
                body = body[: rng.randrange(1, len(body))]
            else:
                _flip_bits(body, rng, rng.randint(1, 4))
            batch = batch[:HEADER_SIZE] + body
            _fix_length(batch)
        else:  # the attributes name another codec than the one that compressed the records
            other = rng.choice([c for c in (0, 1, 2, 3, 4, 5, 7) if c != codec])
            (attributes,) = struct.unpack_from(">h", batch, ATTRIBUTES_OFFSET)
            struct.pack_into(">h", batch, ATTRIBUTES_OFFSET, (attributes & ~0x07) | other)
    elif form == "batch_crc":
        batch[CRC_OFFSET + rng.randrange(4)] ^= 1 << rng.randrange(8)
        fixed_crc = False
    elif form == "batch_cut":
        cut = rng.randrange(1, size)
        new = records[: pos + cut]
        return _with_records(frame, layout, records_span, new)
    elif form == "batch_twice":
        return _with_records(frame, layout, records_span, records[: pos + size] + records[pos:])
    if fixed_crc:
        fix_crc(batch)
    return _with_records(frame, layout, records_span, records[:pos] + bytes(batch) + records[pos + size :])


# --- byte-level operators -------------------------------------------------------------------------


def op_bit_flip(frame: bytearray, rng: random.Random) -> bytearray:
    _flip_bits(frame, rng, rng.randint(1, 4))
    return frame


def op_byte_set(frame: bytearray, rng: random.Random) -> bytearray:
    pos = rng.randrange(len(frame))
    width = min(rng.choice([1, 1, 2, 4]), len(frame) - pos)
    fill = rng.choice([0x00, 0xFF, 0x7F, 0x80, 0x01])
    frame[pos : pos + width] = bytes([fill]) * width
    return frame


def op_truncate(frame: bytearray, rng: random.Random) -> bytearray:
    return frame[: rng.randrange(len(frame))]


def op_insert_delete(frame: bytearray, rng: random.Random) -> bytearray:
    pos = rng.randrange(len(frame) + 1)
    if rng.random() < 0.5:
        return frame[:pos] + rng.randbytes(rng.randint(1, 16)) + frame[pos:]
    return frame[:pos] + frame[pos + rng.randint(1, 16) :]


BYTE_OPERATORS: dict[str, Callable[[bytearray, random.Random], bytearray]] = {
    "bit_flip": op_bit_flip, "byte_set": op_byte_set, "truncate": op_truncate, "insert_delete": op_insert_delete,
}  # fmt: skip
AIMED_OPERATORS: dict[str, Operator] = {
    "length": partial(op_prefix, kind=LENGTH), "count": partial(op_prefix, kind=COUNT), "varint": op_varint,
    "tagged_fields": op_tagged_fields, "number": op_number, "partitions": op_partitions, "version": op_version,
    "null_marker": op_null_marker, "uuid": op_uuid,
    **{form: partial(op_batch, form=form)
       for form in ("batch_header", "batch_records", "compressed", "batch_crc", "batch_cut", "batch_twice")},
}  # fmt: skip
# How often each operator is drawn (among those that apply to the frame).
WEIGHTS = {
    "bit_flip": 10, "byte_set": 5, "truncate": 6, "insert_delete": 4, "length": 8, "count": 8, "varint": 4,
    "tagged_fields": 6, "number": 10, "partitions": 30, "version": 4, "null_marker": 3, "uuid": 2,
    "batch_header": 20, "batch_records": 12, "compressed": 12, "batch_crc": 3, "batch_cut": 3, "batch_twice": 3,
}  # fmt: skip


def _size_prefix(length: int, rng: random.Random, limits: Limits) -> int:
    top = limits.max_request_bytes
    while True:
        declared = rng.choice([length - 1, length + 1, length + 4096, 0, 1, 4, -1, -(2**31), 2**31 - 1,
                               top - 1, top, top + 1])
        if limits.max_declared_size is None or declared <= limits.max_declared_size or declared > top:
            return declared


def partition_counts_allowed(frame: bytes, limits: Limits) -> bool:
    """False when the frame, as a broker would read it, asks for a partition count this run
    leaves out (see the module docstring)."""
    if len(frame) < 2 or struct.unpack_from(">h", frame, 0)[0] not in (CREATE_TOPICS, CREATE_PARTITIONS):
        return True
    try:
        layout = walk(frame, trailing_ok=True)
    except LayoutError:
        return True  # undecodable: refused before anything is created
    ceiling = limits.max_partitions
    heavy_up_to = KAFKA_PARTITIONS_PER_REQUEST if layout.api_key == CREATE_TOPICS else HEAVY_TOTAL_BOUND
    for span in _partition_spans(layout):
        if LEGAL_PARTITIONS_CAP < span.value <= heavy_up_to:
            return False
        if ceiling is not None and span.value > ceiling:
            return False
    return True


def mutate(frame: bytes, layout: Layout | None, rng: random.Random, limits: Limits) -> Mutated:
    """One case made from a well-formed ``frame`` (its ``layout`` or None); deterministic in ``rng``."""
    for _attempt in range(20):
        mutated = _mutate_once(frame, layout, rng, limits)
        as_read = mutated.frame[: max(mutated.declared, 0)]
        if partition_counts_allowed(as_read, limits):
            return mutated
    return Mutated(frame, len(frame), ())


def _mutate_once(frame: bytes, layout: Layout | None, rng: random.Random, limits: Limits) -> Mutated:
    if rng.random() < UNMUTATED_SHARE:
        return Mutated(frame, len(frame), ())
    operators: list[str] = []
    data = bytearray(frame)
    names = list(BYTE_OPERATORS)
    if layout is not None:
        names += list(AIMED_OPERATORS)
    while True:  # an aimed operator may not apply (no such field): draw again
        name = rng.choices(names, weights=[WEIGHTS[n] for n in names])[0]
        if name in BYTE_OPERATORS:
            data = BYTE_OPERATORS[name](data, rng)
            break
        assert layout is not None
        result = AIMED_OPERATORS[name](data, layout, rng)
        if result is not None:
            data = result
            break
    operators.append(name)
    if data and rng.random() < SECOND_OPERATOR_SHARE:
        second = rng.choice(list(BYTE_OPERATORS))
        data = BYTE_OPERATORS[second](data, rng)
        operators.append(second)
    declared = len(data)
    if rng.random() < SIZE_PREFIX_SHARE:
        declared = _size_prefix(len(data), rng, limits)
        operators.append("size_prefix")
    return Mutated(bytes(data), declared, tuple(operators))
