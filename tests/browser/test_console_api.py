"""The message browser's JSON read on a single kbroker node: read_committed leaves out an aborted
transaction's records and the markers, as a read_committed consumer does; read_uncommitted shows
the aborted records too; a timestamp finds the first record at or after it, as ListOffsets does.
"""

from __future__ import annotations

import base64
import json
import urllib.request

import confluent_kafka

from kbroker.testing.local import HOST, free_port, kafka_broker


def _values(console: str, query: str) -> list[tuple[int, str]]:
    with urllib.request.urlopen(f"{console}/api/topics/tx/partitions/0/messages?{query}", timeout=30) as response:
        body = json.loads(response.read())
    return [(r["offset"], base64.b64decode(r["value"]).decode()) for r in body["records"]]


def test_read_committed_and_timestamps() -> None:
    port = free_port()
    console = f"http://{HOST}:{port}"
    with kafka_broker(**{"kbroker.http.listeners": console}) as node:
        node.create_topic("tx", 1)
        producer = confluent_kafka.Producer({"bootstrap.servers": node.bootstrap_servers, "transactional.id": "t1"})
        producer.init_transactions(30)
        producer.begin_transaction()
        producer.produce("tx", value=b"aborted-1", timestamp=1_000)
        producer.produce("tx", value=b"aborted-2", timestamp=2_000)
        assert producer.flush(30) == 0  # in the log before the abort (else librdkafka drops them unsent)
        producer.abort_transaction(30)
        producer.begin_transaction()
        producer.produce("tx", value=b"committed", timestamp=3_000)
        producer.commit_transaction(30)

        # offsets 0-1 aborted, 2 the abort marker, 3 committed, 4 the commit marker
        assert _values(console, "isolation=read_committed") == [(3, "committed")]
        assert _values(console, "isolation=read_uncommitted") == [(0, "aborted-1"), (1, "aborted-2"), (3, "committed")]
        assert _values(console, "timestamp=1500") == [(1, "aborted-2"), (3, "committed")]
        assert _values(console, "timestamp=1500&isolation=read_committed&max=5") == [(3, "committed")]
        assert _values(console, "offset=1&max=1") == [(1, "aborted-2")]
