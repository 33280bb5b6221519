"""WriteTxnMarkers (key 27), v1–2.

Writes a COMMIT/ABORT control batch (key: version 0, type; value: version 0, coordinator
epoch) for the producer to each named partition — the same routine the TransactionCoordinator
uses itself. Per partition: UNKNOWN_TOPIC_OR_PARTITION if not hosted, INVALID_PRODUCER_EPOCH
if the producer has moved past the marker's epoch. Markers on ``__consumer_offsets``
resolve that producer's pending transactional offsets.
"""

from __future__ import annotations

from kbroker.context import RequestContext
from kbroker.protocol.codec import build, response_module
from kbroker.protocol.errors import ErrorCode, KafkaError
from kbroker.transactions.coordinator import write_marker

API_KEY = 27
MIN_VERSION = 1
MAX_VERSION = 2


async def handle(ctx: RequestContext, request: object) -> object:
    m = response_module(API_KEY, ctx.api_version)
    broker = ctx.broker
    markers = []
    for marker in request.markers:
        topics = []
        for topic in marker.topics:
            partitions = []
            for index in topic.partition_indexes:
                error = ErrorCode.none
                try:
                    write_marker(broker.replica_manager, broker.offset_store, topic.name, index, marker.producer_id,
                                 marker.producer_epoch, marker.transaction_result, marker.coordinator_epoch)
                except KafkaError as exc:
                    error = exc.code
                partitions.append(build(m.WritableTxnMarkerPartitionResult, partition_index=index, error_code=error))
            topics.append(build(m.WritableTxnMarkerTopicResult, name=topic.name, partitions=tuple(partitions)))
        markers.append(build(m.WritableTxnMarkerResult, producer_id=marker.producer_id, topics=tuple(topics)))
    return build(m.WriteTxnMarkersResponse, markers=tuple(markers))
