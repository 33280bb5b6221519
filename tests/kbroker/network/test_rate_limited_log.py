"""RateLimitedLogger: the first messages of a kind are logged, the rest counted and reported
once per window (an injected clock drives the windows; the event loop's timer is checked with
a real one)."""

from __future__ import annotations

import asyncio
import logging

import pytest

from kbroker.network.rate_limited_log import RateLimitedLogger, rate_limit_loop_errors

LOGGER = "tests.rate_limited"


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


def messages(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [record.getMessage() for record in caplog.records if record.name == LOGGER]


def test_first_burst_is_logged_the_rest_counted_and_reported_with_the_next_after_the_window(
    caplog: pytest.LogCaptureFixture, clock: FakeClock,
) -> None:
    caplog.set_level(logging.INFO, LOGGER)
    limited = RateLimitedLogger(logging.getLogger(LOGGER), burst=3, interval_s=10, clock=clock)
    for i in range(10):
        limited.info("closing %s: malformed request", f"peer{i}")
        clock.now += 0.5
    assert messages(caplog) == [f"closing peer{i}: malformed request" for i in range(3)]
    clock.now = 1010.0
    limited.info("closing %s: malformed request", "peer10")
    assert messages(caplog)[3:] == [
        "closing peer9: malformed request (7 similar messages suppressed in the last 10 s)",
        "closing peer10: malformed request",
    ]


def test_each_kind_has_its_own_burst(caplog: pytest.LogCaptureFixture, clock: FakeClock) -> None:
    caplog.set_level(logging.INFO, LOGGER)
    limited = RateLimitedLogger(logging.getLogger(LOGGER), burst=1, interval_s=10, clock=clock)
    for i in range(3):
        limited.info("unknown API key %d", i)
        limited.warning("request size %d is too large", i)
        limited.info("accept failed: %s", f"error {i}", key="accept")
        limited.info("accept failed again: %s", f"error {i}", key="accept")
    assert messages(caplog) == ["unknown API key 0", "request size 0 is too large", "accept failed: error 0"]


def test_a_window_without_suppressed_messages_reports_nothing(
    caplog: pytest.LogCaptureFixture, clock: FakeClock,
) -> None:
    caplog.set_level(logging.INFO, LOGGER)
    limited = RateLimitedLogger(logging.getLogger(LOGGER), burst=2, interval_s=10, clock=clock)
    limited.info("idle %d", 1)
    limited.info("idle %d", 2)
    clock.now += 10
    limited.info("idle %d", 3)
    limited.info("idle %d", 4)
    limited.info("idle %d", 5)
    assert messages(caplog) == ["idle 1", "idle 2", "idle 3", "idle 4"]


def test_levels_below_the_loggers_are_neither_logged_nor_counted(
    caplog: pytest.LogCaptureFixture, clock: FakeClock,
) -> None:
    caplog.set_level(logging.WARNING, LOGGER)
    limited = RateLimitedLogger(logging.getLogger(LOGGER), burst=1, interval_s=10, clock=clock)
    for i in range(5):
        limited.info("quiet %d", i)
    limited.warning("loud %d", 1)
    clock.now += 10
    limited.warning("loud %d", 2)
    assert messages(caplog) == ["loud 1", "loud 2"]


def test_the_count_is_reported_when_the_window_ends_on_a_running_loop(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, LOGGER)

    async def main() -> logging.LogRecord:
        reported: asyncio.Future[logging.LogRecord] = asyncio.get_running_loop().create_future()

        class Summary(logging.Handler):
            def emit(self, record: logging.LogRecord) -> None:
                if "suppressed" in record.getMessage() and not reported.done():
                    reported.set_result(record)

        logger = logging.getLogger(LOGGER)
        handler = Summary()
        logger.addHandler(handler)
        try:
            limited = RateLimitedLogger(logger, burst=1, interval_s=0.05)
            for i in range(4):
                limited.warning("accepting failed: %d", i)
            return await asyncio.wait_for(reported, 10)  # no further message needed
        finally:
            logger.removeHandler(handler)

    record = asyncio.run(main())
    assert record.levelno == logging.WARNING
    assert record.getMessage().startswith("accepting failed: 3 (3 similar messages suppressed in the last ")


def test_event_loop_errors_are_rate_limited_per_message(caplog: pytest.LogCaptureFixture, clock: FakeClock) -> None:
    caplog.set_level(logging.INFO, LOGGER)
    loop = asyncio.new_event_loop()
    try:
        rate_limit_loop_errors(loop, RateLimitedLogger(logging.getLogger(LOGGER), burst=2, interval_s=60, clock=clock))
        for _ in range(1000):
            loop.call_exception_handler({
                "message": "socket.accept() out of system resource", "exception": OSError(24, "Too many open files"),
            })
        loop.call_exception_handler({"message": "Fatal error on transport"})
    finally:
        loop.close()
    records = [record for record in caplog.records if record.name == LOGGER]
    assert [record.getMessage().split(" (")[0] for record in records] == [
        "socket.accept() out of system resource", "socket.accept() out of system resource", "Fatal error on transport",
    ]
    assert records[0].exc_info is not None and records[0].levelno == logging.ERROR
