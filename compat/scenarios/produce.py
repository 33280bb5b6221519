"""Produce: every codec, headers, null/empty keys and values, binary data, size limits,
acks 0/1/all, idempotence, CreateTime/LogAppendTime, timestamp bounds, unknown topics and
partitions, several partitions, many and large records. Each produce is read back."""

from __future__ import annotations

import hashlib
import time
from typing import Any

from compat.clients.base import Rec
from compat.scenarios import BASE_TS, HOUR_MS, Run, scenario

PC = {"produce", "consume"}
CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
# Client settings that let a produce fail fast (the defaults wait up to a minute).
FAIL_FAST = {
    "kafka-python": {"max_block_ms": 1000, "delivery_timeout_ms": 1500, "request_timeout_ms": 1000},
    "aiokafka": {"request_timeout_ms": 1000},
    "confluent": {"message.timeout.ms": 1000},
    "kcat": {"message.timeout.ms": "1000"},
    "java": {"max.block.ms": "1000", "delivery.timeout.ms": "1500", "request.timeout.ms": "1000"},
    "java-cli": {"max.block.ms": "1000", "delivery.timeout.ms": "1500", "request.timeout.ms": "1000"},
    "franz-go": {"delivery.timeout.ms": "1500", "request.timeout.ms": "1000"},
}
# Client settings that let a record above the broker's message.max.bytes leave the client.
BIG_REQUESTS = {
    "kafka-python": {"max_request_size": 4_000_000},
    "aiokafka": {"max_request_size": 4_000_000},
    "confluent": {"message.max.bytes": 4_000_000},
    "kcat": {"message.max.bytes": "4000000"},
    "java": {"max.request.size": "4000000"},
    "java-cli": {"max.request.size": "4000000"},
    "franz-go": {"max.request.size": "4000000"},
}


def read_all(run: Run, topic: str, partitions: int = 1) -> Any:
    """Everything in the topic, read by the client under test from the beginning."""
    ends = {p: run.harness.offsets(topic, p)[1] for p in range(partitions)}
    got = run.client.consume(topic, list(range(partitions)), "earliest", until=ends)
    if isinstance(got, dict) and isinstance(got.get("records"), list):
        got = {**got, "records": sorted(got["records"], key=lambda r: (r["partition"], r["offset"]))}
    return got


def digest(got: Any) -> Any:
    """A compact view of many consumed records: count, offsets contiguous, value hash."""
    if not isinstance(got, dict) or not isinstance(got.get("records"), list):
        return got
    records = got["records"]
    values = "\n".join(str(r["value"]) for r in records).encode()
    return {"count": len(records), "offsets": [records[0]["offset"], records[-1]["offset"]] if records else [],
            "contiguous": [r["offset"] for r in records] == list(range(len(records))),
            "values_sha256": hashlib.sha256(values).hexdigest()[:16],
            "others": {k: v for k, v in got.items() if k != "records"}}  # fmt: skip


def _codec(codec: str) -> None:
    @scenario(f"produce/codec-{codec}", needs=PC, doc=f"20 keyed records with a header, compressed with {codec}, "
              "read back.")  # fmt: skip
    def run_codec(run: Run) -> Any:
        t = run.topic()
        records = [Rec(f"value-{i}-{codec}".encode() * 3, f"k{i}".encode(), (("codec", codec.encode()),), 0,
                       run.ts(i)) for i in range(20)]  # fmt: skip
        return {"produce": run.client.produce(t, records, codec=codec), "read": read_all(run, t)}


for _c in CODECS:
    _codec(_c)


@scenario("produce/headers", needs=PC | {"produce.headers"})
def headers(run: Run) -> Any:
    """Several headers, repeated header keys, empty header values, non-ASCII header keys."""
    t = run.topic()
    sets = [(), (("a", b"1"),), (("a", b"1"), ("a", b"2"), ("b", b"")), (("ключ", "значение".encode()),),
            tuple((f"h{i}", str(i).encode()) for i in range(10))]  # fmt: skip
    records = [Rec(f"v{i}".encode(), None, hs, 0, run.ts(i)) for i, hs in enumerate(sets)]
    return {"produce": run.client.produce(t, records), "read": read_all(run, t)}


@scenario("produce/null-and-empty", needs=PC | {"produce.null"})
def null_and_empty(run: Run) -> Any:
    """Null key, null value (tombstone), both null, empty key and value."""
    t = run.topic()
    pairs = [(None, b"v0"), (b"k1", None), (None, None), (b"", b""), (b"k4", b"")]
    records = [Rec(v, k, (), 0, run.ts(i)) for i, (k, v) in enumerate(pairs)]
    return {"produce": run.client.produce(t, records), "read": read_all(run, t)}


@scenario("produce/binary", needs=PC | {"produce.binary"})
def binary(run: Run) -> Any:
    """Keys, values and header values holding every byte value (not text)."""
    t = run.topic()
    blob = bytes(range(256))
    records = [Rec(blob, blob[::-1], (("bin", blob),), 0, run.ts(0)), Rec(b"\x00", b"\xff", (), 0, run.ts(1))]
    return {"produce": run.client.produce(t, records), "read": read_all(run, t)}


@scenario("produce/too-large-for-topic", needs=PC)
def too_large_for_topic(run: Run) -> Any:
    """A record above the topic's max.message.bytes fails (MESSAGE_TOO_LARGE); its neighbours land."""
    t = run.topic(configs={"max.message.bytes": "1024"})
    records = [Rec(v, None, (), 0, None) for v in (b"small-0", b"x" * 2000, b"small-2")]
    return {"produce": run.client.produce(t, records, sync=True), "read": read_all(run, t)}


@scenario("produce/too-large-for-broker", needs=PC)
def too_large_for_broker(run: Run) -> Any:
    """A 1.1 MB record against the broker's default message.max.bytes (1048588)."""
    t = run.topic()
    records = [Rec(b"y" * 1_100_000, None, (), 0, None)]
    produced = run.client.produce(t, records, extra=BIG_REQUESTS[run.client.name])
    return {"produce": produced, "offsets": run.harness.offsets(t)}


def _acks(acks: str) -> None:
    @scenario(f"produce/acks-{acks}", needs=PC | ({"produce.acks0"} if acks == "0" else set()),
              doc=f"Five records with acks={acks}, read back.")
    def run_acks(run: Run) -> Any:
        t = run.topic()
        produced = run.client.produce(t, run.recs(5), acks=acks)
        if acks == "0":  # nothing acknowledges these; wait until the broker has them all
            run.harness.wait_offsets(t, 0, 5)
        return {"produce": produced, "read": read_all(run, t)}


for _a in ("0", "1", "all"):
    _acks(_a)


@scenario("produce/idempotent", needs=PC, clients=("kafka-python", "confluent", "java"))
def idempotent(run: Run) -> Any:
    """An idempotent producer (InitProducerId, sequence numbers) writes exactly once."""
    extra = {"kafka-python": {"enable_idempotence": True}, "confluent": {"enable.idempotence": True},
             "java": {"enable.idempotence": "true"}}[run.client.name]  # fmt: skip
    t = run.topic()
    return {"produce": run.client.produce(t, run.recs(10), extra=extra), "read": read_all(run, t)}


@scenario("produce/log-append-time", needs=PC)
def log_append_time(run: Run) -> Any:
    """message.timestamp.type=LogAppendTime: the broker stamps records, overriding the client's."""
    t = run.topic(configs={"message.timestamp.type": "LogAppendTime"})
    return {"produce": run.client.produce(t, run.recs(3)), "read": read_all(run, t)}


@scenario("produce/create-time-kept", needs=PC | {"produce.timestamp"})
def create_time_kept(run: Run) -> Any:
    """Client-set CreateTime timestamps (hours old, out of order) come back unchanged."""
    t = run.topic()
    stamps = [BASE_TS + 5000, BASE_TS, BASE_TS + 9000, BASE_TS - HOUR_MS]
    records = [Rec(f"v{i}".encode(), None, (), 0, ts) for i, ts in enumerate(stamps)]
    return {"produce": run.client.produce(t, records), "read": read_all(run, t)}


@scenario("produce/timestamp-bounds", needs=PC | {"produce.timestamp"})
def timestamp_bounds(run: Run) -> Any:
    """Beyond message.timestamp.after.max.ms (1 h by default) or a topic's before.max.ms: INVALID_TIMESTAMP."""
    t = run.topic(configs={"message.timestamp.before.max.ms": str(24 * HOUR_MS)})
    now = int(time.time() * 1000)
    records = [Rec(b"future", None, (), 0, now + 3 * HOUR_MS), Rec(b"ancient", None, (), 0, now - 30 * 24 * HOUR_MS),
               Rec(b"fine", None, (), 0, BASE_TS)]  # fmt: skip
    return {"produce": run.client.produce(t, records, sync=True), "read": read_all(run, t)}


@scenario("produce/unknown-topic", needs={"produce"})
def unknown_topic(run: Run) -> Any:
    """Producing to a topic that does not exist (auto-creation off) fails once the client gives up."""
    return run.client.produce(run.name("missing"), [Rec(b"v", None, (), 0, None)], extra=FAIL_FAST[run.client.name])


@scenario("produce/unknown-partition", needs={"produce", "produce.partition"})
def unknown_partition(run: Run) -> Any:
    """Producing to partition 5 of a one-partition topic."""
    t = run.topic()
    return run.client.produce(t, [Rec(b"v", None, (), 5, None)], extra=FAIL_FAST[run.client.name])


@scenario("produce/partitions", needs=PC | {"produce.partition"})
def partitions(run: Run) -> Any:
    """Records sent to explicit partitions 0-2 land there, each partition numbered from 0."""
    t = run.topic(partitions=3)
    records = [Rec(f"v{i}".encode(), f"k{i}".encode(), (), i % 3, run.ts(i)) for i in range(9)]
    return {"produce": run.client.produce(t, records), "read": read_all(run, t, partitions=3)}


@scenario("produce/many-small", needs=PC)
def many_small(run: Run) -> Any:
    """2000 small records in large batches: contiguous offsets, every value back."""
    t = run.topic()
    records = [Rec(f"m{i}".encode(), None, (), 0, None) for i in range(2000)]
    produced = run.client.produce(t, records, extra={"kafka-python": {"linger_ms": 50}}.get(run.client.name))
    if isinstance(produced, list) and all(isinstance(o, int) for o in produced):
        produced = {"offsets_contiguous": produced == list(range(2000))}
    return {"produce": produced, "read": digest(read_all(run, t))}


@scenario("produce/large-record", needs=PC)
def large_record(run: Run) -> Any:
    """One 900 KB record (under the 1 MB limits) round-trips intact."""
    t = run.topic()
    value = (b"0123456789abcdef" * 60_000)[:900_000]
    produced = run.client.produce(t, [Rec(value, b"big", (), 0, None)])
    got = read_all(run, t)
    if isinstance(got, dict) and isinstance(got.get("records"), list):
        got = {**got, "records": [{**r, "value": hashlib.sha256(str(r["value"]).encode()).hexdigest()[:16],
                                   "length": len(str(r["value"]))} for r in got["records"]]}  # fmt: skip
    return {"produce": produced, "read": got, "expected_sha256": hashlib.sha256(value).hexdigest()[:16]}


@scenario("produce/one-batch-per-record", needs=PC)
def one_batch_per_record(run: Run) -> Any:
    """Records sent one request at a time get consecutive offsets, as one batch would."""
    t = run.topic()
    return {"produce": run.client.produce(t, run.recs(5), sync=True), "read": read_all(run, t)}


@scenario("produce/compacted-keyless-in-batch", needs=PC, clients=("confluent", "java"))
def compacted_keyless_in_batch(run: Run) -> Any:
    """One batch of 20 records to a compacted topic, every 5th without a key: the broker names
    each keyless record (KIP-467 record errors, INVALID_RECORD) and writes none of the batch;
    clients fail the named records with INVALID_RECORD and the others as part of a bad batch."""
    t = run.topic(configs={"cleanup.policy": "compact"})
    records = [Rec(f"v{i}".encode(), None if i % 5 == 4 else f"k{i}".encode(), (), 0, run.ts(i)) for i in range(20)]
    return {"produce": run.client.produce(t, records), "offsets": run.harness.offsets(t)}


@scenario("produce/timestamp-bounds-in-batch", needs=PC | {"produce.timestamp"}, clients=("confluent", "java"))
def timestamp_bounds_in_batch(run: Run) -> Any:
    """One batch mixing timestamps inside and outside message.timestamp.before/after.max.ms:
    the broker names each out-of-range record (INVALID_TIMESTAMP) and writes none of the batch."""
    t = run.topic(configs={"message.timestamp.before.max.ms": str(24 * HOUR_MS)})
    now = int(time.time() * 1000)
    stamps = [BASE_TS, now - 30 * 24 * HOUR_MS, BASE_TS + 1000, now + 3 * HOUR_MS, BASE_TS + 2000]
    records = [Rec(f"v{i}".encode(), f"k{i}".encode(), (), 0, ts) for i, ts in enumerate(stamps)]
    return {"produce": run.client.produce(t, records), "offsets": run.harness.offsets(t)}
