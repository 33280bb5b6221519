"""What the five share-group state APIs share: the answer of a broker that is no share coordinator.

Initialize/Read/Write/Delete ShareGroupState and ReadShareGroupStateSummary are sent by a
share-group coordinator to the share coordinator that keeps a group's state in
``__share_group_state``. kbroker has no share groups, so it is never that coordinator: every
partition of the request is answered NOT_COORDINATOR with Kafka's message, as a Kafka broker
that does not lead the state partition answers.
"""

from __future__ import annotations

from typing import Any

from kbroker.protocol.codec import build
from kbroker.protocol.errors import ErrorCode


def not_coordinator(m: Any, result_class: type, request: Any, action: str, **partition_fields: object) -> tuple:
    """The per-topic ``results`` refusing each partition: "Unable to ``action``: This is not the
    correct coordinator." (``partition_fields`` are the API's other partition fields)."""
    message = f"Unable to {action}: This is not the correct coordinator."
    return tuple(
        build(result_class, topic_id=topic.topic_id, partitions=tuple(
            build(m.PartitionResult, partition=p.partition, error_code=ErrorCode.not_coordinator,
                  error_message=message, **partition_fields)
            for p in topic.partitions))
        for topic in request.topics)
