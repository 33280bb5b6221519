"""Transactions with confluent-kafka against a real kbroker.

Commit and abort; read_committed never sees aborted or open data while read_uncommitted
does; interleaved transactions hold the LastStableOffset at the first open one;
consume-transform-produce with send_offsets_to_transaction commits the offsets with the
output (checked in the OffsetStore after a clean shutdown); a kill -9 during transactional
load leaves every transaction all-or-nothing, and the open ones are resolved after restart
(by the restarted producer fencing its old session, or by the transaction timeout) so the
LastStableOffset does not hang.
"""

from __future__ import annotations

import asyncio
import time

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

from tests.broker_process import BrokerProcess
from tests.end_to_end.test_crash_safety import wait_for_partitions
from tests.kbroker.node_in_process import group_coordinator_ready, single_node

DEADLINE_S = 30.0


def _txn_producer(bootstrap: str, transactional_id: str, **extra: object) -> Producer:
    producer = Producer({
        "bootstrap.servers": bootstrap, "transactional.id": transactional_id, "linger.ms": 1,
        "log_level": 2, **extra,
    })
    producer.init_transactions(DEADLINE_S)
    return producer


def _consumer(bootstrap: str, isolation: str) -> Consumer:
    return Consumer({
        "bootstrap.servers": bootstrap, "group.id": "txn-tests", "isolation.level": isolation,
        "enable.partition.eof": True, "enable.auto.commit": False, "fetch.wait.max.ms": 50,
    })


def read(bootstrap: str, topic: str, isolation: str, partitions: int = 1) -> list[bytes]:
    """Every record the isolation level lets a consumer see, up to the end (LSO or HW)."""
    consumer = _consumer(bootstrap, isolation)
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        out: list[bytes] = []
        at_eof: set[int] = set()
        deadline = time.monotonic() + DEADLINE_S
        while len(at_eof) < partitions:
            assert time.monotonic() < deadline, "read timed out"
            msg = consumer.poll(0.2)
            if msg is None:
                continue
            if msg.error():
                at_eof.add(msg.partition())
                continue
            out.append(msg.value())
        return out
    finally:
        consumer.close()


def end_offsets(bootstrap: str, topic: str, partition: int = 0) -> tuple[int, int]:
    """(read_committed end = LastStableOffset, read_uncommitted end = high watermark)."""
    ends = []
    for isolation in ("read_committed", "read_uncommitted"):
        consumer = _consumer(bootstrap, isolation)
        try:
            ends.append(consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=10)[1])
        finally:
            consumer.close()
    return ends[0], ends[1]


def test_commit_and_abort_isolation(broker: BrokerProcess) -> None:
    producer = _txn_producer(broker.bootstrap, "iso")
    producer.begin_transaction()
    producer.produce("txn-iso", b"c1")
    producer.produce("txn-iso", b"c2")
    producer.commit_transaction(DEADLINE_S)
    producer.begin_transaction()
    producer.produce("txn-iso", b"aborted")
    producer.flush(DEADLINE_S)  # in the log before the abort
    producer.abort_transaction(DEADLINE_S)
    producer.begin_transaction()
    producer.produce("txn-iso", b"c3")
    producer.commit_transaction(DEADLINE_S)
    assert read(broker.bootstrap, "txn-iso", "read_committed") == [b"c1", b"c2", b"c3"]
    assert read(broker.bootstrap, "txn-iso", "read_uncommitted") == [b"c1", b"c2", b"aborted", b"c3"]
    # 3 data batches... + 3 markers: the LSO equals the high watermark once all ended
    lso, hw = end_offsets(broker.bootstrap, "txn-iso")
    assert lso == hw == 7


def test_interleaved_transactions_hold_the_last_stable_offset(broker: BrokerProcess) -> None:
    first = _txn_producer(broker.bootstrap, "inter-1")
    second = _txn_producer(broker.bootstrap, "inter-2")
    first.begin_transaction()
    first.produce("txn-inter", b"first-1")
    first.flush(DEADLINE_S)  # offset 0: open
    second.begin_transaction()
    second.produce("txn-inter", b"second-1")
    second.produce("txn-inter", b"second-2")
    second.commit_transaction(DEADLINE_S)
    lso, hw = end_offsets(broker.bootstrap, "txn-inter")
    assert (lso, hw) == (0, 4)  # held at the open transaction's first offset
    assert read(broker.bootstrap, "txn-inter", "read_committed") == []
    assert read(broker.bootstrap, "txn-inter", "read_uncommitted") == [b"first-1", b"second-1", b"second-2"]
    first.abort_transaction(DEADLINE_S)
    assert end_offsets(broker.bootstrap, "txn-inter") == (5, 5)
    assert read(broker.bootstrap, "txn-inter", "read_committed") == [b"second-1", b"second-2"]


def test_consume_transform_produce_commits_offsets_with_the_output(tmp_path) -> None:
    broker = BrokerProcess(str(tmp_path / "data"))
    broker.start()
    try:
        plain = Producer({"bootstrap.servers": broker.bootstrap})
        for i in range(10):
            plain.produce("ctp-in", b"in-%d" % i)
        assert plain.flush(DEADLINE_S) == 0
        consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "ctp-group",
                             "enable.auto.commit": False, "isolation.level": "read_committed"})
        consumer.assign([TopicPartition("ctp-in", 0, 0)])
        producer = _txn_producer(broker.bootstrap, "ctp")
        done = 0
        while done < 10:
            producer.begin_transaction()
            for _ in range(5):
                msg = consumer.poll(5)
                assert msg is not None and not msg.error()
                producer.produce("ctp-out", msg.value().replace(b"in", b"out"))
                done += 1
            position = consumer.position([TopicPartition("ctp-in", 0)])
            producer.send_offsets_to_transaction(position, consumer.consumer_group_metadata(), DEADLINE_S)
            producer.commit_transaction(DEADLINE_S)
        consumer.close()
        assert read(broker.bootstrap, "ctp-out", "read_committed") == [b"out-%d" % i for i in range(10)]
    finally:
        broker.close()
    # Offline: the committed offset is in __consumer_offsets, resolved by the commit marker.
    offsets = asyncio.run(_offsets_on_disk(str(tmp_path / "data"), "ctp-group"))
    assert offsets[("ctp-in", 0)].offset == 10


async def _offsets_on_disk(data_dir: str, group: str) -> dict:
    """The group's committed offsets as a node started on ``data_dir`` replays them."""
    async with single_node(data_dir) as broker:
        await group_coordinator_ready(broker)
        return broker.offset_store.fetch(group)


def test_kill_9_during_transactional_load_resolves_open_transactions(tmp_path) -> None:
    broker = BrokerProcess(str(tmp_path / "data"), overrides={
        "num.partitions": "2", "transaction.abort.timed.out.transaction.cleanup.interval.ms": "200",
    })
    broker.start()
    try:
        committed: list[list[bytes]] = []
        attempted: list[list[bytes]] = []
        # An abandoned producer: its transaction stays open until the timeout aborts it.
        abandoned = _txn_producer(broker.bootstrap, "abandoned", **{"transaction.timeout.ms": 3000})
        wait_for_partitions(abandoned, "txn-crash", 2)
        abandoned.begin_transaction()
        abandoned.produce("txn-crash", b"abandoned", partition=0)
        abandoned.flush(DEADLINE_S)
        producer = _txn_producer(broker.bootstrap, "loader")
        n = 0
        kill_at = time.monotonic() + 2.0
        while time.monotonic() < kill_at:
            values = [b"t%04d-%d" % (len(attempted), i) for i in range(20)]
            attempted.append(values)
            producer.begin_transaction()
            for i, value in enumerate(values):
                producer.produce("txn-crash", value, partition=i % 2)
            n += 1
            if n % 5 == 0:
                producer.flush(DEADLINE_S)  # leave this one open: in the log, not ended
                break
            producer.commit_transaction(DEADLINE_S)
            committed.append(values)
        broker.kill()
        broker.start()
        # The restarted application fences its old session: the open transaction is aborted.
        _txn_producer(broker.bootstrap, "loader")
        deadline = time.monotonic() + DEADLINE_S
        while True:
            ends = [end_offsets(broker.bootstrap, "txn-crash", p) for p in range(2)]
            if all(lso == hw for lso, hw in ends):
                break  # the abandoned transaction timed out too: nothing hangs the LSO
            assert time.monotonic() < deadline, f"LastStableOffset hangs: {ends}"
            time.sleep(0.2)
        seen = sorted(read(broker.bootstrap, "txn-crash", "read_committed", partitions=2))
        expected = sorted(v for values in committed for v in values)
        assert seen == expected, "read_committed must show exactly the committed transactions"
        everything = read(broker.bootstrap, "txn-crash", "read_uncommitted", partitions=2)
        assert b"abandoned" in everything and len(attempted[-1]) == 20
        print(f"\n{len(committed)} committed transactions survived kill -9; open ones aborted after restart")
        try:
            abandoned.commit_transaction(5)
            raise AssertionError("the timed-out producer must be fenced")
        except KafkaException:
            pass
    finally:
        broker.close()
