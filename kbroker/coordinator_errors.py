"""How a coordinator answers when its write to its internal topic fails, as Kafka maps it.

The group coordinator (``__consumer_offsets``) and the transaction coordinator
(``__transaction_state``) keep nothing they could not write, and tell the client what Kafka's
coordinators tell it: NOT_COORDINATOR when the partition's storage failed or its leadership
moved (the client looks the coordinator up again), COORDINATOR_NOT_AVAILABLE when the write
could not be replicated in time or the partition is missing (retry), UNKNOWN_SERVER_ERROR for
what no retry fixes (a record too large).
"""

from __future__ import annotations

from kbroker.protocol.errors import ErrorCode, KafkaError

_RETRY_LATER = {ErrorCode.unknown_topic_or_partition, ErrorCode.not_enough_replicas,
                ErrorCode.not_enough_replicas_after_append, ErrorCode.request_timed_out,
                ErrorCode.coordinator_not_available}
_MOVED = {ErrorCode.not_leader_or_follower, ErrorCode.kafka_storage_error, ErrorCode.not_coordinator}


def coordinator_write_error(exc: OSError | KafkaError) -> ErrorCode:
    if isinstance(exc, OSError):  # the partition's storage failed (a full disk, an I/O error)
        return ErrorCode.not_coordinator
    if exc.code in _MOVED:
        return ErrorCode.not_coordinator
    if exc.code in _RETRY_LATER:
        return ErrorCode.coordinator_not_available
    return ErrorCode.unknown_server_error
