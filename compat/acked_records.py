"""Numbered records written with acks=all and read back against their acknowledgements.

A record's value is its number (``LABEL_DIGITS`` digits), a space, then padding derived from the
number, so a changed byte or a misplaced record shows. ``RecordingProducer`` keeps every
acknowledgement (offset, number) and every failed delivery; ``read_back`` reads a topic from
offset 0 and tallies what it finds: a record is *lost* when it was acknowledged and is not at its
acknowledged offset, a *duplicate* when its number is read twice, *corrupt* when its value is no
record's value. The full-disk runs (``compat.disk_full``) are built on it.
"""

from __future__ import annotations

import logging
import random
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from confluent_kafka import Consumer, KafkaError, KafkaException, Message, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

RECORD_BYTES = 10_000
LABEL_DIGITS = 10  # a value starts with its record's number in this many digits
# How long a producer keeps retrying a record: the idempotent producer's first failure shows
# this long after the disk fills, so it bounds each run's length.
MESSAGE_TIMEOUT_MS = 5_000
# Outstanding records per producer (2 MB): few are in flight when the disk fills.
MAX_OUTSTANDING = 200
FILL_DEADLINE_S = 120.0
SETTLE_DEADLINE_S = MESSAGE_TIMEOUT_MS / 1000 + 10
READ_DEADLINE_S = 20.0
ACK_DEADLINE_S = 20.0  # for records to be acknowledged where there is room (at the start, after growing)

PRODUCER_MODES: dict[str, dict[str, object]] = {
    # No retries: each delivery report is the broker's own answer, and no record is written twice.
    "plain": {"enable.idempotence": False, "message.send.max.retries": 0},
    # Retries until message.timeout.ms; the broker drops a batch it already has by its sequence.
    "idempotent": {"enable.idempotence": True},
}
ACKNOWLEDGED = "acknowledged"

# Where the clients' own logs go (a named logger: pytest captures it, the command mutes it).
CLIENT_LOG = logging.getLogger("compat.disk_full.librdkafka")


def record_value(index: int) -> bytes:
    """Record ``index``'s value: its number, a space, then padding derived from the number."""
    label = b"%0*d " % (LABEL_DIGITS, index)
    return label + random.Random(index).randbytes(RECORD_BYTES - len(label))


def record_index(value: bytes | None) -> int | None:
    """The number of the record whose value ``value`` is; None when it is no record's value."""
    if value is None or len(value) != RECORD_BYTES or not value[:LABEL_DIGITS].isdigit():
        return None
    index = int(value[:LABEL_DIGITS])
    return index if value == record_value(index) else None


# --- producing --------------------------------------------------------------------------------


class RecordingProducer:
    """A confluent-kafka producer writing numbered records to one single-partition topic, keeping
    every acknowledgement (offset, record number) and every failed delivery (number, error)."""

    def __init__(self, bootstrap: str, topic: str, mode: str) -> None:
        self.topic = topic
        self.mode = mode
        self.producer = Producer({
            "bootstrap.servers": bootstrap,
            "acks": "all",
            "linger.ms": 5,
            "message.timeout.ms": MESSAGE_TIMEOUT_MS,
            "retry.backoff.ms": 50,
            "retry.backoff.max.ms": 200,
            "reconnect.backoff.ms": 50,
            "reconnect.backoff.max.ms": 500,
            "logger": CLIENT_LOG,
            **PRODUCER_MODES[mode],
        })
        self.next_index = 0
        self.acked: list[tuple[int, int]] = []
        self.failed: list[tuple[int, str]] = []

    def _on_delivery(self, err: KafkaError | None, msg: Message) -> None:
        index = int(msg.value()[:LABEL_DIGITS])
        if err is None:
            self.acked.append((msg.offset(), index))
        else:
            self.failed.append((index, err.name()))

    def produce_one(self) -> int:
        """Queue the next record (not waiting for it); its number."""
        index = self.next_index
        self.next_index += 1
        self.producer.produce(self.topic, record_value(index), partition=0, on_delivery=self._on_delivery)
        self.producer.poll(0)
        return index

    def outstanding(self) -> int:
        """Records produced whose delivery report has not come yet."""
        self.producer.poll(0)
        return len(self.producer)

    def settle(self) -> None:
        """Wait for the delivery report of every record produced so far."""
        left = self.producer.flush(SETTLE_DEADLINE_S)
        if left:
            raise TimeoutError(f"{self.topic}: {left} records without a delivery report after {SETTLE_DEADLINE_S} s")

    def failures_from(self, first_index: int) -> Counter[str]:
        """Error names of the failed deliveries of records numbered ``first_index`` and later."""
        return Counter(error for index, error in self.failed if index >= first_index)

    def fill(self) -> Counter[str]:
        """Produce until a delivery fails (the disk is full), let everything outstanding settle,
        and return the failures' error names."""
        first = self.next_index
        failed_before = len(self.failed)
        deadline = time.monotonic() + FILL_DEADLINE_S
        while len(self.failed) == failed_before:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{self.topic}: no delivery failed within {FILL_DEADLINE_S} s")
            if len(self.producer) < MAX_OUTSTANDING:
                self.produce_one()
            else:
                self.producer.poll(0.05)
        self.settle()
        return self.failures_from(first)

    def attempt(self) -> str:
        """Produce one record and wait for its delivery report: "acknowledged" or the error."""
        index = self.produce_one()
        self.settle()
        return next(iter(self.failures_from(index)), ACKNOWLEDGED)

    def top_up(self) -> int:
        """Produce one record at a time until one is refused; the number acknowledged. A broker
        that undoes a failed write frees what the failed batch took, and single records fit there
        again: once one is refused, not even one record fits."""
        acked_before = len(self.acked)
        deadline = time.monotonic() + FILL_DEADLINE_S
        while self.attempt() == ACKNOWLEDGED:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{self.topic}: still writing single records after {FILL_DEADLINE_S} s")
        return len(self.acked) - acked_before

    def acknowledge_more(self, count: int, within_s: float) -> Counter[str]:
        """Produce new records until ``count`` more are acknowledged or ``within_s`` has passed;
        the failures on the way (a broker may refuse a few while it notices there is room)."""
        wanted = len(self.acked) + count
        first = self.next_index
        deadline = time.monotonic() + within_s
        while len(self.acked) < wanted and time.monotonic() < deadline:
            for _ in range(wanted - len(self.acked)):
                self.produce_one()
            self.settle()
        return self.failures_from(first)

    def abandon(self) -> None:
        """After the broker was killed: drop what is queued or in flight, collect the reports."""
        self.producer.purge()
        self.settle()


def create_topics(bootstrap: str, topics: list[str]) -> None:
    """Single-partition topics (replication factor 1: one node)."""
    admin = AdminClient({"bootstrap.servers": bootstrap, "logger": CLIENT_LOG})
    for future in admin.create_topics([NewTopic(topic, 1, 1) for topic in topics]).values():
        future.result(timeout=READ_DEADLINE_S)


def fill_disk(producers: list[RecordingProducer]) -> dict[str, Counter[str]]:
    """Every producer writes until one of its deliveries fails; they write at the same time (so
    each sees the disk fill, not only the first). Their failures by topic."""
    with ThreadPoolExecutor(len(producers)) as pool:
        failures = list(pool.map(RecordingProducer.fill, producers))
    return {p.topic: f for p, f in zip(producers, failures, strict=True)}


# --- reading ----------------------------------------------------------------------------------


@dataclass
class Tally:
    """One read of a topic from offset 0, checked against the acknowledgements so far."""

    acked: int
    read_back: int  # distinct offsets read
    lost: list[int]  # acknowledged offsets that do not hold the acknowledged record
    duplicates: int  # records read more than once (at two offsets, or one offset twice)
    corrupt: int  # values that are no record's value
    high_watermark: int
    stopped_at: int  # the offset the consumer had got to when it finished or gave up
    consumer_errors: list[str]

    @property
    def reached_high_watermark(self) -> bool:
        return self.stopped_at >= self.high_watermark

    @property
    def intact(self) -> bool:
        """Everything acknowledged is there once, nothing corrupt, and the read got to the end."""
        return not self.lost and not self.duplicates and not self.corrupt and self.reached_high_watermark

    def summary(self) -> str:
        """One line: the counts, where the read stopped, what the consumer reported."""
        lost = f"{len(self.lost)} lost" + (f" (offsets {fold(self.lost)})" if self.lost else "")
        end = ("reached the high watermark" if self.reached_high_watermark
               else f"stuck at offset {self.stopped_at} below the high watermark")
        errors = f"; consumer errors: {self.consumer_errors}" if self.consumer_errors else ""
        return (f"{self.acked} acked, {self.read_back} read, {lost}, {self.duplicates} duplicates, "
                f"{self.corrupt} corrupt; {end} {self.high_watermark}{errors}")


def fold(offsets: list[int]) -> str:
    """Sorted offsets as ranges: "6600-6619, 6700"."""
    ranges: list[list[int]] = []
    for offset in offsets:
        if ranges and offset == ranges[-1][1] + 1:
            ranges[-1][1] = offset
        else:
            ranges.append([offset, offset])
    return ", ".join(f"{a}-{b}" if a != b else str(a) for a, b in ranges)


def high_watermark(consumer: Consumer, topic: str, deadline: float) -> int:
    """The partition's high watermark, asking again while the broker cannot answer yet (Kafka
    loading its logs after a restart)."""
    while True:
        try:
            return consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=2)[1]
        except KafkaException:
            if time.monotonic() > deadline:
                raise


def read_back(bootstrap: str, producers: list[RecordingProducer]) -> dict[str, Tally]:
    """Read every producer's topic from offset 0 towards its high watermark (one consumer, CRCs
    checked) and tally what was found against what the producer had acknowledged. A read that
    does not get to the high watermark within the deadline is reported as such, not raised."""
    consumer = Consumer({
        "bootstrap.servers": bootstrap,
        "group.id": "disk-full-reader",  # the client wants one; partitions are assigned, no group joined
        "enable.auto.commit": False,
        "enable.partition.eof": True,
        "auto.offset.reset": "error",  # offset 0 must exist; a reset would hide a problem
        "check.crcs": True,
        "fetch.wait.max.ms": 50,
        "logger": CLIENT_LOG,
    })
    topics = [p.topic for p in producers]
    found: dict[str, list[tuple[int, int | None]]] = {topic: [] for topic in topics}
    errors: dict[str, list[str]] = {topic: [] for topic in topics}
    at = dict.fromkeys(topics, 0)
    try:
        deadline = time.monotonic() + READ_DEADLINE_S
        ends = {topic: high_watermark(consumer, topic, deadline) for topic in topics}
        consumer.assign([TopicPartition(topic, 0, 0) for topic in topics])
        while any(at[topic] < ends[topic] for topic in topics) and time.monotonic() < deadline:
            msg = consumer.poll(0.2)
            if msg is None:
                continue
            error = msg.error()
            if error is None:
                found[msg.topic()].append((msg.offset(), record_index(msg.value())))
                at[msg.topic()] = msg.offset() + 1
            elif error.code() == KafkaError._PARTITION_EOF:
                at[msg.topic()] = msg.offset()
            elif str(error) not in errors.setdefault(msg.topic() or "", []):
                errors[msg.topic() or ""].append(str(error))
    finally:
        consumer.close()
    return {p.topic: tally(p.acked, found[p.topic], ends[p.topic], at[p.topic], errors[p.topic] + errors.get("", []))
            for p in producers}


def tally(acked: list[tuple[int, int]], found: list[tuple[int, int | None]], end: int, stopped_at: int,
          errors: list[str]) -> Tally:
    """Check what a read ``found`` (offset, record number or None) against ``acked``."""
    at_offset: dict[int, int | None] = {}
    repeated_offsets = 0
    for offset, index in found:
        repeated_offsets += offset in at_offset
        at_offset[offset] = index
    numbers = [index for index in at_offset.values() if index is not None]
    return Tally(
        acked=len(acked),
        read_back=len(at_offset),
        lost=sorted(offset for offset, index in acked if at_offset.get(offset) != index),
        duplicates=repeated_offsets + len(numbers) - len(set(numbers)),
        corrupt=len(at_offset) - len(numbers),
        high_watermark=end,
        stopped_at=stopped_at,
        consumer_errors=errors,
    )
