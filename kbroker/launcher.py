"""The process entry point (``kbroker``, ``python -m kbroker``): a stop signal counts from the start.

Importing the broker takes about half a second. With no handler in that time a SIGTERM kills the
process — and as PID 1 of a container, which the kernel spares every signal it does not handle,
it is lost: ``docker stop`` waits out its timeout and SIGKILLs. So the first thing the process
does is record SIGTERM/SIGINT, and only then import the CLI, which stops cleanly if one came.
"""

from __future__ import annotations

import signal
from types import FrameType


class StopSignals:
    """Remembers the first SIGTERM or SIGINT until the event loop's own handlers take over."""

    def __init__(self) -> None:
        self.received: int | None = None

    def install(self) -> StopSignals:
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, self._record)
        return self

    def _record(self, signum: int, _frame: FrameType | None) -> None:
        if self.received is None:
            self.received = signum


def main() -> int:
    early = StopSignals().install()
    from kbroker.cli import main as cli_main  # the slow import, now that a signal is caught

    return cli_main(stop_requested=lambda: early.received is not None)
