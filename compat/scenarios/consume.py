"""Fetch as consumers see it: start positions, offsets out of range with each reset policy,
reading below the log start, fetch size limits (KIP-74), min-bytes waits and long-poll
wake-ups, seeks by timestamp, several partitions, isolation levels, mixed codecs."""

from __future__ import annotations

import threading
import time
from typing import Any

from compat.clients.base import FetchSettings, Rec
from compat.scenarios import BASE_TS, Run, scenario

C = {"consume"}


def ten(run: Run, **kwargs: Any) -> str:
    """A topic holding records 0-9 (set up by the harness, timestamps BASE_TS + i s)."""
    t = run.topic(**kwargs)
    run.harness.put(t, [Rec(f"v{i}".encode(), f"k{i}".encode(), (), 0, BASE_TS + i * 1000) for i in range(10)])
    return t


@scenario("consume/from-offset", needs=C)
def from_offset(run: Run) -> Any:
    """Start at offset 4 of 10: records 4-9."""
    t = ten(run)
    return run.client.consume(t, [0], 4, until={0: 10})


@scenario("consume/last-record", needs=C)
def last_record(run: Run) -> Any:
    """Start at offset 9 of 10: exactly the last record."""
    t = ten(run)
    return run.client.consume(t, [0], 9, until={0: 10})


@scenario("consume/from-latest", needs=C)
def from_latest(run: Run) -> Any:
    """Start at the end: nothing to read."""
    t = ten(run)
    return run.client.consume(t, [0], "latest", until={0: 10})


@scenario("consume/first-records", needs=C)
def first_records(run: Run) -> Any:
    """Read only the first three records."""
    t = ten(run)
    return run.client.consume(t, [0], "earliest", max_records=3)


@scenario("consume/empty-topic", needs=C)
def empty_topic(run: Run) -> Any:
    """An empty partition: nothing to read from the beginning."""
    return run.client.consume(run.topic(), [0], "earliest", until={0: 0})


@scenario("consume/out-of-range-earliest", needs=C | {"consume.reset"})
def out_of_range_earliest(run: Run) -> Any:
    """Offset 100 of 10 with auto.offset.reset=earliest: the consumer restarts at 0."""
    t = ten(run)
    return run.client.consume(t, [0], 100, max_records=10, settings=FetchSettings(reset="earliest"))


@scenario("consume/out-of-range-latest", needs=C | {"consume.reset", "consume.position"})
def out_of_range_latest(run: Run) -> Any:
    """Offset 100 of 10 with auto.offset.reset=latest: the consumer moves to the end (10)."""
    t = ten(run)
    return run.client.consume(t, [0], 100, until_moved=True, settings=FetchSettings(reset="latest"))


@scenario("consume/out-of-range-none", needs=C | {"consume.reset"})
def out_of_range_none(run: Run) -> Any:
    """Offset 100 of 10 with no reset policy: the client reports OFFSET_OUT_OF_RANGE."""
    t = ten(run)
    return run.client.consume(t, [0], 100, max_records=1, settings=FetchSettings(reset="none"), timeout_s=10)


@scenario("consume/below-log-start", needs=C | {"consume.reset"})
def below_log_start(run: Run) -> Any:
    """After DeleteRecords up to 5, offset 0 is out of range; reset earliest reads 5-9."""
    t = ten(run)
    run.harness.delete_records(t, 0, 5)
    return run.client.consume(t, [0], 0, until={0: 10}, settings=FetchSettings(reset="earliest"))


@scenario("consume/earliest-after-delete-records", needs=C)
def earliest_after_delete_records(run: Run) -> Any:
    """After DeleteRecords up to 5, "from the beginning" starts at 5."""
    t = ten(run)
    run.harness.delete_records(t, 0, 5)
    return run.client.consume(t, [0], "earliest", until={0: 10})


@scenario("consume/tiny-fetch-sizes", needs=C | {"consume.fetch"})
def tiny_fetch_sizes(run: Run) -> Any:
    """fetch.max.bytes 1000 (librdkafka's minimum) and max.partition.fetch.bytes 100 with
    500-byte batches still make progress: a fetch returns at least one whole batch (KIP-74)."""
    t = run.topic()
    run.harness.put(t, [Rec(f"r{i}".encode().ljust(500, b"-"), None, (), 0, BASE_TS) for i in range(12)], sync=True)
    return run.client.consume(t, [0], "earliest", until={0: 12},
                              settings=FetchSettings(max_bytes=1000, partition_max_bytes=100))  # fmt: skip


@scenario("consume/min-bytes-waits", needs=C | {"consume.fetch"})
def min_bytes_waits(run: Run) -> Any:
    """fetch.min.bytes above what is there: the broker holds the fetch for fetch.max.wait (1.5 s),
    then answers with what it has."""
    t = run.topic()
    run.harness.put(t, [Rec(b"lonely", None, (), 0, BASE_TS)])
    started = time.monotonic()
    got = run.client.consume(t, [0], "earliest", until={0: 1},
                             settings=FetchSettings(min_bytes=1_000_000, max_wait_ms=1500))  # fmt: skip
    elapsed = time.monotonic() - started
    return {"read": got, "held_at_least_1.2s": elapsed >= 1.2, "answered_within_10s": elapsed < 10}


@scenario("consume/long-poll-wakes", needs=C | {"consume.fetch"}, clients=(
    "kafka-python", "aiokafka", "confluent", "java"))
def long_poll_wakes(run: Run) -> Any:
    """A fetch waiting at the end (fetch.max.wait 8 s) answers as soon as a record arrives.
    (kcat -e exits at the end instead of waiting; the console consumer's close waits for its
    next long poll, hiding when the record came.)"""
    t = run.topic()
    run.harness.put(t, [Rec(b"first", None, (), 0, BASE_TS)])
    producer = threading.Timer(0.5, lambda: run.harness.put(t, [Rec(b"second", None, (), 0, BASE_TS + 1)]))
    started = time.monotonic()
    producer.start()
    try:
        got = run.client.consume(t, [0], 1, until={0: 2}, settings=FetchSettings(min_bytes=1, max_wait_ms=8000))
    finally:
        producer.join()
    return {"read": got, "woke_before_max_wait": time.monotonic() - started < 6}


@scenario("consume/seek-timestamp", needs=C | {"consume.timestamp"})
def seek_timestamp(run: Run) -> Any:
    """Start at the first record with timestamp >= BASE+3.5 s: records 4-9."""
    t = ten(run)
    return run.client.consume(t, [0], {"timestamp": BASE_TS + 3500}, until={0: 10})


@scenario("consume/seek-timestamp-past-end", needs=C | {"consume.timestamp"})
def seek_timestamp_past_end(run: Run) -> Any:
    """A timestamp after every record: the consumer starts at the end."""
    t = ten(run)
    return run.client.consume(t, [0], {"timestamp": BASE_TS + 60_000}, until={0: 10})


@scenario("consume/partitions", needs=C | {"consume.multi"})
def partitions(run: Run) -> Any:
    """Three partitions read together; records sorted by (partition, offset)."""
    t = run.topic(partitions=3)
    run.harness.put(t, [Rec(f"p{i % 3}-{i}".encode(), None, (), i % 3, BASE_TS + i) for i in range(9)])
    got = run.client.consume(t, [0, 1, 2], "earliest", until={0: 3, 1: 3, 2: 3})
    if isinstance(got, dict) and isinstance(got.get("records"), list):
        got = {**got, "records": sorted(got["records"], key=lambda r: (r["partition"], r["offset"]))}
    return got


@scenario("consume/read-committed", needs=C | {"consume.fetch"})
def read_committed(run: Run) -> Any:
    """isolation.level=read_committed on a topic without transactions reads everything."""
    t = ten(run)
    return run.client.consume(t, [0], "earliest", until={0: 10}, settings=FetchSettings(isolation="read_committed"))


@scenario("consume/mixed-codecs", needs=C)
def mixed_codecs(run: Run) -> Any:
    """Batches compressed with different codecs in one partition read back in order."""
    t = run.topic()
    n = 0
    for codec in ("gzip", "none", "zstd", "lz4", "snappy"):
        run.harness.put(t, [Rec(f"{codec}-{i}".encode(), None, (), 0, BASE_TS + n + i) for i in range(3)], codec=codec)
        n += 3
    return run.client.consume(t, [0], "earliest", until={0: n})
