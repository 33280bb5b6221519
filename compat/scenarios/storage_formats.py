"""Scenarios on what the brokers leave on disk: the files Kafka's own tools read.

Each scenario reads the target's log directory (``target.data_dir``: the process targets) after
driving the client under test, so the same steps must leave the same bytes on both brokers:

- ``index_interval``: the ``.index`` of a rolled segment (entries only every
  ``index.interval.bytes``, none for the first batch);
- ``offsets_dump_log`` / ``txn_dump_log``: ``kafka-dump-log`` with ``--offsets-decoder`` /
  ``--transaction-log-decoder`` over ``__consumer_offsets`` / ``__transaction_state``: the record
  versions and fields Kafka 4.3.1 writes (OffsetCommitValue v4, TransactionLogValue v1).
"""

from __future__ import annotations

import json
import re
import shutil
import struct
import subprocess
from pathlib import Path
from typing import Any

from compat.clients.base import Rec
from compat.deps import kafka_classpath
from compat.harness import wait_until
from compat.scenarios import Run, scenario

DUMP_LOG = "org.apache.kafka.tools.DumpLogSegments"
JVM_FLAGS = ["-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1"]
SEGMENT_BYTES = 1_048_576  # Kafka 4's smallest segment.bytes
INDEX_INTERVAL = 100_000
VALUE_SIZES = (30_000, 50_000, 70_000, 10_000)
COMPLETE_COMMIT = 4  # TransactionState id
# The TransactionLogValue fields the format decides; producer ids and the transaction version
# 2 bookkeeping (previous producer id, client transaction version) are the coordinator's.
TXN_FORMAT_FIELDS = ("producerEpoch", "transactionTimeoutMs", "transactionStatus", "transactionPartitions")


def log_dir(run: Run, topic: str, partition: int) -> Path:
    return Path(run.target.data_dir) / f"{topic}-{partition}"  # type: ignore[attr-defined]


def segment_bases(directory: Path) -> list[int]:
    return sorted(int(p.name[:-4]) for p in directory.glob("*.log"))


def index_entries(path: Path) -> list[list[int]]:
    """(relative offset, position) entries of an ``.index`` file; Kafka preallocates the active
    index with zeros, and no real entry is (0, 0) (the first batch is never indexed)."""
    raw = path.read_bytes()
    out = [[rel, pos] for rel, pos in struct.iter_unpack(">ii", raw[: len(raw) - len(raw) % 8])]
    while out and out[-1] == [0, 0]:
        out.pop()
    return out


@scenario("index_interval", needs=("produce",))
def index_interval(run: Run) -> Any:
    """One batch per record (values 10-70 kB) into 1 MiB segments with index.interval.bytes
    100000: the first segment's ``.index`` after it rolled (Kafka: an entry only once more than
    the interval was appended since the last one; none for the first batch)."""
    topic = run.topic(configs={"segment.bytes": str(SEGMENT_BYTES), "index.interval.bytes": str(INDEX_INTERVAL)})
    records = [Rec(b"v%d-" % i + b"." * VALUE_SIZES[i % len(VALUE_SIZES)], b"k%d" % i, (), 0, run.ts(i))
               for i in range(30)]  # fmt: skip
    offsets = run.client.produce(topic, records, sync=True)
    directory = log_dir(run, topic, 0)
    rolled, bases = wait_until(lambda: segment_bases(directory), lambda b: len(b) >= 2, 15.0)
    first = directory / f"{bases[0]:020d}.index"
    return {"offsets": offsets, "rolled": rolled, "second_segment_base": bases[1] if rolled else None,
            "first_segment_index": index_entries(first)}  # fmt: skip


def dump_log(files: list[Path], decoder: str) -> list[str]:
    """``kafka-dump-log --files ... <decoder> --print-data-log``: its record lines."""
    java = shutil.which("java") or "java"
    proc = subprocess.run(
        [java, *JVM_FLAGS, "-cp", kafka_classpath(), DUMP_LOG, decoder, "--print-data-log",
         "--files", ",".join(str(f) for f in files)],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    if proc.returncode != 0:
        raise RuntimeError(f"kafka-dump-log exited {proc.returncode}: {proc.stderr[-2000:]}")
    return [line for line in proc.stdout.splitlines() if "| offset:" in line]


def decoded(line: str) -> tuple[Any, Any]:
    """The decoded key and payload JSON of one kafka-dump-log record line."""
    match = re.search(r" key: (\{.*?\}|null) payload: (\{.*\}|null)\s*$", line)
    if match is None:
        raise ValueError(f"no key/payload in {line!r}")
    return json.loads(match.group(1)), json.loads(match.group(2))


def internal_records(run: Run, topic: str, decoder: str, mine: str) -> list[list[Any]]:
    """[key, payload] of each record of ``topic`` (every partition) that mentions ``mine``."""
    files = sorted(Path(run.target.data_dir).glob(f"{topic}-*/*.log"))  # type: ignore[attr-defined]
    return [list(decoded(line)) for line in dump_log(files, decoder) if mine in line]


def drop(value: Any, keys: set[str]) -> Any:
    """``value`` with the named fields (wall-clock times, broker-made ids) set to "<x>"."""
    if isinstance(value, dict):
        return {k: "<x>" if k in keys else drop(v, keys) for k, v in value.items()}
    if isinstance(value, list):
        return [drop(v, keys) for v in value]
    return value


@scenario("offsets_dump_log", needs=("group.admin",))
def offsets_dump_log(run: Run) -> Any:
    """Committed offsets of an inactive group, then ``kafka-dump-log --offsets-decoder`` over
    ``__consumer_offsets``: the OffsetCommitKey/Value versions and fields as Kafka 4.3.1
    writes them (v4 values; the topic id present when the commit named the topic by id)."""
    topic = run.topic(partitions=2)
    group = run.name("group")
    # a fresh broker answers NOT_COORDINATOR until __consumer_offsets is loaded: wait for that
    _done, result = wait_until(lambda: run.client.alter_group_offsets(group, topic, {0: 5, 1: 7}),
                               lambda r: r is None, 30.0)  # fmt: skip
    ok, records = wait_until(lambda: internal_records(run, "__consumer_offsets", "--offsets-decoder", group),
                             lambda r: len(r) >= 2, 15.0)  # fmt: skip
    # Sorted: a broker writes a commit's records in request order, and kadm orders partitions by
    # Go map iteration (random per run)
    return {"alter": result, "records": drop(sorted(records, key=repr), {"commitTimestamp", "topicId"}),
            "complete": ok}  # fmt: skip


@scenario("txn_dump_log", needs=("transactions",))
def txn_dump_log(run: Run) -> Any:
    """One committed transaction, then ``kafka-dump-log --transaction-log-decoder`` over
    ``__transaction_state``: TransactionLogKey/Value versions and states as Kafka 4.3.1 writes
    them (v1 values)."""
    topic = run.topic()
    txn_id = run.name("txn")
    producer = run.client.transactional_producer(txn_id)
    try:
        steps = [producer.begin(), producer.send(topic, run.recs(2)), producer.commit()]
    finally:
        producer.close()
    ok, records = wait_until(
        lambda: internal_records(run, "__transaction_state", "--transaction-log-decoder", txn_id),
        lambda r: any(isinstance(payload, dict) and payload["data"]["transactionStatus"] == COMPLETE_COMMIT
                      for _key, payload in r), 15.0)  # fmt: skip
    return {"steps": steps, "complete": ok, "records": [
        [key, {"version": payload["version"], **{k: payload["data"].get(k) for k in TXN_FORMAT_FIELDS}}]
        if isinstance(payload, dict) else [key, payload] for key, payload in records]}  # fmt: skip
