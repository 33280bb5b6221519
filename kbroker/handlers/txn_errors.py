"""Error translation shared by the transaction APIs' handlers."""

from __future__ import annotations

from kbroker.protocol.errors import ErrorCode


def for_version(error: ErrorCode, version: int, first_fenced_version: int = 2) -> ErrorCode:
    """PRODUCER_FENCED is new in these APIs' v2 (InitProducerId v4); older clients get
    INVALID_PRODUCER_EPOCH, as Kafka answers them."""
    if error == ErrorCode.producer_fenced and version < first_fenced_version:
        return ErrorCode.invalid_producer_epoch
    return error
