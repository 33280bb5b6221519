"""Transaction APIs no client library drives directly, as bare requests against a real broker:
DescribeTransactions, ListTransactions, DescribeProducers, WriteTxnMarkers, and the
coordinator's error codes for AddPartitionsToTxn / EndTxn."""

from __future__ import annotations

from kio.schema.add_partitions_to_txn.v3 import request as add_partitions_v3
from kio.schema.add_partitions_to_txn.v5 import request as add_partitions_v5
from kio.schema.describe_producers.v0 import request as describe_producers
from kio.schema.describe_transactions.v0 import request as describe_transactions
from kio.schema.end_txn.v5 import request as end_txn
from kio.schema.list_transactions.v2 import request as list_transactions
from kio.schema.write_txn_markers.v2 import request as write_txn_markers
from kio.static.primitive import i8, i16, i32, i64

from tests.broker_process import BrokerProcess

from .clients import producer_id
from .test_produce_verification import wait_ended
from .wire import call


def _add(bootstrap: str, txn: str, pid: int, epoch: int, topic: str, partitions: tuple[int, ...]) -> list[int]:
    request = add_partitions_v3.AddPartitionsToTxnRequest(
        v3_and_below_transactional_id=txn, v3_and_below_producer_id=i64(pid),
        v3_and_below_producer_epoch=i16(epoch),
        v3_and_below_topics=(add_partitions_v3.AddPartitionsToTxnTopic(name=topic, partitions=partitions),),
    )
    response = call(bootstrap, request, 3)
    return [r.partition_error_code for t in response.results_by_topic_v3_and_below for r in t.results_by_partition]


def _end(bootstrap: str, txn: str, pid: int, epoch: int, commit: bool) -> int:
    request = end_txn.EndTxnRequest(transactional_id=txn, producer_id=i64(pid), producer_epoch=i16(epoch),
                                    committed=commit)
    return call(bootstrap, request, 5).error_code


def test_transaction_lifecycle_as_described_and_listed(broker: BrokerProcess) -> None:
    from kafka.admin import KafkaAdminClient, NewTopic

    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    admin.create_topics([NewTopic("txn-apis", 2, 1)])
    admin.close()
    error, pid, epoch = producer_id(broker.bootstrap, "apis")
    assert error == 0
    assert _add(broker.bootstrap, "apis", pid + 1, epoch, "txn-apis", (0,)) == [49]  # INVALID_PRODUCER_ID_MAPPING
    assert _add(broker.bootstrap, "apis", pid, epoch, "txn-apis", (0, 7)) == [55, 3]  # NOT_ATTEMPTED, UNKNOWN
    assert _add(broker.bootstrap, "apis", pid, epoch, "txn-apis", (0, 1)) == [0, 0]

    verify = add_partitions_v5.AddPartitionsToTxnRequest(transactions=(add_partitions_v5.AddPartitionsToTxnTransaction(
        transactional_id="apis", producer_id=i64(pid), producer_epoch=i16(epoch), verify_only=True,
        topics=(add_partitions_v5.AddPartitionsToTxnTopic(name="txn-apis", partitions=(0,)),),
    ),))
    verified = call(broker.bootstrap, verify, 5).results_by_transaction[0].topic_results[0].results_by_partition
    assert [r.partition_error_code for r in verified] == [0]

    # (kio's reader refuses the -1 start time Kafka sends for ids with no open transaction, so
    # only an ongoing one is described here; the others are checked through ListTransactions.)
    described = call(broker.bootstrap, describe_transactions.DescribeTransactionsRequest(
        transactional_ids=("apis",)), 0).transaction_states
    assert (described[0].error_code, described[0].transaction_state, described[0].producer_id) == (0, "Ongoing", pid)
    assert [(t.topic, t.partitions) for t in described[0].topics] == [("txn-apis", (0, 1))]

    listed = call(broker.bootstrap, list_transactions.ListTransactionsRequest(
        state_filters=("Ongoing", "Bogus"), producer_id_filters=(), duration_filter=i64(-1),
        transactional_id_pattern="ap.*"), 2)
    assert listed.unknown_state_filters == ("Bogus",)
    assert [(s.transactional_id, s.transaction_state) for s in listed.transaction_states] == [("apis", "Ongoing")]

    assert _end(broker.bootstrap, "apis", pid, epoch + 1, True) == 90  # PRODUCER_FENCED
    assert _end(broker.bootstrap, "apis", pid, epoch, False) == 0
    assert _end(broker.bootstrap, "apis", pid, epoch, False) in (0, 51)  # a retry: CONCURRENT_TRANSACTIONS ...
    wait_ended(broker.bootstrap, "apis")
    assert _end(broker.bootstrap, "apis", pid, epoch, False) == 0  # ... until the markers are written
    assert _end(broker.bootstrap, "apis", pid, epoch, True) == 48  # INVALID_TXN_STATE
    listed = call(broker.bootstrap, list_transactions.ListTransactionsRequest(
        state_filters=(), producer_id_filters=(i64(pid),), duration_filter=i64(-1), transactional_id_pattern=None), 2)
    assert [(s.transactional_id, s.transaction_state) for s in listed.transaction_states] == [("apis", "CompleteAbort")]

    producers = call(broker.bootstrap, describe_producers.DescribeProducersRequest(topics=(
        describe_producers.TopicRequest(name="txn-apis", partition_indexes=(0, 9)),)), 0).topics[0].partitions
    # The abort marker registered the producer on partition 0 with no open transaction, at the
    # epoch EndTxn v5 (transaction version 2) bumped to.
    assert [(p.producer_id, p.producer_epoch, p.current_txn_start_offset) for p in producers[0].active_producers] == [
        (pid, epoch + 1, -1)]
    assert producers[1].error_code == 3


def test_write_txn_markers(broker: BrokerProcess) -> None:
    request = write_txn_markers.WriteTxnMarkersRequest(markers=(write_txn_markers.WritableTxnMarker(
        producer_id=i64(123456), producer_epoch=i16(3), transaction_result=True, coordinator_epoch=i32(0),
        transaction_version=i8(0),
        topics=(write_txn_markers.WritableTxnMarkerTopic(name="no-such-topic", partition_indexes=(0,)),),
    ),))
    result = call(broker.bootstrap, request, 2).markers[0]
    assert (result.producer_id, result.topics[0].partitions[0].error_code) == (123456, 3)
