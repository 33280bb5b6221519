"""The format of the node's log lines (``kbroker.log.format``): ``text``, the default
(``time LEVEL logger: message``), or ``json``, one JSON object per line for log shippers:
``{"time": ISO 8601 UTC, "level", "logger", "message"}`` plus ``exception`` (the traceback) and
the fields a logger adds through ``extra`` (``total_time_ms``, ``api_key`` for kbroker.request)."""

from __future__ import annotations

import datetime
import json
import logging

TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
# LogRecord attributes that are the record's own, not fields a caller added with ``extra``.
_STANDARD = frozenset(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {"message", "asctime", "taskName"}


class JsonLinesFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, object] = {
            "time": datetime.datetime.fromtimestamp(record.created, datetime.UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        for key, value in vars(record).items():
            if key not in _STANDARD and not key.startswith("_"):
                line[key] = value
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        return json.dumps(line, default=str)


def use_format(log_format: str) -> None:
    """Give the root logger's handlers the format kbroker.log.format names."""
    formatter = JsonLinesFormatter() if log_format == "json" else logging.Formatter(TEXT_FORMAT)
    for handler in logging.getLogger().handlers:
        handler.setFormatter(formatter)
