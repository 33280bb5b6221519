"""Broker loggers (BROKER_LOGGER config resource, type 8): kbroker's Python logger tree as Kafka
exposes its log4j loggers, so ``kafka-configs --entity-type broker-loggers`` lists and changes
log levels at runtime.

The loggers are ``root`` and every logger of the ``kbroker`` tree that exists now, each with its
effective level in Kafka's names (Python's CRITICAL is FATAL, WARNING is WARN; TRACE is a level
below DEBUG). SET gives a logger a level, DELETE makes it inherit its parent's again, as Kafka's
LoggingController does. Checks and messages are Kafka's RuntimeLoggerManager's: an unknown
logger is INVALID_CONFIG "Logger X does not exist!", a level outside FATAL ERROR WARN INFO DEBUG
TRACE (case matters) INVALID_CONFIG, DELETE of root, APPEND, SUBTRACT and unknown operations
INVALID_REQUEST. Levels are not stored: a restart starts from the configured levels, as in Kafka.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

from kbroker.protocol.errors import ErrorCode, KafkaError
from kbroker.storage.log_config import ConfigEntry, ConfigSource, ConfigType

ROOT_LOGGER = "root"
TREE = "kbroker"
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
TRACE = 5  # Python has no TRACE; below DEBUG as in log4j
_LEVELS = {"FATAL": logging.CRITICAL, "ERROR": logging.ERROR, "WARN": logging.WARNING, "INFO": logging.INFO,
           "DEBUG": logging.DEBUG, "TRACE": TRACE}  # fmt: skip
VALID_LEVELS = ", ".join(sorted(_LEVELS))

log = logging.getLogger(__name__)


def _level_name(level: int) -> str:
    for name, value in _LEVELS.items():  # from FATAL down
        if level >= value:
            return name
    return "TRACE"


def _logger(name: str) -> logging.Logger:
    return logging.getLogger() if name == ROOT_LOGGER else logging.getLogger(name)


def loggers() -> dict[str, str]:
    """Every logger of kbroker's tree that exists, and root, with its effective level."""
    found = {name: _level_name(logger.getEffectiveLevel())
             for name, logger in list(logging.Logger.manager.loggerDict.items())
             if isinstance(logger, logging.Logger) and (name == TREE or name.startswith(TREE + "."))}
    found[ROOT_LOGGER] = _level_name(logging.getLogger().getEffectiveLevel())
    return found


def validate_changes(changes: Iterable[tuple[int, str, str | None]]) -> None:
    """Raise KafkaError (Kafka's code and message) unless every (operation, logger, level) may apply."""
    known = loggers()
    for op, name, level in changes:
        if op == SET:
            _check_exists(name, known)
            if level not in _LEVELS:
                raise KafkaError(ErrorCode.invalid_config,
                                 f"Cannot set the log level of {name} to {level} as it is not a supported log "
                                 f"level. Valid log levels are {VALID_LEVELS}")
        elif op == DELETE:
            _check_exists(name, known)
            if name == ROOT_LOGGER:
                raise KafkaError(ErrorCode.invalid_request,
                                 f"Removing the log level of the {ROOT_LOGGER} logger is not allowed")
        elif op in (APPEND, SUBTRACT):
            raise KafkaError(ErrorCode.invalid_request,
                             f"{'APPEND' if op == APPEND else 'SUBTRACT'} operation is not allowed for the "
                             "BROKER_LOGGER resource")
        else:
            raise KafkaError(ErrorCode.invalid_request,
                             f"Unknown operation type {op} is not allowed for the BROKER_LOGGER resource")


def _check_exists(name: str, known: dict[str, str]) -> None:
    if name not in known:
        raise KafkaError(ErrorCode.invalid_config, f"Logger {name} does not exist!")


def apply_changes(changes: Iterable[tuple[int, str, str | None]]) -> None:
    """Apply validated SET / DELETE changes to the live loggers."""
    for op, name, level in changes:
        if op == SET and level is not None:
            _logger(name).setLevel(_LEVELS[level])
            log.warning("Updated the log level of %s to %s", name, level)
        elif op == DELETE:
            _logger(name).setLevel(logging.NOTSET)
            log.warning("Unset the log level of %s", name)


def describe_loggers() -> list[ConfigEntry]:
    """Every logger with its effective level, sorted, as Kafka describes them (source
    DYNAMIC_BROKER_LOGGER_CONFIG, no type, no synonyms)."""
    source = ConfigSource.DYNAMIC_BROKER_LOGGER_CONFIG
    return [ConfigEntry(name, level, source, ConfigType.UNKNOWN, "", ()) for name, level in sorted(loggers().items())]
