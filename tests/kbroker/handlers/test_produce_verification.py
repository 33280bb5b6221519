"""KIP-890 part 1: the leader verifies a transactional Produce with the coordinator.

Bare Produce requests against a real broker, as Kafka 4.3 answers them (ReplicaManager's
postVerificationCallback and AddPartitionsToTxnManager): a transactional batch for a partition
never added to the transaction is refused — INVALID_TXN_STATE up to v10, TRANSACTION_ABORTABLE
in v11 — and never written; v12+ adds the partition itself; an older epoch is
INVALID_PRODUCER_EPOCH. TxnOffsetCommit likewise for the group's offsets partition. Also
scenario S9 over the wire with TV1 requests: a Produce of transaction T1 held back until T1
was aborted and T2 committed is refused and never visible.
"""

from __future__ import annotations

import datetime
import time

from confluent_kafka.admin import AdminClient
from kbroker.protocol.record_builder import build_batch
from kbroker.protocol.records import TRANSACTIONAL_FLAG
from kio.schema.add_partitions_to_txn.v3 import request as add_partitions_v3
from kio.schema.describe_transactions.v0 import request as describe_transactions
from kio.schema.end_txn.v3 import request as end_txn
from kio.schema.produce.v10 import request as produce_v10
from kio.schema.produce.v11 import request as produce_v11
from kio.schema.produce.v12 import request as produce_v12
from kio.schema.txn_offset_commit.v3 import request as txn_offset_commit_v3
from kio.schema.txn_offset_commit.v4 import request as txn_offset_commit_v4
from kio.schema.txn_offset_commit.v5 import request as txn_offset_commit_v5
from kio.static.primitive import i16, i32, i64

from tests.broker_process import BrokerProcess
from tests.end_to_end.test_transactions import end_offsets, read

from .clients import create, producer_id
from .wire import call

_PRODUCE = {10: produce_v10, 11: produce_v11, 12: produce_v12}
_TXN_OFFSET_COMMIT = {3: txn_offset_commit_v3, 4: txn_offset_commit_v4, 5: txn_offset_commit_v5}
INVALID_TXN_STATE, INVALID_PRODUCER_EPOCH, TRANSACTION_ABORTABLE, CONCURRENT_TRANSACTIONS = 48, 47, 120, 51


def txn_batch(pid: int, epoch: int, sequence: int, *values: bytes) -> bytes:
    return build_batch([(None, v) for v in values], attributes=TRANSACTIONAL_FLAG, producer_id=pid,
                       producer_epoch=epoch, base_sequence=sequence, base_timestamp=1_700_000_000_000)


def produce(bootstrap: str, version: int, txn: str | None, topic: str, partition: int,
            records: bytes) -> tuple[int, str | None]:
    """One transactional Produce (acks=all); the partition's (error code, error message)."""
    m = _PRODUCE[version]
    request = m.ProduceRequest(
        transactional_id=txn, acks=i16(-1), timeout=datetime.timedelta(seconds=10),
        topic_data=(m.TopicProduceData(name=topic, partition_data=(
            m.PartitionProduceData(index=i32(partition), records=records),)),),
    )
    [row] = call(bootstrap, request, version).responses[0].partition_responses
    return row.error_code, row.error_message


def add_partitions(bootstrap: str, txn: str, pid: int, epoch: int, topic: str, partition: int) -> int:
    """AddPartitionsToTxn v3, retried while the previous transaction's markers are still being
    written (CONCURRENT_TRANSACTIONS, as Kafka answers and clients retry)."""
    request = add_partitions_v3.AddPartitionsToTxnRequest(
        v3_and_below_transactional_id=txn, v3_and_below_producer_id=i64(pid),
        v3_and_below_producer_epoch=i16(epoch),
        v3_and_below_topics=(add_partitions_v3.AddPartitionsToTxnTopic(name=topic, partitions=(partition,)),),
    )
    deadline = time.monotonic() + 10
    while True:
        response = call(bootstrap, request, 3)
        error = response.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code
        if error != CONCURRENT_TRANSACTIONS or time.monotonic() > deadline:
            return error
        time.sleep(0.02)


def wait_ended(bootstrap: str, txn: str) -> None:
    """After EndTxn the markers are written asynchronously (Kafka's flow): wait until the
    transaction is complete, as a client's next transactional request would by retrying."""
    deadline = time.monotonic() + 10
    while True:
        state = call(bootstrap, describe_transactions.DescribeTransactionsRequest(
            transactional_ids=(txn,)), 0).transaction_states[0].transaction_state
        if state in ("CompleteCommit", "CompleteAbort", "Empty"):
            return
        assert time.monotonic() < deadline, state
        time.sleep(0.02)


def end(bootstrap: str, txn: str, pid: int, epoch: int, commit: bool) -> int:
    request = end_txn.EndTxnRequest(transactional_id=txn, producer_id=i64(pid), producer_epoch=i16(epoch),
                                    committed=commit)
    return call(bootstrap, request, 3).error_code


def test_unadded_partition_is_refused_per_version(broker: BrokerProcess, cadmin: AdminClient) -> None:
    topic = create(cadmin, partitions=2)
    error, pid, epoch = producer_id(broker.bootstrap, "verify-1")
    assert error == 0
    assert produce(broker.bootstrap, 10, "verify-1", topic, 0, txn_batch(pid, epoch, 0, b"x")) == (
        INVALID_TXN_STATE, "Partition was not added to the transaction")
    assert produce(broker.bootstrap, 11, "verify-1", topic, 0, txn_batch(pid, epoch, 0, b"x")) == (
        TRANSACTION_ABORTABLE, None)
    assert end_offsets(broker.bootstrap, topic) == (0, 0)  # nothing written

    assert add_partitions(broker.bootstrap, "verify-1", pid, epoch, topic, 0) == 0
    assert produce(broker.bootstrap, 11, "verify-1", topic, 0, txn_batch(pid, epoch, 0, b"in")) == (0, None)
    # Partition 1 is still not in the transaction, even though partition 0 now is.
    assert produce(broker.bootstrap, 11, "verify-1", topic, 1, txn_batch(pid, epoch, 0, b"out")) == (
        TRANSACTION_ABORTABLE, None)
    assert end(broker.bootstrap, "verify-1", pid, epoch, True) == 0
    assert read(broker.bootstrap, topic, "read_uncommitted", partitions=2) == [b"in"]

    # The producer's old epoch after a new session: fenced at verification.
    error, pid2, epoch2 = producer_id(broker.bootstrap, "verify-1", pid, epoch)
    assert (error, pid2, epoch2) == (0, pid, epoch + 1)
    assert produce(broker.bootstrap, 11, "verify-1", topic, 1, txn_batch(pid, epoch, 1, b"old")) == (
        INVALID_PRODUCER_EPOCH, None)
    # An unknown transactional id.
    assert produce(broker.bootstrap, 11, "verify-none", topic, 1, txn_batch(pid, epoch2, 0, b"x"))[0] == 49
    assert read(broker.bootstrap, topic, "read_uncommitted", partitions=2) == [b"in"]


def test_produce_v12_adds_the_partition(broker: BrokerProcess, cadmin: AdminClient) -> None:
    topic = create(cadmin)
    error, pid, epoch = producer_id(broker.bootstrap, "verify-add")
    assert error == 0
    assert produce(broker.bootstrap, 12, "verify-add", topic, 0, txn_batch(pid, epoch, 0, b"a")) == (0, None)
    described = call(broker.bootstrap, describe_transactions.DescribeTransactionsRequest(
        transactional_ids=("verify-add",)), 0).transaction_states[0]
    assert (described.transaction_state, [(t.topic, t.partitions) for t in described.topics]) == (
        "Ongoing", [(topic, (0,))])
    assert end(broker.bootstrap, "verify-add", pid, epoch, True) == 0
    assert read(broker.bootstrap, topic, "read_committed") == [b"a"]


def test_s9_late_produce_of_an_aborted_transaction(broker: BrokerProcess, cadmin: AdminClient) -> None:
    """S9 with transaction version 1 requests: T1 writes a, its second Produce (b) is held
    back; T1 is aborted; T2 writes c and commits; then T1's held Produce arrives."""
    topic = create(cadmin)
    txn = "s9-tv1"
    error, pid, epoch = producer_id(broker.bootstrap, txn)
    assert error == 0
    assert add_partitions(broker.bootstrap, txn, pid, epoch, topic, 0) == 0
    assert produce(broker.bootstrap, 11, txn, topic, 0, txn_batch(pid, epoch, 0, b"t1-a")) == (0, None)
    held = txn_batch(pid, epoch, 1, b"t1-b")  # in flight, delayed on the network
    assert end(broker.bootstrap, txn, pid, epoch, False) == 0
    wait_ended(broker.bootstrap, txn)
    assert add_partitions(broker.bootstrap, txn, pid, epoch, topic, 0) == 0
    assert produce(broker.bootstrap, 11, txn, topic, 0, txn_batch(pid, epoch, 1, b"t2-c")) == (0, None)
    assert end(broker.bootstrap, txn, pid, epoch, True) == 0
    wait_ended(broker.bootstrap, txn)

    assert produce(broker.bootstrap, 11, txn, topic, 0, held) == (TRANSACTION_ABORTABLE, None)
    assert produce(broker.bootstrap, 10, txn, topic, 0, held)[0] == INVALID_TXN_STATE
    assert read(broker.bootstrap, topic, "read_committed") == [b"t2-c"]
    assert read(broker.bootstrap, topic, "read_uncommitted") == [b"t1-a", b"t2-c"]
    # Nothing was appended after T2's marker, and no transaction is left open.
    committed_end, high_watermark = end_offsets(broker.bootstrap, topic)
    assert committed_end == high_watermark == 4  # t1-a, abort marker, t2-c, commit marker


def txn_offset_commit(bootstrap: str, version: int, txn: str, pid: int, epoch: int, group: str, topic: str) -> int:
    """One TxnOffsetCommit (v3-v5 share the shape) of offset 5 for ``topic``-0: its error code."""
    m = _TXN_OFFSET_COMMIT[version]
    request = m.TxnOffsetCommitRequest(
        transactional_id=txn, group_id=group, producer_id=i64(pid), producer_epoch=i16(epoch),
        generation_id=i32(-1), member_id="", group_instance_id=None,
        topics=(m.TxnOffsetCommitRequestTopic(name=topic, partitions=(m.TxnOffsetCommitRequestPartition(
            partition_index=i32(0), committed_offset=i64(5), committed_leader_epoch=i32(-1),
            committed_metadata=None),)),),
    )
    return call(bootstrap, request, version).topics[0].partitions[0].error_code


def test_txn_offset_commit_needs_the_offsets_partition(broker: BrokerProcess, cadmin: AdminClient) -> None:
    """KIP-890 for offsets: TxnOffsetCommit up to v4 needs AddOffsetsToTxn first (v0-3
    INVALID_TXN_STATE, v4 TRANSACTION_ABORTABLE); v5 adds the group's offsets partition itself."""
    topic = create(cadmin)
    error, pid, epoch = producer_id(broker.bootstrap, "verify-offsets")
    assert error == 0
    assert add_partitions(broker.bootstrap, "verify-offsets", pid, epoch, topic, 0) == 0  # ongoing, no offsets
    assert txn_offset_commit(broker.bootstrap, 3, "verify-offsets", pid, epoch, "vo-group", topic) == (
        INVALID_TXN_STATE)
    assert txn_offset_commit(broker.bootstrap, 4, "verify-offsets", pid, epoch, "vo-group", topic) == (
        TRANSACTION_ABORTABLE)
    assert txn_offset_commit(broker.bootstrap, 5, "verify-offsets", pid, epoch, "vo-group", topic) == 0
    described = call(broker.bootstrap, describe_transactions.DescribeTransactionsRequest(
        transactional_ids=("verify-offsets",)), 0).transaction_states[0]
    assert sorted(t.topic for t in described.topics) == sorted([topic, "__consumer_offsets"])
    assert txn_offset_commit(broker.bootstrap, 3, "verify-offsets", pid, epoch, "vo-group", topic) == 0
    assert end(broker.bootstrap, "verify-offsets", pid, epoch, True) == 0
