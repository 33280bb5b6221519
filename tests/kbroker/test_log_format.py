"""kbroker.log.format=json: one JSON object per log line; the kbroker.request logger logs a
request slower than kbroker.request.logger.slow.ms at INFO (every one only at DEBUG)."""

from __future__ import annotations

import json
import logging
from pathlib import Path

from kafka import KafkaAdminClient

from kbroker.log_format import JsonLinesFormatter
from tests.broker_process import BrokerProcess


def test_a_record_is_one_json_line_with_its_extra_fields() -> None:
    record = logging.LogRecord("kbroker.request", logging.INFO, __file__, 1, "took %d ms", (7,), None)
    record.total_time_ms = 7.5
    line = JsonLinesFormatter().format(record)
    assert "\n" not in line
    parsed = json.loads(line)
    assert parsed["level"] == "INFO" and parsed["logger"] == "kbroker.request"
    assert parsed["message"] == "took 7 ms" and parsed["total_time_ms"] == 7.5
    assert parsed["time"].endswith("+00:00")


def test_a_broker_logs_json_lines_and_slow_requests(tmp_path: Path) -> None:
    # A threshold of 0 ms makes every request "slow": each is logged once at INFO.
    broker = BrokerProcess(str(tmp_path / "data"), {"kbroker.log.format": "json",
                                                     "kbroker.request.logger.slow.ms": "0"})
    broker.start()
    try:
        admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
        admin.list_topics()
        admin.close()
    finally:
        broker.stop()
    lines = [json.loads(line) for line in broker.read_log().splitlines() if line.startswith("{")]
    assert lines and all({"time", "level", "logger", "message"} <= set(line) for line in lines)
    slow = [line for line in lines if line["logger"] == "kbroker.request"]
    assert any(line["message"].startswith("Slow request metadata") for line in slow), slow
    assert all(line["level"] == "INFO" and line["total_time_ms"] >= 0 for line in slow)
