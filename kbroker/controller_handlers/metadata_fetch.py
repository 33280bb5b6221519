"""Fetch (key 1), v12–13 by name, on the controller: brokers follow the metadata log.

Brokers are observers of ``__cluster_metadata`` partition 0 (KRaft): they fetch from their
last applied offset and the controller answers with whole record batches up to its high
watermark, waiting up to max_wait for new records (a future, completed by the next commit).
A fetch below the log start or for anything else gets the Kafka error for it.
"""

from __future__ import annotations

import asyncio

from kbroker.context import RequestContext
from kbroker.protocol.codec import NO_THROTTLE, build, response_module
from kbroker.protocol.errors import ErrorCode
from kbroker.replication.metadata_image import METADATA_TOPIC

API_KEY = 1
MIN_VERSION = 12
MAX_VERSION = 12


def _read(node: object, offset: int, max_bytes: int) -> tuple[ErrorCode, bytes]:
    metadata_log = node.controller.log
    if offset > metadata_log.log_end_offset or offset < metadata_log.log_start_offset:
        return ErrorCode.offset_out_of_range, b""
    piece = metadata_log.read(offset, max_bytes, metadata_log.log_end_offset, True)
    if piece is None:
        return ErrorCode.none, b""
    return ErrorCode.none, piece.segment.read_bytes(piece.position, piece.length)


async def handle(ctx: RequestContext, request: object) -> object:
    node = ctx.broker
    m = response_module(API_KEY, ctx.api_version)
    wanted = [(t.topic, p) for t in request.topics for p in t.partitions]
    metadata = [(t, p) for t, p in wanted if t == METADATA_TOPIC and p.partition == 0]
    if metadata and request.replica_id >= 0:
        node.controller.observers[request.replica_id] = (metadata[0][1].fetch_offset, node.controller.now_ms())
    if len(metadata) == 1 and request.max_wait.total_seconds() > 0:
        _topic, p = metadata[0]
        error, data = _read(node, p.fetch_offset, p.partition_max_bytes)
        if not error and not data:
            waiter = node.controller.wait_for_records()
            try:
                await asyncio.wait_for(waiter, request.max_wait.total_seconds())
            except TimeoutError:
                pass
    topics = []
    for topic in request.topics:
        partitions = []
        for p in topic.partitions:
            if topic.topic == METADATA_TOPIC and p.partition == 0:
                error, data = _read(node, p.fetch_offset, p.partition_max_bytes)
            else:
                error, data = ErrorCode.unknown_topic_or_partition, b""
            end = node.controller.log.log_end_offset
            partitions.append(build(
                m.PartitionData, partition_index=p.partition, error_code=error, high_watermark=end,
                last_stable_offset=end, log_start_offset=node.controller.log.log_start_offset,
                aborted_transactions=None, preferred_read_replica=-1, records=data or None,
            ))
        topics.append(build(m.FetchableTopicResponse, topic=topic.topic, partitions=tuple(partitions)))
    return build(m.FetchResponse, throttle_time=NO_THROTTLE, error_code=ErrorCode.none, session_id=0,
                 responses=tuple(topics))
