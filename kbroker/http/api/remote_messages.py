"""The message browser's read of a partition this broker holds no replica of: asked of the
partition's leader over the Kafka protocol, as a consumer would ask it.

ListOffsets finds the log start offset (a read from before it starts there, as ``messages.read``
does) or the offset for a timestamp; one Fetch (v12, no fetch session, replica id -1) reads up to
a megabyte from the offset with the page's isolation level. The leader answers read_committed
reads only up to its last stable offset and lists the aborted transactions in the range; their
records are left out the way a consumer leaves them out (from an aborted transaction's first
offset until that producer's next control batch). The answer names the broker it was read from.
"""

from __future__ import annotations

import datetime
from typing import TYPE_CHECKING, Any

from kio.schema.fetch.v12 import request as fetch_v12
from kio.schema.list_offsets.v7 import request as list_offsets_v7

from kbroker.http.api import messages
from kbroker.protocol.codec import build
from kbroker.protocol.errors import ErrorCode, KafkaError
from kbroker.protocol.records import BatchHeader
from kbroker.replication.inter_broker_client import InterBrokerClient

if TYPE_CHECKING:
    from kbroker.node.broker import Broker

JSON = dict[str, Any]
LIST_OFFSETS_KEY, LIST_OFFSETS_VERSION = 2, 7
FETCH_KEY, FETCH_VERSION = 1, 12
EARLIEST_TIMESTAMP = -2
LATEST_TIMESTAMP = -1
READ_COMMITTED = 1
TIMEOUT_S = 5.0


class NoLeader(Exception):
    """The partition is unknown here or has no leader to read from."""


def leader_of(broker: Broker, topic: str, index: int) -> int:
    image = broker.lifecycle.image if broker.lifecycle is not None else None
    known = image.topics.get(topic) if image is not None else None
    registration = known.partitions.get(index) if known is not None else None
    if registration is None:
        raise NoLeader(f"no partition {topic}-{index}")
    if registration.leader < 0:
        raise NoLeader(f"{topic}-{index} has no leader")
    return registration.leader


async def _list_offset(client: InterBrokerClient, topic: str, index: int, timestamp: int, isolation: int) -> int:
    m = list_offsets_v7
    response = await client.request(LIST_OFFSETS_KEY, LIST_OFFSETS_VERSION, build(
        m.ListOffsetsRequest, replica_id=-1, isolation_level=isolation, topics=(build(
            m.ListOffsetsTopic, name=topic, partitions=(build(
                m.ListOffsetsPartition, partition_index=index, timestamp=timestamp),)),)), timeout_s=TIMEOUT_S)
    found = response.topics[0].partitions[0]
    if found.error_code != ErrorCode.none:
        raise KafkaError(ErrorCode(found.error_code), f"ListOffsets of {topic}-{index}")
    return int(found.offset)


async def read(broker: Broker, topic: str, index: int, offset: int | None, timestamp: int | None,
               max_records: int, read_committed: bool) -> JSON:
    """``messages.read``'s answer for a partition led elsewhere, read from its leader."""
    leader = leader_of(broker, topic, index)
    endpoint = broker.endpoint(leader)
    if endpoint is None:
        raise NoLeader(f"broker {leader}, the leader of {topic}-{index}, has no inter-broker endpoint")
    max_records = max(1, min(max_records, messages.MAX_RECORDS))
    isolation = READ_COMMITTED if read_committed else 0
    client = InterBrokerClient(endpoint[0], endpoint[1], None, f"broker-{broker.node_id}-console",
                               broker.link_security)
    try:
        start = await _list_offset(client, topic, index, EARLIEST_TIMESTAMP, isolation)
        if timestamp is not None:
            offset = await _list_offset(client, topic, index, timestamp, isolation)
            if offset < 0:  # no record at or after the timestamp: the end, as ListOffsets' consumers take it
                offset = await _list_offset(client, topic, index, LATEST_TIMESTAMP, isolation)
        offset = start if offset is None else max(offset, start)
        m = fetch_v12
        response = await client.request(FETCH_KEY, FETCH_VERSION, build(
            m.FetchRequest, max_wait=datetime.timedelta(0), min_bytes=0, max_bytes=messages.READ_BYTES,
            isolation_level=isolation, forgotten_topics_data=(), topics=(build(
                m.FetchTopic, topic=topic, partitions=(build(
                    m.FetchPartition, partition=index, fetch_offset=offset,
                    partition_max_bytes=messages.READ_BYTES),)),)), timeout_s=TIMEOUT_S)
    finally:
        client.close()
    data = response.responses[0].partitions[0]
    if data.error_code != ErrorCode.none:
        raise KafkaError(ErrorCode(data.error_code), f"Fetch of {topic}-{index} from broker {leader}")
    bound = int(data.last_stable_offset if read_committed else data.high_watermark)
    aborted: dict[int, list[int]] = {}
    for txn in data.aborted_transactions or ():
        aborted.setdefault(int(txn.producer_id), []).append(int(txn.first_offset))
    for firsts in aborted.values():
        firsts.sort()
    in_aborted: set[int] = set()

    def hidden(header: BatchHeader) -> bool:
        """A consumer's rule: a producer's batches are aborted from an aborted transaction's first
        offset until its next control batch (the abort marker)."""
        firsts = aborted.get(header.producer_id)
        while firsts and firsts[0] <= header.base_offset:
            firsts.pop(0)
            in_aborted.add(header.producer_id)
        if header.is_control:
            in_aborted.discard(header.producer_id)
            return True
        return header.producer_id in in_aborted

    records: list[JSON] = []
    position = messages.decode_records(bytes(data.records or b""), offset, bound, records, max_records, hidden)
    found = messages.answer(records, offset if position is None else position, bound, read_committed,
                            int(data.log_start_offset))
    found["read_from"] = {"broker": leader, "over": "Fetch"}
    return found
