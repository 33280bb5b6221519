"""RateLimitedLogger: logging for messages that can repeat per connection or per request.

One client (or a fuzzer, or a process out of descriptors) can trigger the same message
thousands of times a second; logged one line each, that filled 553 MB of log in 2.5 minutes
(issue 13). Messages are grouped by their format string (or an explicit ``key``): in each
window of ``interval_s`` seconds the first ``burst`` are logged as they come, the rest are
only counted, and once the window ends one line reports them — the last suppressed message
followed by "(N similar messages suppressed in the last T s)". That line is written by a timer
on the running event loop; without one (a worker thread, a unit test) it is written before
the next message of its kind.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field

ExcInfo = BaseException | bool | None


@dataclass(slots=True)
class _Window:
    start: float
    logged: int = 0
    suppressed: int = 0
    level: int = logging.INFO
    msg: str = ""
    args: tuple[object, ...] = field(default_factory=tuple)


class RateLimitedLogger:
    """Logs through ``logger`` at most ``burst`` messages of a kind per ``interval_s`` seconds."""

    def __init__(self, logger: logging.Logger, burst: int = 5, interval_s: float = 60.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.logger = logger
        self.burst = burst
        self.interval_s = interval_s
        self.clock = clock
        self._windows: dict[str, _Window] = {}

    def info(self, msg: str, *args: object, key: str | None = None) -> None:
        self.log(logging.INFO, msg, *args, key=key)

    def warning(self, msg: str, *args: object, key: str | None = None) -> None:
        self.log(logging.WARNING, msg, *args, key=key)

    def error(self, msg: str, *args: object, key: str | None = None) -> None:
        self.log(logging.ERROR, msg, *args, key=key)

    def log(self, level: int, msg: str, *args: object, key: str | None = None, exc_info: ExcInfo = None) -> None:
        """Log ``msg % args`` unless ``burst`` messages of this kind were logged in this window."""
        if not self.logger.isEnabledFor(level):
            return
        kind = msg if key is None else key
        now = self.clock()
        window = self._windows.get(kind)
        if window is not None and now - window.start >= self.interval_s:
            self._report(kind, window, now)
            window = None
        if window is None:
            window = self._windows[kind] = _Window(now)
        if window.logged < self.burst:
            window.logged += 1
            self.logger.log(level, msg, *args, exc_info=exc_info)
            return
        window.suppressed += 1
        window.level, window.msg, window.args = level, msg, args
        if window.suppressed == 1:
            self._report_when_window_ends(kind, window, window.start + self.interval_s - now)

    def _report_when_window_ends(self, kind: str, window: _Window, delay: float) -> None:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return  # reported before the next message of this kind instead
        loop.call_later(delay, self._timer_fired, kind, window)

    def _timer_fired(self, kind: str, window: _Window) -> None:
        if self._windows.get(kind) is window:
            self._report(kind, window, self.clock())

    def _report(self, kind: str, window: _Window, now: float) -> None:
        del self._windows[kind]
        if window.suppressed:
            self.logger.log(
                window.level, window.msg + " (%d similar messages suppressed in the last %.0f s)",
                *window.args, window.suppressed, now - window.start,
            )


def rate_limit_loop_errors(loop: asyncio.AbstractEventLoop, logger: RateLimitedLogger) -> None:
    """Send what the event loop reports to its exception handler (errors of one transport or
    one accept, which can repeat per connection) through ``logger``, one kind per message."""

    def handle(_loop: asyncio.AbstractEventLoop, context: dict[str, object]) -> None:
        message = str(context.get("message") or "unhandled exception in the event loop")
        details = ", ".join(f"{key}={value!r}" for key, value in context.items() if key not in ("message", "exception"))
        exception = context.get("exception")
        logger.log(logging.ERROR, "%s (%s)", message, details, key=message,
                   exc_info=exception if isinstance(exception, BaseException) else None)

    loop.set_exception_handler(handle)
