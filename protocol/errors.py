"""Kafka error codes and the one exception type that carries them across layers.

Error codes come from ``kio.schema.errors.ErrorCode`` (generated from Kafka's own list);
``KafkaError`` lets storage and replication raise a code that a handler turns into the
per-partition error field at one boundary.
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

__all__ = ["ErrorCode", "InvalidRecordError", "KafkaError"]


class KafkaError(Exception):
    """An error that maps to one Kafka error code, with an optional message for the client."""

    def __init__(self, code: ErrorCode, message: str | None = None) -> None:
        super().__init__(message or code.name)
        self.code = code
        self.message = message


class InvalidRecordError(KafkaError):
    """A produce rejected for specific records (KIP-467): carries (batch_index, message) pairs."""

    def __init__(
        self, code: ErrorCode, message: str, record_errors: list[tuple[int, str | None]]
    ) -> None:
        super().__init__(code, message)
        self.record_errors = record_errors
