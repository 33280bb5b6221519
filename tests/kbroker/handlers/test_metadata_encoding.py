"""The hand-written Metadata answer is byte for byte what kio's generic encoder writes, in every
version (0-13): brokers with and without a rack, a null cluster id, a topic of many partitions
with offline replicas and a leaderless partition, an unknown topic, authorized operations."""

from __future__ import annotations

import datetime
import uuid

import pytest
from kbroker.protocol.codec import build, response_module
from kbroker.protocol.codec import encode_response as kio_encode_response
from kbroker.protocol.errors import ErrorCode
from kio.index import load_response_schema
from kio.serial import entity_reader

from kbroker.handlers.metadata import MAX_VERSION, MIN_VERSION, MetadataTopic, encode_response
from kbroker.network.context import EncodedResponse
from kbroker.quotas.client_quotas import with_throttle_time

BROKERS = [(1, "127.0.0.1", 9092, "rack-a"), (2, "broker-2.example", 19092, None)]
TOPIC_ID = uuid.UUID("0b5bd2a6-64b9-4b1a-9d0f-2c7a3e5e9c11")
TOPICS = [
    MetadataTopic(ErrorCode.none, "orders", TOPIC_ID, False, [
        (ErrorCode.none, index, 1 + index % 2, 7, (1, 2, 3), (1, 2), (3,)) for index in range(300)
    ] + [(ErrorCode.leader_not_available, 300, -1, 8, (3,), (), (3,))], 0b110111111000),
    MetadataTopic(ErrorCode.unknown_topic_or_partition, "missing", uuid.UUID(int=0), False, [], -(2**31)),
    MetadataTopic(ErrorCode.none, "__consumer_offsets", uuid.UUID(int=5), True,
                  [(ErrorCode.none, 0, 2, 0, (2,), (2,), ())], -(2**31)),
]


def kio_frame(version: int, cluster_id: str | None, cluster_operations: int) -> bytes:
    m = response_module(3, version)
    topics = tuple(build(
        m.MetadataResponseTopic, error_code=t.error, name=t.name, topic_id=t.topic_id, is_internal=t.is_internal,
        partitions=tuple(build(
            m.MetadataResponsePartition, error_code=error, partition_index=index, leader_id=leader,
            leader_epoch=epoch, replica_nodes=replicas, isr_nodes=isr, offline_replicas=offline)
            for error, index, leader, epoch, replicas, isr, offline in t.partitions),
        topic_authorized_operations=t.authorized_operations) for t in TOPICS)
    response = build(
        m.MetadataResponse, throttle_time=datetime.timedelta(0), cluster_id=cluster_id, controller_id=2,
        brokers=tuple(build(m.MetadataResponseBroker, node_id=n, host=h, port=p, rack=r) for n, h, p, r in BROKERS),
        topics=topics, cluster_authorized_operations=cluster_operations, error_code=ErrorCode.none)
    return kio_encode_response(41, 3, response)


@pytest.mark.parametrize("version", range(MIN_VERSION, MAX_VERSION + 1))
@pytest.mark.parametrize("cluster_id", ["Xy3kVbQ0TzGq1mZ8rJ2wNa", None])
def test_the_answer_is_what_the_generic_encoder_writes(version: int, cluster_id: str | None) -> None:
    counts: dict[int, int] = {}
    frame = encode_response(41, version, BROKERS, cluster_id, 2, TOPICS, 0b1111110100000, counts)
    assert frame == kio_frame(version, cluster_id, 0b1111110100000)
    # Kafka's MetadataResponse.errorCounts: every topic's and partition's code.
    assert counts == {ErrorCode.none: 303, ErrorCode.leader_not_available: 1, ErrorCode.unknown_topic_or_partition: 1}


@pytest.mark.parametrize("version", [3, 8, 9, 12, 13])
def test_a_throttled_client_reads_its_throttle_time_in_the_answer(version: int) -> None:
    counts: dict[int, int] = {}
    answer = EncodedResponse([encode_response(41, version, BROKERS, "c", 2, TOPICS, 0, counts)], counts)
    patched = with_throttle_time(3, version, answer, 250)
    frame = patched.chunks[0]
    schema = load_response_schema(3, version)
    header = 4 + 4 + (1 if schema.__flexible__ else 0)  # size, correlation id, header tagged fields
    decoded, _size = entity_reader(schema)(memoryview(frame), header)
    assert decoded.throttle_time == datetime.timedelta(milliseconds=250)
    assert len(decoded.topics[0].partitions) == 301
