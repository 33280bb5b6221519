"""The Java client's transactions against kbroker: transaction version 2 (KIP-890).

kbroker finalizes ``transaction.version`` 2, so Kafka 4.3.1's KafkaProducer sends Produce v12+
without AddPartitionsToTxn, TxnOffsetCommit v5 without AddOffsetsToTxn, and EndTxn v5, whose
epoch bump it adopts. A small producer-only program (tests/end_to_end/java/, compiled here
with javac) commits, aborts and commits with offsets; the partition then shows the producer
at the epoch of three bumps, consumers see exactly the committed records, and the committed
offset is in ``__consumer_offsets`` (resolved by the commit marker).
librdkafka 2.16 does not use transaction version 2 (it stays on EndTxn v1 / Produce v10 with
AddPartitionsToTxn); tests/end_to_end/test_transactions.py covers it.
"""

from __future__ import annotations

import asyncio
import os
import pathlib
import subprocess

from kio.schema.describe_producers.v0 import request as describe_producers

from compat.deps import kafka_classpath
from tests.broker_process import BrokerProcess
from tests.end_to_end.test_transactions import _offsets_on_disk, read
from tests.kbroker.handlers.wire import call

SOURCE = pathlib.Path(__file__).parent / "java" / "TransactionalProducer.java"
JAVA = ["java", "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1"]


def test_java_producer_commits_and_aborts_with_transaction_version_2(tmp_path) -> None:
    classes = tmp_path / "classes"
    compiled = subprocess.run(["javac", "-nowarn", "-d", str(classes), "-cp", kafka_classpath(), str(SOURCE)],
                              capture_output=True, text=True, timeout=120)
    assert compiled.returncode == 0, compiled.stderr[-2000:]
    broker = BrokerProcess(str(tmp_path / "data"))
    broker.start()
    try:
        command = [*JAVA, "-cp", f"{classes}{os.pathsep}{kafka_classpath()}", "TransactionalProducer",
                   broker.bootstrap, "java-tv2", "java-tv2-txn", "java-tv2-group"]
        done = subprocess.run(command, capture_output=True, text=True, timeout=120,
                              env={**os.environ, "KAFKA_LOG4J_OPTS": ""})
        assert (done.returncode, done.stdout.strip()) == (0, "done"), done.stderr[-3000:]

        assert read(broker.bootstrap, "java-tv2", "read_committed") == [b"c1", b"c2", b"c3"]
        assert read(broker.bootstrap, "java-tv2", "read_uncommitted") == [b"c1", b"c2", b"a1", b"c3"]
        partition = call(broker.bootstrap, describe_producers.DescribeProducersRequest(topics=(
            describe_producers.TopicRequest(name="java-tv2", partition_indexes=(0,)),)), 0).topics[0].partitions[0]
        # InitProducerId gave epoch 0; each of the three EndTxn v5 bumped it (TV1 would leave 0).
        assert [(p.producer_epoch, p.current_txn_start_offset) for p in partition.active_producers] == [(3, -1)]
    finally:
        broker.close()
    offsets = asyncio.run(_offsets_on_disk(str(tmp_path / "data"), "java-tv2-group"))
    assert offsets[("java-tv2", 0)].offset == 42
