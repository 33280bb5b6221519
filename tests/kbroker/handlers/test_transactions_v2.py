"""Transaction version 2 (KIP-890 part 2) over bare requests, as Kafka 4.3 answers them.

EndTxn v5 bumps the epoch on every commit and abort and returns it; a retry carries the
epoch before the bump; Produce v12 adds its partition to the transaction; the markers carry
the bumped epoch, so a Produce of an ended transaction is fenced (INVALID_PRODUCER_EPOCH)
and never visible — scenario S9 with the held Produce released both during the next
transaction and after it committed. The ``__transaction_state`` value v1 round trip too.
"""

from __future__ import annotations

from confluent_kafka.admin import AdminClient
from kio.schema.end_txn.v5 import request as end_txn_v5
from kio.static.primitive import i16, i64

from kbroker.transactions.transaction_log import TransactionMetadata, TransactionState, decode, encode_key, encode_value
from tests.broker_process import BrokerProcess
from tests.end_to_end.test_transactions import end_offsets, read

from .clients import create, producer_id
from .test_produce_verification import (
    CONCURRENT_TRANSACTIONS,
    INVALID_PRODUCER_EPOCH,
    INVALID_TXN_STATE,
    produce,
    txn_batch,
    wait_ended,
)
from .wire import call

PRODUCER_FENCED = 90


def end_v5(bootstrap: str, txn: str, pid: int, epoch: int, commit: bool) -> tuple[int, int, int]:
    """EndTxn v5: (error code, producer id, producer epoch) of the response."""
    response = call(bootstrap, end_txn_v5.EndTxnRequest(
        transactional_id=txn, producer_id=i64(pid), producer_epoch=i16(epoch), committed=commit), 5)
    return response.error_code, response.producer_id, response.producer_epoch


def test_end_txn_v5_bumps_the_epoch_and_answers_retries(broker: BrokerProcess, cadmin: AdminClient) -> None:
    topic = create(cadmin)
    txn = "tv2-end"
    error, pid, epoch = producer_id(broker.bootstrap, txn)
    assert error == 0
    assert produce(broker.bootstrap, 12, txn, topic, 0, txn_batch(pid, epoch, 0, b"one")) == (0, None)
    assert end_v5(broker.bootstrap, txn, pid, epoch, True) == (0, pid, epoch + 1)
    # A retry while the markers are on their way: CONCURRENT_TRANSACTIONS, as Kafka answers;
    # once the transaction is complete: NONE with the bumped epoch.
    assert end_v5(broker.bootstrap, txn, pid, epoch, True)[0] in (CONCURRENT_TRANSACTIONS, 0)
    wait_ended(broker.bootstrap, txn)
    assert end_v5(broker.bootstrap, txn, pid, epoch, True) == (0, pid, epoch + 1)  # a retry
    assert end_v5(broker.bootstrap, txn, pid, epoch, False)[0] == INVALID_TXN_STATE  # not a retry of that
    assert end_v5(broker.bootstrap, txn, pid, epoch + 1, True) == (INVALID_TXN_STATE, -1, -1)  # nothing open
    assert end_v5(broker.bootstrap, txn, pid, epoch - 1, True) == (PRODUCER_FENCED, -1, -1)

    # The next transaction at the new epoch, sequence from 0; aborting it bumps again.
    wait_ended(broker.bootstrap, txn)
    assert produce(broker.bootstrap, 12, txn, topic, 0, txn_batch(pid, epoch + 1, 0, b"two")) == (0, None)
    assert end_v5(broker.bootstrap, txn, pid, epoch + 1, False) == (0, pid, epoch + 2)
    wait_ended(broker.bootstrap, txn)
    # Aborting with nothing open still bumps (Kafka's TV2 table: CompleteAbort/Empty + abort).
    assert end_v5(broker.bootstrap, txn, pid, epoch + 2, False) == (0, pid, epoch + 3)
    assert read(broker.bootstrap, topic, "read_committed") == [b"one"]
    assert read(broker.bootstrap, topic, "read_uncommitted") == [b"one", b"two"]


def test_s9_late_produce_is_fenced_by_the_epoch_bump(broker: BrokerProcess, cadmin: AdminClient) -> None:
    """S9: T1 writes a, its second Produce (b) is held back; T1 aborts; T2 writes c; the held
    Produce arrives during T2 and again after T2 committed: fenced both times."""
    topic = create(cadmin)
    txn = "tv2-s9"
    error, pid, epoch = producer_id(broker.bootstrap, txn)
    assert error == 0
    assert produce(broker.bootstrap, 12, txn, topic, 0, txn_batch(pid, epoch, 0, b"t1-a")) == (0, None)
    held = txn_batch(pid, epoch, 1, b"t1-b")
    error, pid2, epoch2 = end_v5(broker.bootstrap, txn, pid, epoch, False)
    assert (error, pid2, epoch2) == (0, pid, epoch + 1)
    wait_ended(broker.bootstrap, txn)
    assert produce(broker.bootstrap, 12, txn, topic, 0, txn_batch(pid, epoch2, 0, b"t2-c")) == (0, None)
    # During T2 (the hole transaction version 1 leaves open): the held write would join T2.
    assert produce(broker.bootstrap, 12, txn, topic, 0, held) == (INVALID_PRODUCER_EPOCH, None)
    assert end_v5(broker.bootstrap, txn, pid, epoch2, True) == (0, pid, epoch2 + 1)
    wait_ended(broker.bootstrap, txn)
    assert produce(broker.bootstrap, 12, txn, topic, 0, held) == (INVALID_PRODUCER_EPOCH, None)
    assert produce(broker.bootstrap, 11, txn, topic, 0, held) == (INVALID_PRODUCER_EPOCH, None)

    assert read(broker.bootstrap, topic, "read_committed") == [b"t2-c"]
    assert read(broker.bootstrap, topic, "read_uncommitted") == [b"t1-a", b"t2-c"]
    assert end_offsets(broker.bootstrap, topic) == (4, 4)  # t1-a, abort marker, t2-c, commit marker


def test_transaction_log_value_v1_round_trip() -> None:
    # Every value is written as v1, as Kafka 4.3.1 writes them (v0 values are still read:
    # tests/protocol/test_internal_records.py)
    v0 = TransactionMetadata("a", 7, 3, 60000, TransactionState.ONGOING, {("t", 1), ("t", 0), ("u", 2)}, 10, 5)
    assert encode_value(v0)[:2] == b"\x00\x01"
    assert decode(encode_key("a"), encode_value(v0))[1] == v0
    v1 = TransactionMetadata("a", 7, 32767, 60000, TransactionState.PREPARE_COMMIT, {("t", 1), ("t", 0)}, 10, 5,
                             previous_producer_id=6, next_producer_id=8, client_transaction_version=2)
    assert encode_value(v1)[:2] == b"\x00\x01"
    assert decode(encode_key("a"), encode_value(v1))[1] == v1
