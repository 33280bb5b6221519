"""Naming errors the same way for every Python client: Kafka's protocol error names.

A client that exposes the broker's numeric error code gets that code's name from kio's table
(generated from Kafka's own error list), e.g. 10 -> "MESSAGE_TOO_LARGE"; an error with no
protocol code (a local timeout, a client-side check) keeps the client's own name. Where a client
only logs the cause of a failed connection (an authentication or TLS error) and raises something
generic, ``LoggedFailures`` collects what it logged.
"""

from __future__ import annotations

import logging

from kio.schema.errors import ErrorCode


def code_name(code: int) -> str:
    """Kafka's name for a protocol error code ("UNKNOWN_CODE_<n>" if kio does not know it)."""
    try:
        return ErrorCode(code).name.upper()
    except ValueError:
        return f"UNKNOWN_CODE_{code}"


def exception_name(exc: BaseException) -> str:
    """The protocol name of a kafka-python / aiokafka exception, else its class name."""
    errno = getattr(exc, "errno", None)
    if isinstance(errno, int) and errno > 0 and type(exc).__module__.split(".")[0] in ("kafka", "aiokafka"):
        return code_name(errno)
    return type(exc).__name__


class LoggedFailures(logging.Handler):
    """Collects what a Python client logs at WARNING and above while installed on ``logger``
    (kafka-python and aiokafka log the cause of a failed connection, an authentication or TLS
    error, and raise only a generic bootstrap error): ``with LoggedFailures("kafka") as logged:``."""

    def __init__(self, logger: str) -> None:
        super().__init__(logging.WARNING)
        self.logger = logging.getLogger(logger)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())

    def __enter__(self) -> LoggedFailures:
        self.logger.addHandler(self)
        return self

    def __exit__(self, *exc: object) -> None:
        self.logger.removeHandler(self)
