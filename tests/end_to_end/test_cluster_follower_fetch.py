"""Fetching from the closest replica (KIP-392), the same assertions on Kafka 4.3.1 and kbroker.

The session's shared cluster (conftest.py) puts brokers 1-3 in racks a, b, c with Kafka's
RackAwareReplicaSelector. A consumer in rack b
asking the leader (broker 1) is told, with no records, to read from broker 2 (its rack's
replica: preferred_read_replica); broker 2 then serves it the records below its high watermark;
and a confluent-kafka consumer with ``client.rack=c`` reads every record.
"""

from __future__ import annotations

import asyncio
import datetime
import time

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kbroker.protocol.records import split_batches
from kbroker.replication.inter_broker_client import InterBrokerClient
from kio.schema.fetch.v12 import request as fetch_v12

from compat.cluster import Cluster

COUNT = 100


def fetch(cluster: Cluster, broker_id: int, rack: str) -> object:
    """A consumer's Fetch v12 for partition ff-0 from offset 0, sent to one chosen broker."""
    node = cluster.nodes[broker_id]
    request = fetch_v12.FetchRequest(
        cluster_id=None, replica_id=-1, max_wait=datetime.timedelta(milliseconds=100), min_bytes=1,
        max_bytes=1 << 20, isolation_level=0, session_id=0, session_epoch=-1, forgotten_topics_data=(),
        rack_id=rack, topics=(fetch_v12.FetchTopic(topic="ff", partitions=(fetch_v12.FetchPartition(
            partition=0, current_leader_epoch=-1, fetch_offset=0, last_fetched_epoch=-1, log_start_offset=-1,
            partition_max_bytes=1 << 20),)),),
    )

    async def send() -> object:
        client = InterBrokerClient(node.host, node.port, None, "follower-fetch-test")
        try:
            return await client.request(1, 12, request, timeout_s=10)
        finally:
            client.close()

    return asyncio.run(send()).responses[0].partitions[0]


@pytest.mark.timeout(300)
def test_consumers_read_from_the_replica_in_their_rack(cluster: Cluster) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic("ff", 1, replica_assignment=[[1, 2, 3]])])["ff"].result(timeout=30)
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})
    for i in range(COUNT):
        producer.produce("ff", value=str(i).encode())
    assert producer.flush(30) == 0
    from_leader = fetch(cluster, 1, "b")
    assert from_leader.error_code == 0
    assert from_leader.preferred_read_replica == 2
    assert not from_leader.records
    deadline = time.monotonic() + 20
    while True:  # the follower's high watermark follows the leader's on its next fetch
        from_follower = fetch(cluster, 2, "b")
        assert from_follower.error_code == 0
        if from_follower.high_watermark == COUNT:
            break
        assert time.monotonic() < deadline, from_follower
    records = sum(h.record_count for _pos, h in split_batches(memoryview(from_follower.records)))
    assert records == COUNT
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "ff-reader",
                         "client.rack": "c", "enable.auto.commit": False})
    try:
        consumer.assign([TopicPartition("ff", 0, 0)])
        seen = []
        deadline = time.monotonic() + 30
        while len(seen) < COUNT and time.monotonic() < deadline:
            message = consumer.poll(0.2)
            if message is not None and not message.error():
                seen.append(int(message.value()))
    finally:
        consumer.close()
    assert seen == list(range(COUNT))
