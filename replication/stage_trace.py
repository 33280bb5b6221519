"""The ``kbroker.trace`` logger: one DEBUG line per stage of a write's way through replication.

The stages (leader: produce received, leader append, parked follower fetches woken, a
follower's fetch position when it moves, high watermark advance, produce answered; follower:
fetch sent, answer received, follower append; any node: a request received and handled by the
dispatcher, a connection's queued responses written to its socket) are what
``compat/bench/ack_timeline.py`` lines up into the timeline of one acks=all produce. A line
reads ``stage=<name> t_ns=<CLOCK_MONOTONIC ns> k=v ...``; the monotonic clock is one for
every process of the machine, so the lines of several brokers and of the client that sent the
record share one time axis.

Off by default. ``KBROKER_TRACE=1`` in a broker's environment turns it on at start-up (or any
logging set-up that enables ``kbroker.trace`` for DEBUG). Every call site asks
``TRACE.isEnabledFor(DEBUG)`` before building a line; logging caches that answer per level, so
an untraced write pays one method call per stage. A traced line costs its broker ~20 µs
(formatting and the log write), so a stage that would fire per partition of every fetch is
logged only when it changes something.
"""

from __future__ import annotations

import logging
import os
import time

TRACE = logging.getLogger("kbroker.trace")
DEBUG = logging.DEBUG
if os.environ.get("KBROKER_TRACE", "") not in ("", "0"):
    TRACE.setLevel(DEBUG)


def stage(name: str, **fields: object) -> None:
    """Log stage ``name`` now, with ``fields`` as ``key=value`` (callers check TRACE first)."""
    TRACE.debug("stage=%s t_ns=%d %s", name, time.monotonic_ns(), " ".join(f"{k}={v}" for k, v in fields.items()))
