"""The end offsets of partitions a group committed offsets for, which kafka_exporter's lag needs.

A group's coordinator holds its committed offsets, not always a replica of the partitions they
are for. Where this broker has a replica, its high watermark is the end offset (what a
read_uncommitted consumer can reach, kafka_exporter's "newest offset"); for the others the
partition's leader is asked, as kafka_exporter asks, with ListOffsets (timestamp -1: latest) over
the inter-broker listener, every leader at once and each within ``timeout_s``. A leader that does
not answer in time leaves its partitions without a lag sample for that scrape rather than holding
the scrape up.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable
from typing import TYPE_CHECKING

from kio.schema.list_offsets.v7 import request as list_offsets_v7

from kbroker.protocol.codec import build
from kbroker.protocol.errors import ErrorCode
from kbroker.replication.inter_broker_client import InterBrokerClient

if TYPE_CHECKING:
    from kbroker.node.broker import Broker

log = logging.getLogger(__name__)

LIST_OFFSETS_KEY, LIST_OFFSETS_VERSION = 2, 7
LATEST_TIMESTAMP = -1
READ_UNCOMMITTED = 0
TIMEOUT_S = 2.0

TopicPartition = tuple[str, int]


def local_end_offset(broker: Broker, key: TopicPartition) -> int | None:
    """The high watermark of this broker's replica of ``key`` (None: it holds none)."""
    partition = broker.replica_manager.partitions.get(key)
    return None if partition is None else partition.high_watermark


async def end_offsets(broker: Broker, wanted: Iterable[TopicPartition],
                      timeout_s: float = TIMEOUT_S) -> dict[TopicPartition, int]:
    """The end offset of each partition in ``wanted`` that this broker or its leader can give."""
    ends: dict[TopicPartition, int] = {}
    by_leader: dict[int, list[TopicPartition]] = {}
    topics = broker.lifecycle.image.topics if broker.lifecycle is not None else {}
    for key in wanted:
        local = local_end_offset(broker, key)
        if local is not None:
            ends[key] = local
            continue
        topic = topics.get(key[0])
        registration = topic.partitions.get(key[1]) if topic is not None else None
        if registration is not None and registration.leader >= 0:
            by_leader.setdefault(registration.leader, []).append(key)
    answers = await asyncio.gather(*(_ask_leader(broker, leader, keys, timeout_s)
                                     for leader, keys in sorted(by_leader.items())))
    for answer in answers:
        ends.update(answer)
    return ends


async def _ask_leader(broker: Broker, leader: int, keys: list[TopicPartition],
                      timeout_s: float) -> dict[TopicPartition, int]:
    endpoint = broker.endpoint(leader)
    if endpoint is None:
        return {}
    m = list_offsets_v7
    by_topic: dict[str, list[int]] = {}
    for topic, index in keys:
        by_topic.setdefault(topic, []).append(index)
    request = build(m.ListOffsetsRequest, replica_id=-1, isolation_level=READ_UNCOMMITTED, topics=tuple(
        build(m.ListOffsetsTopic, name=topic, partitions=tuple(
            build(m.ListOffsetsPartition, partition_index=index, timestamp=LATEST_TIMESTAMP)
            for index in sorted(indexes)))
        for topic, indexes in sorted(by_topic.items())))
    client = InterBrokerClient(endpoint[0], endpoint[1], None, f"broker-{broker.node_id}-metrics",
                               broker.link_security)
    try:
        response = await client.request(LIST_OFFSETS_KEY, LIST_OFFSETS_VERSION, request, timeout_s=timeout_s)
    except (ConnectionError, TimeoutError, OSError) as exc:
        log.debug("end offsets from broker %d for consumer-group lag: %s", leader, exc)
        return {}
    finally:
        client.close()
    return {(topic.name, p.partition_index): int(p.offset)
            for topic in response.topics for p in topic.partitions if p.error_code == ErrorCode.none}
