"""WriteTxnMarkers (key 27), v1–2.

Writes a COMMIT/ABORT control batch (key: version 0, type; value: version 0, coordinator
epoch) for the producer to each named partition — the same routine the TransactionCoordinator
uses for partitions it leads itself. Per partition: UNKNOWN_TOPIC_OR_PARTITION if not hosted,
NOT_LEADER_OR_FOLLOWER if not led here, INVALID_PRODUCER_EPOCH if the producer has moved past
the marker's epoch. In a cluster a partition is answered once the marker is on its ISR (Kafka
writes markers with acks=all): NOT_ENOUGH_REPLICAS_AFTER_APPEND, REQUEST_TIMED_OUT or
NOT_LEADER_OR_FOLLOWER otherwise, which the coordinator retries. Markers on
``__consumer_offsets`` resolve that producer's pending transactional offsets.
With an authorizer the sender needs CLUSTER_ACTION (else CLUSTER_AUTHORIZATION_FAILED).
"""

from __future__ import annotations

import asyncio
from typing import Protocol

from kbroker.handlers.security import HasSecurity, cluster_allowed
from kbroker.handlers.services import HasTxnMarkerWriter
from kbroker.network.context import RequestContext
from kbroker.protocol.acl import AclOperation
from kbroker.protocol.codec import build, response_module
from kbroker.protocol.errors import ErrorCode

API_KEY = 27
MIN_VERSION = 1
MAX_VERSION = 2


class Services(HasTxnMarkerWriter, HasSecurity, Protocol): ...


async def handle(ctx: RequestContext[Services], request: object) -> object:
    m = response_module(API_KEY, ctx.api_version)
    services = ctx.services
    authorized = cluster_allowed(ctx, AclOperation.CLUSTER_ACTION)  # a broker's request, as Kafka checks
    markers = []
    for marker in request.markers:
        topics = []
        for topic in marker.topics:
            if not authorized:
                errors = [ErrorCode.cluster_authorization_failed] * len(topic.partition_indexes)
            else:
                errors = await asyncio.gather(*(
                    services.write_txn_marker(topic.name, index, marker.producer_id, marker.producer_epoch,
                                              marker.transaction_result, marker.coordinator_epoch)
                    for index in topic.partition_indexes))
            partitions = tuple(build(m.WritableTxnMarkerPartitionResult, partition_index=index, error_code=error)
                               for index, error in zip(topic.partition_indexes, errors, strict=True))
            topics.append(build(m.WritableTxnMarkerTopicResult, name=topic.name, partitions=partitions))
        markers.append(build(m.WritableTxnMarkerResult, producer_id=marker.producer_id, topics=tuple(topics)))
    return build(m.WriteTxnMarkersResponse, markers=tuple(markers))
