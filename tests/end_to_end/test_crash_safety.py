"""kill -9 at random moments loses no acknowledged record; recovery cuts torn tails by CRC.

``test_kill_9_loses_no_acknowledged_record``: a confluent-kafka producer (acks=all, no
retries, so nothing is ever written twice) produces to a 2-partition topic without pause
while the broker process is SIGKILLed at moments drawn from ``random.Random(seed)``, then
restarted on the same port and data, ``KILL_CYCLES`` times (one producer per incarnation).
Delivery callbacks record every acknowledged (partition, offset, value); every
acknowledgement is followed by a kill -9. At the end everything is read back from offset 0:
each acknowledged value is at its acknowledged offset, no value appears twice, and offsets
are contiguous from 0 to the log end in each partition; every restart logged its recovery.
The seed is printed and can be fixed with ``KBROKER_CRASH_SEED=<n>`` to replay a schedule.

``test_torn_tail_is_truncated_on_recovery``: deterministic. Produce, kill, append a torn tail
(a cut batch, a whole batch with a bad CRC, random garbage) to the active ``.log`` segment,
restart: the broker logs the truncation, the file is back to its valid length, the records
before are intact and new produces continue at the next offset.
"""

from __future__ import annotations

import glob
import os
import random
import re
import time
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer as KafkaConsumer
from confluent_kafka import KafkaError, Message, Producer, TopicPartition
from kbroker.protocol.record_builder import build_batch

from tests.broker_process import BrokerProcess

# Twenty in CI; KBROKER_CRASH_CYCLES=100 for a longer run.
KILL_CYCLES = int(os.environ.get("KBROKER_CRASH_CYCLES", "20"))
CRASH_TOPIC = "crash-safety"
PARTITIONS = 2
# How long the producer runs before each SIGKILL (uniform in this range, seconds).
RUN_BEFORE_KILL_S = (0.05, 1.5)
MAX_QUEUED = 2_000  # producer-side backlog cap; keeps each cycle's in-flight set bounded
PRODUCE_RATE_PER_S = 15_000  # keeps the log (rescanned at every restart) and the final read small
DEADLINE_S = 30.0


def _seed() -> int:
    fixed = os.environ.get("KBROKER_CRASH_SEED")
    return int(fixed) if fixed else random.SystemRandom().randrange(2**32)


def _producer(bootstrap: str) -> Producer:
    return Producer({
        "bootstrap.servers": bootstrap,
        "acks": "all",
        "enable.idempotence": False,
        "message.send.max.retries": 0,  # a retry after a crash could write a value twice
        "linger.ms": 2,
        "message.timeout.ms": 30_000,
        "reconnect.backoff.ms": 10,
        "reconnect.backoff.max.ms": 50,
        "retry.backoff.ms": 10,
        "retry.backoff.max.ms": 50,
        "allow.auto.create.topics": True,
        "log_level": 2,  # "connection refused" while the broker is down is expected here
    })


def consume_all(bootstrap: str, topic: str, partitions: int) -> dict[int, list[tuple[int, bytes]]]:
    """Every record of every partition from offset 0 to the end: {partition: [(offset, value)]}."""
    consumer = KafkaConsumer({
        "bootstrap.servers": bootstrap,
        "group.id": "crash-safety-reader",  # required by the client; no group is joined (assign)
        "enable.auto.commit": False,
        "enable.partition.eof": True,
        "fetch.wait.max.ms": 50,
    })
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        out: dict[int, list[tuple[int, bytes]]] = {p: [] for p in range(partitions)}
        at_eof: set[int] = set()
        deadline = time.monotonic() + DEADLINE_S
        while len(at_eof) < partitions:
            assert time.monotonic() < deadline, f"consume timed out; eof on {sorted(at_eof)}"
            msg = consumer.poll(0.2)
            if msg is None:
                continue
            if msg.error():
                if msg.error().code() == KafkaError._PARTITION_EOF:
                    at_eof.add(msg.partition())
                    continue
                raise AssertionError(f"consume error: {msg.error()}")
            at_eof.discard(msg.partition())
            out[msg.partition()].append((msg.offset(), msg.value()))
        return out
    finally:
        consumer.close()


def wait_for_partitions(producer: Producer, topic: str, count: int) -> None:
    """Auto-create the topic (metadata request) and wait until it has ``count`` partitions."""
    deadline = time.monotonic() + DEADLINE_S
    while True:
        meta = producer.list_topics(topic, timeout=5)
        t = meta.topics.get(topic)
        if t is not None and t.error is None and len(t.partitions) == count:
            return
        assert time.monotonic() < deadline, f"topic {topic} did not appear: {t and t.error}"


@pytest.fixture
def crash_broker(tmp_path) -> Iterator[BrokerProcess]:
    proc = BrokerProcess(str(tmp_path / "data"), overrides={"num.partitions": str(PARTITIONS)})
    proc.start()
    yield proc
    proc.close()


def test_kill_9_loses_no_acknowledged_record(crash_broker: BrokerProcess) -> None:
    seed = _seed()
    rng = random.Random(seed)
    print(f"\ncrash schedule seed: {seed} (replay with KBROKER_CRASH_SEED={seed}); {KILL_CYCLES} kill -9 cycles")
    where = f"(seed {seed}; broker log {crash_broker.log_path})"

    acked: dict[int, dict[int, bytes]] = {p: {} for p in range(PARTITIONS)}
    failed: list[str] = []
    sent: set[bytes] = set()

    def on_delivery(err: KafkaError | None, msg: Message) -> None:
        if err is None:
            offsets = acked[msg.partition()]
            assert msg.offset() not in offsets, f"offset {msg.offset()} acknowledged twice {where}"
            offsets[msg.offset()] = msg.value()
        else:
            failed.append(err.name())

    seq = 0
    kills = 0
    per_cycle: list[int] = []
    restarts: list[float] = []
    started = time.monotonic()
    for cycle in range(KILL_CYCLES):
        # A fresh producer per broker incarnation: librdkafka can sit on a metadata request it
        # believes is still in flight for ~1 s after a reconnect, which would idle whole cycles.
        producer = _producer(crash_broker.bootstrap)
        if cycle == 0:
            wait_for_partitions(producer, CRASH_TOPIC, PARTITIONS)
        before = sum(len(v) for v in acked.values())
        cycle_start = time.monotonic()
        kill_at = cycle_start + rng.uniform(*RUN_BEFORE_KILL_S)
        produced = 0
        while (now := time.monotonic()) < kill_at:
            # Produce continuously (so the kill lands mid-write) at a bounded rate.
            if len(producer) < MAX_QUEUED and produced < PRODUCE_RATE_PER_S * (now - cycle_start):
                value = f"c{cycle}-m{seq}".encode()
                producer.produce(CRASH_TOPIC, value=value, partition=seq % PARTITIONS, on_delivery=on_delivery)
                sent.add(value)
                seq += 1
                produced += 1
                producer.poll(0)
            else:
                producer.poll(0.001)
        crash_broker.kill()
        kills += 1
        # Whatever was not acknowledged before the kill never will be: fail it, collect every
        # delivery report (acknowledgements received before the kill included).
        producer.purge()
        assert producer.flush(DEADLINE_S) == 0, f"producer did not settle after the kill {where}"
        per_cycle.append(sum(len(v) for v in acked.values()) - before)
        t = time.monotonic()
        crash_broker.start()
        restarts.append(round(time.monotonic() - t, 2))
    elapsed = time.monotonic() - started

    total_acked = sum(len(v) for v in acked.values())
    print(
        f"{kills} kill -9s in {elapsed:.1f}s: {seq} produced, {total_acked} acknowledged, "
        f"{len(failed)} failed (not acknowledged); acknowledged per cycle: {per_cycle}; restart seconds: {restarts}"
    )
    assert total_acked > 0 and all(acked.values()), f"nothing acknowledged on some partition {where}"
    assert sum(1 for n in per_cycle if n > 0) >= KILL_CYCLES // 2, f"too few cycles produced anything {where}"

    log_text = crash_broker.read_log()
    recoveries = log_text.count("was not shut down cleanly")
    truncations = re.findall(r"recovery: .*truncated (\d+) bytes", log_text)
    print(f"broker logged {recoveries} unclean-shutdown recoveries, {len(truncations)} torn-tail truncations")
    assert recoveries == kills, f"every restart after kill -9 must recover ({recoveries} != {kills}) {where}"

    stored = consume_all(crash_broker.bootstrap, CRASH_TOPIC, PARTITIONS)
    seen: set[bytes] = set()
    for p in range(PARTITIONS):
        offsets = [o for o, _v in stored[p]]
        assert offsets == list(range(len(offsets))), f"partition {p}: offsets not contiguous from 0 {where}"
        by_offset = dict(stored[p])
        for offset, value in sorted(acked[p].items()):
            assert by_offset.get(offset) == value, (
                f"partition {p} offset {offset}: acknowledged {value!r}, stored {by_offset.get(offset)!r} {where}"
            )
        for _o, value in stored[p]:
            assert value in sent, f"partition {p}: stored a value never produced: {value!r} {where}"
            assert value not in seen, f"value {value!r} stored twice {where}"
            seen.add(value)
    unacked_stored = len(seen) - total_acked
    print(
        f"zero loss: all {total_acked} acknowledged records present exactly once at their offsets; "
        f"{unacked_stored} unacknowledged records also made it to disk; "
        f"log end offsets {[len(stored[p]) for p in range(PARTITIONS)]}"
    )


# --- deterministic torn tail ----------------------------------------------------------------

TAIL_TOPIC = "torn-tail"


def _produce_sync(bootstrap: str, topic: str, values: list[bytes]) -> list[int]:
    offsets: list[int] = []
    errors: list[str] = []

    def on_delivery(err: KafkaError | None, msg: Message) -> None:
        if err is None:
            offsets.append(msg.offset())
        else:
            errors.append(str(err))

    producer = _producer(bootstrap)
    for value in values:
        producer.produce(topic, value=value, partition=0, on_delivery=on_delivery)
    assert producer.flush(DEADLINE_S) == 0
    assert not errors, errors
    return offsets


def _tail(kind: str, next_offset: int) -> bytes:
    batch = build_batch([(b"k", b"never-acknowledged-%d" % i) for i in range(5)], base_offset=next_offset)
    if kind == "cut-batch":
        return batch[: len(batch) // 2]
    if kind == "cut-header":
        return batch[:30]
    if kind == "bad-crc":
        bad = bytearray(batch)
        bad[-3] ^= 0x40
        return bytes(bad)
    if kind == "valid-then-garbage":
        # A whole, valid batch is not torn: recovery keeps it and cuts only the garbage after.
        return batch + random.Random(7).randbytes(100)
    return random.Random(kind).randbytes(777)


@pytest.mark.parametrize("kind", ["cut-batch", "cut-header", "bad-crc", "garbage", "valid-then-garbage"])
def test_torn_tail_is_truncated_on_recovery(tmp_path, kind: str) -> None:
    broker = BrokerProcess(str(tmp_path / "data"), overrides={"num.partitions": "1"})
    broker.start()
    try:
        values = [b"before-crash-%03d" % i for i in range(40)]
        assert _produce_sync(broker.bootstrap, TAIL_TOPIC, values) == list(range(40))
        broker.kill()

        segments = sorted(glob.glob(os.path.join(broker.data_dir, f"{TAIL_TOPIC}-0", "*.log")))
        active = segments[-1]
        valid_size = os.path.getsize(active)
        tail = _tail(kind, 40)
        with open(active, "ab") as fh:
            fh.write(tail)
        kept = 0
        if kind == "valid-then-garbage":
            kept = len(tail) - 100
        log_before = len(broker.read_log())

        broker.start()
        new_log = broker.read_log()[log_before:]
        cut = len(tail) - kept
        assert re.search(
            rf"recovery: {TAIL_TOPIC}-0 segment 0: truncated {cut} bytes", new_log
        ), f"no truncation logged for {kind}:\n{new_log}"
        assert os.path.getsize(active) == valid_size + kept

        first_new = 45 if kind == "valid-then-garbage" else 40
        more = [b"after-restart-%03d" % i for i in range(10)]
        assert _produce_sync(broker.bootstrap, TAIL_TOPIC, more) == list(range(first_new, first_new + 10))

        stored = consume_all(broker.bootstrap, TAIL_TOPIC, 1)[0]
        expected = values[:]
        if kind == "valid-then-garbage":
            expected += [b"never-acknowledged-%d" % i for i in range(5)]
        expected += more
        assert stored == list(enumerate(expected))
    finally:
        broker.close()
