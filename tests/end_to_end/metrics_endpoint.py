"""A broker with its HTTP listener, and /metrics read as Prometheus reads it (prometheus-client's
own parser), for the metrics and telemetry tests."""

from __future__ import annotations

import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from tests.broker_process import BrokerProcess, free_port

Sample = tuple[str, tuple[tuple[str, str], ...]]  # (name, sorted labels)


@contextmanager
def broker_with_http_listener(data_dir: Path) -> Iterator[tuple[BrokerProcess, str]]:
    """A single-node broker serving HTTP on a free loopback port: (process, "host:port")."""
    http = f"127.0.0.1:{free_port()}"
    proc = BrokerProcess(str(data_dir), {"kbroker.http.listeners": f"http://{http}"})
    proc.start()
    try:
        yield proc, http
    finally:
        proc.stop()


def get(url: str) -> tuple[int, str]:
    """Status and body; an HTTP error status is an answer too (health endpoints answer 503)."""
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def scrape(address: str) -> dict[Sample, float]:
    """Every sample of ``address``'s /metrics as (name, sorted labels) -> value."""
    status, text = get(f"http://{address}/metrics")
    assert status == 200, text[:500]
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}
