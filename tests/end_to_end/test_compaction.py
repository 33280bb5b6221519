"""Log compaction on a real broker process, driven by confluent-kafka over real sockets.

The broker runs with 1 MiB segments (``log.segment.bytes``, Kafka's smallest) and
``log.cleaner.backoff.ms=100``; values are 0.3-2 KB, so the workload spans about a dozen segments.
A compacted topic is created with ``min.cleanable.dirty.ratio=1.0`` (never dirty enough), the
keyed workload (overwrites and tombstones, ``random.Random(seed)``) is produced, a filler key is
written until the workload's last segment has rolled, and only then the ratio is lowered with
IncrementalAlterConfigs, so the figures before and after cleaning are exact. Waiting is bounded
polling of what a consumer reads. ``delete.retention.ms=0`` lets the second cleaning remove
tombstones, so the end state is exactly one record per live key.
"""

from __future__ import annotations

import glob
import os
import random
import threading
import time
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic

from tests.broker_process import BrokerProcess

KEYS = 300
RECORDS = 12_000
FILLER = b"~filler"
SEGMENT_BYTES = 1024 * 1024
PAD = 16  # value padding per unit of the workload's random size
DEADLINE_S = 60.0
TOPIC_CONFIGS = {"cleanup.policy": "compact", "min.cleanable.dirty.ratio": "1.0", "delete.retention.ms": "0"}
Latest = dict[bytes, tuple[int, bytes | None]]


@pytest.fixture
def compaction_broker(tmp_path) -> Iterator[BrokerProcess]:
    proc = BrokerProcess(str(tmp_path / "data"), overrides={
        "log.segment.bytes": str(SEGMENT_BYTES), "log.cleaner.backoff.ms": "100",
    })
    proc.start()
    yield proc
    proc.close()


def create_topic(bootstrap: str, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1, config=TOPIC_CONFIGS)], operation_timeout=10)[topic].result(10)


def make_dirty_ratio_low(bootstrap: str, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic, incremental_configs=[
        ConfigEntry("min.cleanable.dirty.ratio", "0.01", incremental_operation=AlterConfigOpType.SET),
    ])
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(10)


def produce_workload(bootstrap: str, topic: str, seed: int, records: int, latest: Latest) -> None:
    """Keyed overwrites and ~10% tombstones, then filler until the last workload segment rolled."""
    rng = random.Random(seed)
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})
    pending: list[tuple[bytes, bytes | None]] = []

    def on_delivery(err: KafkaError | None, msg) -> None:
        assert err is None, err
        if msg.key() != FILLER:
            latest[msg.key()] = (msg.offset(), msg.value())

    for i in range(records):
        key = b"key-%04d" % rng.randrange(KEYS)
        value = None if rng.random() < 0.1 else b"value-%06d-" % i + b"x" * (rng.randrange(20, 120) * PAD)
        pending.append((key, value))
        producer.produce(topic, key=key, value=value, on_delivery=on_delivery)
        if i % 1000 == 0:
            producer.poll(0)
    producer.flush(30)
    for i in range(200):  # 200 x ~6 KB > one segment
        producer.produce(topic, key=FILLER, value=b"f%05d" % i + b"y" * (SEGMENT_BYTES // 170))
    assert producer.flush(30) == 0


def read_log(bootstrap: str, topic: str) -> list[tuple[int, bytes, bytes | None]]:
    """Every record from offset 0 to the end: (offset, key, value)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "compaction-reader",
                         "enable.auto.commit": False, "enable.partition.eof": True, "fetch.wait.max.ms": 50})
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        out = []
        deadline = time.monotonic() + DEADLINE_S
        while True:
            assert time.monotonic() < deadline, "reading the log timed out"
            msg = consumer.poll(0.2)
            if msg is None:
                continue
            if msg.error():
                if msg.error().code() == KafkaError._PARTITION_EOF:
                    return out
                raise AssertionError(msg.error())
            out.append((msg.offset(), msg.key(), msg.value()))
    finally:
        consumer.close()


def expected_records(latest: Latest) -> list[tuple[int, bytes, bytes | None]]:
    return sorted((offset, key, value) for key, (offset, value) in latest.items() if value is not None)


def workload_part(records: list[tuple[int, bytes, bytes | None]]) -> list[tuple[int, bytes, bytes | None]]:
    return [r for r in records if r[1] != FILLER]


def wait_until_compacted(bootstrap: str, topic: str, latest: Latest) -> list[tuple[int, bytes, bytes | None]]:
    expected = expected_records(latest)
    deadline = time.monotonic() + DEADLINE_S
    while True:
        records = read_log(bootstrap, topic)
        if workload_part(records) == expected:
            return records
        assert time.monotonic() < deadline, f"not compacted in {DEADLINE_S}s: {len(records)} records"
        time.sleep(0.1)  # polling interval between full reads


def topic_bytes(broker: BrokerProcess, topic: str) -> int:
    return sum(os.path.getsize(p) for p in glob.glob(os.path.join(broker.data_dir, f"{topic}-0", "*.log")))


def test_compaction_keeps_latest_value_per_key_at_original_offsets(compaction_broker: BrokerProcess) -> None:
    bootstrap, topic = compaction_broker.bootstrap, "compacted"
    create_topic(bootstrap, topic)
    latest: Latest = {}
    produce_workload(bootstrap, topic, seed=11, records=RECORDS, latest=latest)
    before = read_log(bootstrap, topic)
    bytes_before = topic_bytes(compaction_broker, topic)
    assert len(before) == RECORDS + 200

    # A reader going over the whole log again and again while the cleaner works.
    passes: list[int] = []
    problems: list[str] = []
    stop = threading.Event()

    def reader() -> None:
        while not stop.is_set():
            records = read_log(bootstrap, topic)
            offsets = [o for o, _k, _v in records]
            if offsets != sorted(set(offsets)):
                problems.append("offsets not increasing")
            seen: dict[bytes, bytes | None] = {}
            for _o, key, value in records:
                seen[key] = value
            # Only live keys: with delete.retention.ms=0 a read that spans a cleaning may miss a
            # tombstone the cleaner drops meanwhile and end on the older value, as on Kafka (that
            # bound is what delete.retention.ms is for); the final read below checks deletions.
            for key, (_offset, value) in latest.items():
                if value is not None and seen.get(key) != value:
                    problems.append(f"{key!r}: final value {seen.get(key)!r}, expected {value!r}")
                    break
            passes.append(len(records))

    thread = threading.Thread(target=reader)
    thread.start()
    try:
        make_dirty_ratio_low(bootstrap, topic)
        after = wait_until_compacted(bootstrap, topic, latest)
        deadline = time.monotonic() + DEADLINE_S
        while len(passes) < 3 and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        stop.set()
        thread.join(DEADLINE_S)
    bytes_after = topic_bytes(compaction_broker, topic)
    live = sum(1 for _o, v in latest.values() if v is not None)
    print(f"\ncompaction: {len(latest)} keys ({live} live), records {len(before)} -> {len(after)}, "
          f"bytes {bytes_before} -> {bytes_after}; concurrent reader passes {len(passes)} "
          f"(records per pass {passes[0]} .. {passes[-1]})")
    assert not problems, problems[:5]
    assert workload_part(after) == expected_records(latest)
    assert bytes_after < bytes_before / 5


def test_kill_9_during_cleaning_loses_nothing(compaction_broker: BrokerProcess) -> None:
    bootstrap, topic = compaction_broker.bootstrap, "compacted-crash"
    create_topic(bootstrap, topic)
    latest: Latest = {}
    rng = random.Random(5)
    make_dirty_ratio_low(bootstrap, topic)  # the cleaner works while we produce and kill
    kills = 0
    for cycle in range(5):
        produce_workload(compaction_broker.bootstrap, topic, seed=100 + cycle, records=3000, latest=latest)
        time.sleep(rng.uniform(0.0, 0.3))  # the kill moment: the cleaner runs every 100 ms
        compaction_broker.kill()
        kills += 1
        compaction_broker.start()
    after = wait_until_compacted(bootstrap, topic, latest)
    broker_log = compaction_broker.read_log()
    swaps = broker_log.count("completed an interrupted log cleaning swap")
    rolled_back = broker_log.count("files of an unfinished log cleaning")
    cleanings = broker_log.count(f"cleaned {topic}-0 ")
    print(f"\nkill -9 during cleaning: {kills} kills, {cleanings} cleanings, {rolled_back} rolled back, "
          f"{swaps} interrupted swaps completed, "
          f"{len(latest)} keys, {len(workload_part(after))} live records at their offsets")
    assert workload_part(after) == expected_records(latest)
