"""/metrics scraped while real clients produce and consume: the values are what the clients did.

A broker with ``kbroker.http.listeners`` serves /health/live, /health/ready and /metrics. A
confluent-kafka producer writes an exact number of records to a two-partition topic, a consumer
group reads them and commits chosen offsets; the scrape (parsed by prometheus-client's own parser)
shows exactly that many records in, the produce and fetch timings' histograms moved, the group's
lag per partition equal to the partition's end offset minus its committed offset, and the Kafka
metric names dashboards use.
"""

from __future__ import annotations

import asyncio
import datetime
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kbroker.protocol.codec import build
from kbroker.protocol.record_builder import build_batch
from kbroker.replication.inter_broker_client import InterBrokerClient
from kio.schema.fetch.v12 import request as fetch_v12
from kio.schema.list_offsets.v9 import request as list_offsets_v9
from kio.schema.metadata.v12 import request as metadata_v12
from kio.schema.produce.v9 import request as produce_v9

from tests.broker_process import BrokerProcess
from tests.end_to_end.metrics_endpoint import broker_with_http_listener, get, scrape

TOPIC = "metrics-topic"
GROUP = "metrics-group"
TXN_TOPIC = "metrics-transactions"
RECORDS = {0: 300, 1: 200}  # per partition
COMMITTED = {0: 120, 1: 200}
DEADLINE_S = 60.0

# The families a Kafka dashboard built on the JMX exporter's Kafka example config, or on
# kafka_exporter's lag, reads (names as the exposition has them, counters with _total).
REQUIRED_FAMILIES = {
    "kafka_server_brokertopicmetrics_messagesin_total",
    "kafka_server_brokertopicmetrics_bytesin_total",
    "kafka_server_brokertopicmetrics_bytesout_total",
    "kafka_server_brokertopicmetrics_totalproducerequests_total",
    "kafka_server_brokertopicmetrics_totalfetchrequests_total",
    "kafka_network_requestmetrics_requests_total",
    "kafka_network_requestmetrics_totaltimems",
    "kafka_network_requestmetrics_errors_total",
    "kafka_server_replicamanager_underreplicatedpartitions",
    "kafka_server_replicamanager_underminisrpartitioncount",
    "kafka_server_replicamanager_isrshrinks_total",
    "kafka_server_replicamanager_isrexpands_total",
    "kafka_controller_kafkacontroller_offlinepartitionscount",
    "kafka_controller_kafkacontroller_activecontrollercount",
    "kafka_controller_controllerstats_uncleanleaderelections_total",
    "kafka_controller_controllerstats_leaderelectionrateandtimems_count",
    "kafka_log_log_size",
    "kafka_log_log_numlogsegments",
    "kafka_coordinator_group_groupmetadatamanager_numgroups",
    "kafka_server_socket_server_metrics_connection_count",
    "kafka_consumergroup_current_offset",
    "kafka_consumergroup_lag",
    "kbroker_event_loop_lag_seconds",
}


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[tuple[BrokerProcess, str]]:
    with broker_with_http_listener(tmp_path / "data") as running:
        yield running


def families(http: str) -> set[str]:
    return {name for name, _labels in scrape(http)}


def test_metrics_match_what_the_clients_did(broker: tuple[BrokerProcess, str]) -> None:
    proc, http = broker
    assert get(f"http://{http}/health/live")[0] == 200
    deadline = time.monotonic() + DEADLINE_S
    while get(f"http://{http}/health/ready")[0] != 200:
        assert time.monotonic() < deadline, "never ready"
        time.sleep(0.1)
    admin = AdminClient({"bootstrap.servers": proc.bootstrap})
    admin.create_topics([NewTopic(TOPIC, num_partitions=2, replication_factor=1)])[TOPIC].result(timeout=30)
    before = scrape(http)
    producer = Producer({"bootstrap.servers": proc.bootstrap, "linger.ms": 20})
    for partition, count in RECORDS.items():
        for i in range(count):
            producer.produce(TOPIC, value=b"v%d" % i, partition=partition)
    assert producer.flush(30) == 0
    consumer = Consumer({"bootstrap.servers": proc.bootstrap, "group.id": GROUP, "auto.offset.reset": "earliest",
                         "enable.auto.commit": False})
    consumer.subscribe([TOPIC])
    seen = 0
    while seen < sum(RECORDS.values()):
        assert time.monotonic() < deadline, f"consumed {seen}"
        message = consumer.poll(1.0)
        if message is not None and message.error() is None:
            seen += 1
    consumer.commit(offsets=[TopicPartition(TOPIC, p, o) for p, o in COMMITTED.items()], asynchronous=False)
    consumer.close()

    after = scrape(http)
    topic = (("topic", TOPIC),)
    assert after[("kafka_server_brokertopicmetrics_messagesin_total", topic)] == sum(RECORDS.values())
    assert after[("kafka_server_brokertopicmetrics_bytesin_total", topic)] > 0
    assert after[("kafka_server_brokertopicmetrics_bytesout_total", topic)] > 0
    # The all-topics series (no topic label) counts them too.
    assert after[("kafka_server_brokertopicmetrics_messagesin_total", ())] >= sum(RECORDS.values())
    produce = (("request", "Produce"),)
    assert (after[("kafka_network_requestmetrics_totaltimems_count", produce)]
            > before.get(("kafka_network_requestmetrics_totaltimems_count", produce), 0))
    assert after[("kafka_network_requestmetrics_totaltimems_bucket", (("le", "+Inf"), ("request", "Produce")))] \
        == after[("kafka_network_requestmetrics_totaltimems_count", produce)]
    assert after[("kafka_network_requestmetrics_totaltimems_count", (("request", "FetchConsumer"),))] > 0
    for partition, count in RECORDS.items():
        labels = (("consumergroup", GROUP), ("partition", str(partition)), ("topic", TOPIC))
        assert after[("kafka_consumergroup_current_offset", labels)] == COMMITTED[partition]
        assert after[("kafka_consumergroup_lag", labels)] == count - COMMITTED[partition]
        log = (("partition", str(partition)), ("topic", TOPIC))
        assert after[("kafka_log_log_logendoffset", log)] == count
        assert after[("kafka_log_log_size", log)] > 0
    assert after[("kafka_controller_kafkacontroller_activecontrollercount", ())] == 1
    assert after[("kafka_controller_kafkacontroller_offlinepartitionscount", ())] == 0
    assert after[("kafka_server_replicamanager_underreplicatedpartitions", ())] == 0
    assert after[("kafka_coordinator_group_groupmetadatamanager_numgroups", ())] >= 1
    names = families(http)
    missing = {name for name in REQUIRED_FAMILIES if name not in names and name + "_count" not in names}
    assert not missing, f"missing Kafka metric names: {sorted(missing)}"


def test_coordinator_appends_count_as_messages_and_bytes_in(broker: tuple[BrokerProcess, str]) -> None:
    """Kafka's BrokerTopicMetrics count what the group and transaction coordinators append to
    __consumer_offsets and __transaction_state too, and the transaction's COMMIT marker on its
    topic: on a node where only they and this producer write, messages in equal the logs' end
    offsets and bytes in their sizes."""
    proc, http = broker
    admin = AdminClient({"bootstrap.servers": proc.bootstrap})
    admin.create_topics([NewTopic(TXN_TOPIC, num_partitions=1, replication_factor=1)])[TXN_TOPIC].result(timeout=30)
    producer = Producer({"bootstrap.servers": proc.bootstrap, "transactional.id": "metrics-txn"})
    producer.init_transactions(30)
    producer.begin_transaction()
    producer.produce(TXN_TOPIC, value=b"in a transaction")
    producer.commit_transaction(30)
    consumer = Consumer({"bootstrap.servers": proc.bootstrap, "group.id": GROUP, "enable.auto.commit": False})
    consumer.commit(offsets=[TopicPartition(TXN_TOPIC, 0, 1)], asynchronous=False)
    consumer.close()

    deadline = time.monotonic() + 10
    while True:  # the marker is written after the commit is answered
        samples = scrape(http)
        if samples.get(("kafka_log_log_logendoffset", (("partition", "0"), ("topic", TXN_TOPIC)))) == 2:
            break
        assert time.monotonic() < deadline, "no COMMIT marker on the topic"
        time.sleep(0.05)
    for topic in ("__consumer_offsets", "__transaction_state", TXN_TOPIC):
        def summed(name: str, topic: str = topic) -> float:
            return sum(value for (family, labels), value in samples.items()
                       if family == name and dict(labels).get("topic") == topic)
        counted = (("topic", topic),)
        assert samples[("kafka_server_brokertopicmetrics_messagesin_total", counted)] > 0
        assert samples[("kafka_server_brokertopicmetrics_messagesin_total", counted)] == \
            summed("kafka_log_log_logendoffset")
        assert samples[("kafka_server_brokertopicmetrics_bytesin_total", counted)] == summed("kafka_log_log_size")


def test_errors_count_every_partition_of_an_answer(broker: tuple[BrokerProcess, str]) -> None:
    """ErrorsPerSec counts each error code in an answer, per partition (Kafka's errorCounts()):
    one Produce to two partitions and a missing one, one Fetch and one ListOffsets of the same
    three, and a Metadata of the topic and a missing one."""
    proc, http = broker
    admin = AdminClient({"bootstrap.servers": proc.bootstrap})
    admin.create_topics([NewTopic(TOPIC, num_partitions=2, replication_factor=1)])[TOPIC].result(timeout=30)
    host, port = proc.bootstrap.rsplit(":", 1)
    before = scrape(http)

    async def ask() -> tuple[object, object]:
        client = InterBrokerClient(host, int(port), None, "errors-test")
        try:
            produce = await client.request(0, 9, build(
                produce_v9.ProduceRequest, transactional_id=None, acks=1, timeout=datetime.timedelta(seconds=10),
                topic_data=(build(produce_v9.TopicProduceData, name=TOPIC, partition_data=tuple(
                    build(produce_v9.PartitionProduceData, index=p, records=build_batch([(None, b"x")]))
                    for p in (0, 1, 7))),)))
            fetch = await client.request(1, 12, build(
                fetch_v12.FetchRequest, max_wait=datetime.timedelta(0), min_bytes=0, forgotten_topics_data=(),
                topics=(build(fetch_v12.FetchTopic, topic=TOPIC, partitions=tuple(
                    build(fetch_v12.FetchPartition, partition=p, fetch_offset=0, partition_max_bytes=1024)
                    for p in (0, 1, 7))),)))
            offsets = await client.request(2, 9, build(
                list_offsets_v9.ListOffsetsRequest, replica_id=-1, isolation_level=0, topics=(
                    build(list_offsets_v9.ListOffsetsTopic, name=TOPIC, partitions=tuple(
                        build(list_offsets_v9.ListOffsetsPartition, partition_index=p, timestamp=-1)
                        for p in (0, 1, 7))),)))
            metadata = await client.request(3, 12, build(
                metadata_v12.MetadataRequest, allow_auto_topic_creation=False,
                include_topic_authorized_operations=False, topics=tuple(
                    build(metadata_v12.MetadataRequestTopic, topic_id=None, name=name)
                    for name in (TOPIC, "no-such-topic"))))
            return produce, fetch, offsets, metadata
        finally:
            client.close()

    produce, fetch, offsets, metadata = asyncio.run(ask())
    assert [p.error_code for p in produce.responses[0].partition_responses] == [0, 0, 3]  # type: ignore[attr-defined]
    assert [p.error_code for p in fetch.responses[0].partitions] == [0, 0, 3]  # type: ignore[attr-defined]
    assert [p.error_code for p in offsets.topics[0].partitions] == [0, 0, 3]  # type: ignore[attr-defined]
    assert [(t.error_code, len(t.partitions)) for t in metadata.topics] == [(0, 2), (3, 0)]  # type: ignore[attr-defined]
    after = scrape(http)

    def counted(request: str, error: str) -> float:
        key = ("kafka_network_requestmetrics_errors_total", (("error", error), ("request", request)))
        return after.get(key, 0.0) - before.get(key, 0.0)

    assert counted("Produce", "NONE") == 2 and counted("Produce", "UNKNOWN_TOPIC_OR_PARTITION") == 1
    # Fetch adds its top-level code (NONE) to its partitions'.
    assert counted("Fetch", "NONE") == 3 and counted("Fetch", "UNKNOWN_TOPIC_OR_PARTITION") == 1
    assert counted("ListOffsets", "NONE") == 2 and counted("ListOffsets", "UNKNOWN_TOPIC_OR_PARTITION") == 1
    # Metadata: the known topic and its two partitions, and the missing topic.
    assert counted("Metadata", "NONE") == 3 and counted("Metadata", "UNKNOWN_TOPIC_OR_PARTITION") == 1


def test_http_listener_is_off_when_unset(tmp_path: Path) -> None:
    proc = BrokerProcess(str(tmp_path / "data"))
    proc.start()
    try:
        assert "http://" not in proc.banner
    finally:
        proc.stop()
