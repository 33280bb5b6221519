"""The transaction coordinator's replication safety on a 3-broker cluster, Kafka 4.3.1 and kbroker side by side.

The same bare requests and assertions on both shared clusters (conftest.py: controller 100,
brokers 1-3, ``__transaction_state`` RF 3 with min ISR 2, replica.lag.time.max.ms 3000):

* DescribeTransactions is answered by the transactional id's coordinator only; the other
  brokers answer NOT_COORDINATOR, and ``kafka-transactions describe`` bootstrapped from one of
  them finds the coordinator and prints the state.
* A state change is pending until its ``__transaction_state`` record is replicated (Kafka's
  pendingState): with the coordinator's two followers paused, an EndTxn(commit) waits; a
  concurrent AddPartitionsToTxn for the id gets CONCURRENT_TRANSACTIONS and DescribeTransactions
  still shows Ongoing; with the followers back (before they could be fenced) the EndTxn is
  answered NONE and the transaction completes. (A change that cannot be replicated leaving the
  state as it was is checked in tests/kbroker/transactions/test_pending_state.py.)
* A partition leader refuses a marker from an older coordinator epoch than the producer's last
  one with TRANSACTION_COORDINATOR_FENCED (WriteTxnMarkers as the coordinator sends it).
"""

from __future__ import annotations

import datetime
import re
import shutil
import socket
import struct
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from kbroker.protocol.wire import Reader
from kio.schema.add_partitions_to_txn.v3 import request as add_partitions_v3
from kio.schema.describe_transactions.v0 import request as describe_transactions
from kio.schema.end_txn.v3 import request as end_txn
from kio.schema.find_coordinator.v4 import request as find_coordinator
from kio.schema.init_producer_id.v4 import request as init_producer_id
from kio.schema.write_txn_markers.v1 import request as write_txn_markers
from kio.static.primitive import i16, i32, i64

from compat.cluster import Cluster
from compat.deps import kafka_classpath
from tests.end_to_end.test_java_cli import LOG4J2_CONFIG, KafkaCli
from tests.kbroker.handlers.wire import call, request_frame

TRANSACTIONS = "org.apache.kafka.tools.TransactionsCommand"
DEADLINE_S = 60.0
TXN_TIMEOUT = datetime.timedelta(minutes=5)  # never aborted for its age during a test
NONE, COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR = 0, 15, 16
CONCURRENT_TRANSACTIONS, TRANSACTION_COORDINATOR_FENCED, TRANSACTIONAL_ID_NOT_FOUND = 51, 52, 105
# What a client retries while the coordinator is being found, loaded or is finishing a change.
RETRIABLE = {COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR, 14, CONCURRENT_TRANSACTIONS}

T = TypeVar("T")


@pytest.fixture(scope="module")
def cli(tmp_path_factory: pytest.TempPathFactory) -> KafkaCli:
    java = shutil.which("java")
    assert java is not None, "the kafka-transactions checks need a Java 17+ runtime"
    log4j = tmp_path_factory.mktemp("txn-cli") / "log4j2.properties"
    log4j.write_text(LOG4J2_CONFIG)
    return KafkaCli(java, kafka_classpath(), log4j)


def wait_for(what: str, attempt: Callable[[], T | None], timeout: float = DEADLINE_S) -> T:
    deadline = time.monotonic() + timeout
    while True:
        result = attempt()
        if result is not None:
            return result
        assert time.monotonic() < deadline, f"not within {timeout:.0f} s: {what}"
        time.sleep(0.05)


def create_topic(cluster: Cluster, name: str) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic(name, 1, 3)])[name].result(timeout=30)
    wait_for(f"{name} has a leader", lambda: leader_of(cluster, name))


def leader_of(cluster: Cluster, topic: str) -> int | None:
    partitions = cluster.metadata(cluster.broker_ids[0], [topic]).topics[0].partitions
    return partitions[0].leader_id if partitions and partitions[0].leader_id >= 0 else None


def coordinator_of(cluster: Cluster, transactional_id: str) -> int:
    """FindCoordinator (which creates ``__transaction_state`` at first use) until it names one."""
    request = find_coordinator.FindCoordinatorRequest(key_type=1, coordinator_keys=(transactional_id,))

    def attempt() -> int | None:
        answer = call(cluster.bootstrap.split(",")[0], request, 4).coordinators[0]
        return answer.node_id if answer.error_code == NONE else None

    return wait_for(f"a coordinator for {transactional_id}", attempt)


def init_producer(bootstrap: str, transactional_id: str | None) -> tuple[int, int]:
    request = init_producer_id.InitProducerIdRequest(
        transactional_id=transactional_id, transaction_timeout=TXN_TIMEOUT, producer_id=i64(-1),
        producer_epoch=i16(-1))

    def attempt() -> tuple[int, int] | None:
        answer = call(bootstrap, request, 4)
        assert answer.error_code in RETRIABLE | {NONE}, answer
        return (answer.producer_id, answer.producer_epoch) if answer.error_code == NONE else None

    return wait_for(f"InitProducerId for {transactional_id}", attempt)


def add_partition(bootstrap: str, transactional_id: str, pid: int, epoch: int, topic: str) -> int:
    request = add_partitions_v3.AddPartitionsToTxnRequest(
        v3_and_below_transactional_id=transactional_id, v3_and_below_producer_id=i64(pid),
        v3_and_below_producer_epoch=i16(epoch),
        v3_and_below_topics=(add_partitions_v3.AddPartitionsToTxnTopic(name=topic, partitions=(i32(0),)),))
    return call(bootstrap, request, 3).results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code


def end_transaction(bootstrap: str, transactional_id: str, pid: int, epoch: int, timeout: float = 10.0) -> int:
    request = end_txn.EndTxnRequest(transactional_id=transactional_id, producer_id=i64(pid),
                                    producer_epoch=i16(epoch), committed=True)
    return call(bootstrap, request, 3, timeout=timeout).error_code


@dataclass(frozen=True)
class Described:
    error_code: int
    transaction_state: str
    producer_id: int
    producer_epoch: int


def describe(bootstrap: str, transactional_id: str) -> Described:
    """DescribeTransactions v0 for one id, its response read field by field: kio refuses the
    start time -1 both brokers give an id with no open transaction."""
    request = describe_transactions.DescribeTransactionsRequest(transactional_ids=(transactional_id,))
    host, port = bootstrap.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(request_frame(request, 0))
        frame = receive(sock, struct.unpack(">i", receive(sock, 4))[0])
    reader = Reader(memoryview(frame), 4 + 1 + 4, flexible=True)  # correlation id, header tags, throttle time
    assert reader.array_length() == 1
    error_code = reader.int16()
    assert reader.nullable_string() == transactional_id
    state = reader.nullable_string() or ""
    reader.int32()  # transaction timeout
    start = reader.pos + 8  # past the start time
    producer_id, producer_epoch = struct.unpack_from(">qh", frame, start)
    return Described(error_code, state, producer_id, producer_epoch)


def receive(sock: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        assert chunk, "the broker closed the connection"
        data += chunk
    return data


def test_describe_transactions_is_answered_by_the_coordinator_only(cluster: Cluster, cli: KafkaCli) -> None:
    transactional_id = "safety-describe"
    coordinator = coordinator_of(cluster, transactional_id)
    pid, epoch = init_producer(cluster.nodes[coordinator].bootstrap, transactional_id)
    state = describe(cluster.nodes[coordinator].bootstrap, transactional_id)
    assert (state.error_code, state.transaction_state, state.producer_id, state.producer_epoch) == (
        NONE, "Empty", pid, epoch)
    others = [b for b in cluster.broker_ids if b != coordinator]
    for broker in others:
        state = describe(cluster.nodes[broker].bootstrap, transactional_id)
        assert (state.error_code, state.transaction_state, state.producer_id) == (NOT_COORDINATOR, "", 0)
    # An id nobody has used: its coordinator does not know it, the others are not its coordinator.
    unknown = "safety-never-used"
    unknown_coordinator = coordinator_of(cluster, unknown)
    assert {b: describe(cluster.nodes[b].bootstrap, unknown).error_code for b in cluster.broker_ids} == {
        b: TRANSACTIONAL_ID_NOT_FOUND if b == unknown_coordinator else NOT_COORDINATOR for b in cluster.broker_ids}

    # The admin tool, bootstrapped from a broker that is not the coordinator, finds it.
    printed = cli.run(TRANSACTIONS, "--bootstrap-server", cluster.nodes[others[0]].bootstrap, "describe",
                      "--transactional-id", transactional_id).text
    header, row = printed.strip().splitlines()
    fields = dict(zip(header.split(), re.split(r"\s{2,}|\t", row.strip()), strict=False))
    assert (fields["CoordinatorId"], fields["TransactionalId"], fields["ProducerId"], fields["ProducerEpoch"],
            fields["TransactionState"]) == (str(coordinator), transactional_id, str(pid), str(epoch), "Empty")


def test_a_state_change_is_pending_until_replicated(cluster: Cluster) -> None:
    transactional_id, topic = "safety-pending", "safety-pending"
    create_topic(cluster, topic)
    coordinator = coordinator_of(cluster, transactional_id)
    at = cluster.nodes[coordinator].bootstrap
    pid, epoch = init_producer(at, transactional_id)
    assert add_partition(at, transactional_id, pid, epoch, topic) == NONE
    followers = [b for b in cluster.broker_ids if b != coordinator]
    outcome: list[int] = []
    ending = threading.Thread(target=lambda: outcome.append(end_transaction(at, transactional_id, pid, epoch,
                                                                            timeout=DEADLINE_S)))
    for broker in followers:
        cluster.pause(broker)
    try:
        # EndTxn waits for its PrepareCommit record to reach the ISR, which no follower fetches now.
        ending.start()
        wait_for("AddPartitionsToTxn refused while the EndTxn's change is pending",
                 lambda: True if add_partition(at, transactional_id, pid, epoch, topic) == CONCURRENT_TRANSACTIONS
                 else None)
        assert describe(at, transactional_id).transaction_state == "Ongoing"  # not PrepareCommit yet
        assert outcome == []
    finally:
        # Back well within broker.session.timeout.ms: the followers are never fenced.
        for broker in followers:
            cluster.resume(broker)
    ending.join(DEADLINE_S)
    assert outcome == [NONE]  # answered once the followers have the record
    wait_for("CompleteCommit", lambda: True if describe(at, transactional_id).transaction_state == "CompleteCommit"
             else None)


def test_a_marker_from_an_older_coordinator_epoch_is_fenced(cluster: Cluster) -> None:
    topic = "safety-fenced"
    create_topic(cluster, topic)
    leader = cluster.nodes[wait_for(f"{topic} has a leader", lambda: leader_of(cluster, topic))].bootstrap
    pid, epoch = init_producer(cluster.bootstrap.split(",")[0], None)  # a producer id no coordinator has

    def marker(commit: bool, coordinator_epoch: int) -> int:
        m = write_txn_markers
        request = m.WriteTxnMarkersRequest(markers=(m.WritableTxnMarker(
            producer_id=i64(pid), producer_epoch=i16(epoch), transaction_result=commit,
            topics=(m.WritableTxnMarkerTopic(name=topic, partition_indexes=(i32(0),)),),
            coordinator_epoch=i32(coordinator_epoch)),))
        return call(leader, request, 1).markers[0].topics[0].partitions[0].error_code

    assert marker(False, 100) == NONE
    assert marker(True, 99) == TRANSACTION_COORDINATOR_FENCED
    assert marker(True, 100) == NONE
