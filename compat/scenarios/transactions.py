"""Transactions: a transactional producer commits or aborts, read_committed and
read_uncommitted consumers read the partition, ListOffsets reports the last stable offset.

confluent-kafka (librdkafka's transactional producer) and the Java client (KafkaProducer
with transactional.id, kafka-clients 4.3.1) run these: their adapters have
a transactional producer (``transactions``) and ListOffsets with an isolation level
(``list_offsets.isolation``). kafka-python, aiokafka, kcat and the CLI adapters have no
transactional producer in this suite.

Offsets are part of every outcome: each transaction ends with a control marker that takes an
offset consumers skip, so committed records' offsets have gaps. Records carry scenario
timestamps (hours old), so nothing here depends on the wall clock.
"""

from __future__ import annotations

from typing import Any

from compat.clients.base import FetchSettings, Rec
from compat.scenarios import Run, scenario

TXN = {"transactions", "consume", "consume.fetch", "list_offsets.isolation"}
CLIENTS = ("confluent", "java")


def recs(run: Run, prefix: str, n: int, first: int = 0) -> list[Rec]:
    """n records numbered from ``first``: values <prefix><i>, keys k<i>, a header each."""
    return [Rec(f"{prefix}{i}".encode(), f"k{i}".encode(), (("n", str(i).encode()),), 0, run.ts(i))
            for i in range(first, first + n)]  # fmt: skip


def read(run: Run, topic: str, isolation: str, end: int) -> Any:
    """Everything from the beginning up to ``end`` (the high watermark) with ``isolation``."""
    return run.client.consume(topic, [0], "earliest", until={0: end}, settings=FetchSettings(isolation=isolation))


def latest(run: Run, topic: str) -> Any:
    """ListOffsets latest under each isolation level, as the client under test asks it."""
    return {iso: run.client.list_offsets(topic, 0, "latest", isolation=iso)
            for iso in ("read_committed", "read_uncommitted")}  # fmt: skip


def settled(run: Run, topic: str, end: int) -> dict[str, Any]:
    """Once the high watermark reaches ``end`` (markers are written after EndTxn returns):
    the ListOffsets answers, and both consumers' reads."""
    run.harness.wait_offsets(topic, 0, end)
    return {"latest": latest(run, topic), "read_committed": read(run, topic, "read_committed", end),
            "read_uncommitted": read(run, topic, "read_uncommitted", end)}  # fmt: skip


@scenario("transactions/commit", needs=TXN, clients=CLIENTS)
def commit(run: Run) -> Any:
    """Three records in a committed transaction after two plain ones, then two more plain
    ones: read_committed sees all seven, the commit marker's offset skipped."""
    t = run.topic()
    run.harness.put(t, recs(run, "plain", 2))
    p = run.client.transactional_producer(run.name("txn"))
    try:
        steps = {"begin": p.begin(), "send": p.send(t, recs(run, "txn", 3, 2)), "commit": p.commit()}
    finally:
        p.close()
    run.harness.wait_offsets(t, 0, 6)
    run.harness.put(t, recs(run, "after", 2, 5))
    return {"producer": steps, **settled(run, t, 8)}


@scenario("transactions/abort", needs=TXN, clients=CLIENTS)
def abort(run: Run) -> Any:
    """An aborted transaction between plain records: read_committed skips its records and
    the abort marker, read_uncommitted sees the aborted records."""
    t = run.topic()
    run.harness.put(t, recs(run, "plain", 1))
    p = run.client.transactional_producer(run.name("txn"))
    try:
        steps = {"begin": p.begin(), "send": p.send(t, recs(run, "aborted", 3, 1)), "abort": p.abort()}
    finally:
        p.close()
    run.harness.wait_offsets(t, 0, 5)
    run.harness.put(t, recs(run, "after", 1, 4))
    return {"producer": steps, **settled(run, t, 6)}


@scenario("transactions/interleaved", needs=TXN, clients=CLIENTS)
def interleaved(run: Run) -> Any:
    """Two transactional producers write interleaved to one partition; the first commits,
    the second aborts. read_committed sees the first's records only, at their offsets."""
    t = run.topic()
    a = run.client.transactional_producer(run.name("txn-a"))
    b = run.client.transactional_producer(run.name("txn-b"))
    try:
        steps = {"a.begin": a.begin(), "b.begin": b.begin(),
                 "a.send1": a.send(t, recs(run, "a", 2)), "b.send": b.send(t, recs(run, "b", 2, 2)),
                 "a.send2": a.send(t, recs(run, "a", 1, 4)),
                 "open": latest(run, t),
                 "a.commit": a.commit(), "b.abort": b.abort()}  # fmt: skip
    finally:
        a.close()
        b.close()
    return {"producer": steps, **settled(run, t, 7)}


@scenario("transactions/last-stable-offset", needs=TXN, clients=CLIENTS)
def last_stable_offset(run: Run) -> Any:
    """With a transaction open, ListOffsets latest under read_committed is the transaction's
    first offset (the last stable offset) and under read_uncommitted the high watermark, and a
    read_committed consumer gets no further than the last stable offset (it reads for 1.5 s);
    after the commit both offsets are past the marker."""
    t = run.topic()
    run.harness.put(t, recs(run, "plain", 2))
    p = run.client.transactional_producer(run.name("txn"))
    try:
        steps = {"begin": p.begin(), "send": p.send(t, recs(run, "txn", 3, 2)), "open": latest(run, t),
                 "open_read_committed": run.client.consume(t, [0], "earliest", until={0: 5}, timeout_s=1.5,
                                                           settings=FetchSettings(isolation="read_committed")),
                 "commit": p.commit()}  # fmt: skip
    finally:
        p.close()
    run.harness.wait_offsets(t, 0, 6)
    return {"producer": steps, "committed": latest(run, t)}


@scenario("transactions/fenced", needs=TXN, clients=CLIENTS)
def fenced(run: Run) -> Any:
    """A second producer with the same transactional.id initialises while the first has a
    transaction open: the open transaction is aborted, the first producer is fenced (its next
    send and its commit fail), the second one's transaction commits."""
    t = run.topic()
    first = run.client.transactional_producer(run.name("txn"))
    second = None
    try:
        steps = {"first.begin": first.begin(), "first.send": first.send(t, recs(run, "first", 2))}
        second = run.client.transactional_producer(run.name("txn"))
        steps |= {"first.send_after_fence": first.send(t, recs(run, "late", 1, 2)), "first.commit": first.commit(),
                  "second.begin": second.begin(), "second.send": second.send(t, recs(run, "second", 2, 3)),
                  "second.commit": second.commit()}  # fmt: skip
    finally:
        first.close()
        if second is not None:
            second.close()
    return {"producer": steps, **settled(run, t, 6)}
