"""Fetch sessions (KIP-227) over a socket against a kbroker node: the session state machine as
a Kafka client sees it — ids, epochs, what an incremental answer carries, and the session errors."""

from __future__ import annotations

import datetime
import socket
import struct
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Producer
from kbroker.protocol.codec import response_schema
from kio.schema.fetch.v12 import request as fetch_v12
from kio.schema.fetch.v16 import request as fetch_v16
from kio.serial import entity_reader

from kbroker.testing import kafka_broker
from tests.end_to_end.raw_kafka import encode_request

FETCH = 1
NONE = 0
FETCH_SESSION_ID_NOT_FOUND = 70
INVALID_FETCH_SESSION_EPOCH = 71
FETCH_SESSION_TOPIC_ID_ERROR = 106
UNKNOWN_TOPIC_ID = 100
TOPIC = "sessions"
WAIT = datetime.timedelta(milliseconds=50)


class Client:
    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        self.correlation = 0

    def fetch(self, version: int, body: Any) -> Any:
        self.correlation += 1
        self.sock.sendall(encode_request(FETCH, version, body, self.correlation))
        size = struct.unpack(">i", self._read(4))[0]
        frame = self._read(size)
        assert struct.unpack_from(">i", frame)[0] == self.correlation
        value, _ = entity_reader(response_schema(FETCH, version))(frame, 5 if version >= 12 else 4)
        return value

    def _read(self, n: int) -> bytes:
        out = b""
        while len(out) < n:
            chunk = self.sock.recv(n - len(out))
            assert chunk, "the broker closed the connection"
            out += chunk
        return out


@pytest.fixture(scope="module")
def node() -> Iterator[tuple[Any, uuid.UUID]]:
    with kafka_broker(**{"max.incremental.fetch.session.cache.slots": 2}) as broker:
        broker.create_topic(TOPIC, partitions=3)
        topic_id = broker.metadata([TOPIC]).topics[0].topic_id
        yield broker, topic_id


def produce(broker: Any, partition: int, n: int = 1) -> None:
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 0})
    for i in range(n):
        producer.produce(TOPIC, value=f"v{i}".encode(), partition=partition)
    assert producer.flush(10) == 0


def v16(session_id: int, epoch: int, topic_id: uuid.UUID, offsets: dict[int, int],
        forgotten: tuple[int, ...] = ()) -> fetch_v16.FetchRequest:
    topics = (fetch_v16.FetchTopic(topic_id=topic_id, partitions=tuple(
        fetch_v16.FetchPartition(partition=p, fetch_offset=o, partition_max_bytes=1 << 20)
        for p, o in offsets.items())),) if offsets else ()
    return fetch_v16.FetchRequest(
        max_wait=WAIT, min_bytes=1, session_id=session_id, session_epoch=epoch, topics=topics,
        forgotten_topics_data=(fetch_v16.ForgottenTopic(topic_id=topic_id, partitions=forgotten),) if forgotten else ())


def answered(response: Any) -> dict[int, tuple[int, int, int]]:
    """partition -> (error, high watermark, record bytes) of every partition answered."""
    return {p.partition_index: (p.error_code, p.high_watermark, len(p.records or b""))
            for t in response.responses for p in t.partitions}


def close(client: Client, session_id: int, topic_id: uuid.UUID) -> None:
    response = client.fetch(16, v16(session_id, -1, topic_id, {}))
    assert (response.error_code, response.session_id) == (NONE, 0)


def test_full_then_incremental_fetches_carry_only_what_changed(node: tuple[Any, uuid.UUID]) -> None:
    broker, topic_id = node
    client = Client(broker.port)
    base = {p: broker_end(client, topic_id, p) for p in range(3)}
    first = client.fetch(16, v16(0, 0, topic_id, base))
    assert first.error_code == NONE and first.session_id != 0
    assert set(answered(first)) == {0, 1, 2}
    session = first.session_id
    quiet = client.fetch(16, v16(session, 1, topic_id, {}))
    assert (quiet.error_code, quiet.session_id, answered(quiet)) == (NONE, session, {})
    produce(broker, 1, 3)
    news = client.fetch(16, v16(session, 2, topic_id, {}))
    [(error, high_watermark, size)] = [answered(news)[1]]
    assert set(answered(news)) == {1} and error == NONE and high_watermark == base[1] + 3 and size > 0
    # The client moves its position on partition 1 only: nothing else to say.
    moved = client.fetch(16, v16(session, 3, topic_id, {1: base[1] + 3}))
    assert answered(moved) == {}
    # Forget partition 2: data there no longer reaches this session.
    client.fetch(16, v16(session, 4, topic_id, {}, forgotten=(2,)))
    produce(broker, 2)
    produce(broker, 0)
    after = client.fetch(16, v16(session, 5, topic_id, {}))
    assert set(answered(after)) == {0}
    close(client, session, topic_id)


def test_session_errors_are_kafkas(node: tuple[Any, uuid.UUID]) -> None:
    broker, topic_id = node
    client = Client(broker.port)
    first = client.fetch(16, v16(0, 0, topic_id, {0: 0}))
    session = first.session_id
    assert session != 0
    wrong_epoch = client.fetch(16, v16(session, 5, topic_id, {}))
    assert (wrong_epoch.error_code, wrong_epoch.session_id) == (INVALID_FETCH_SESSION_EPOCH, 0)
    assert wrong_epoch.responses == ()
    unknown = client.fetch(16, v16(session + 1 if session < 0x7FFFFFFF else 1, 1, topic_id, {}))
    assert unknown.error_code == FETCH_SESSION_ID_NOT_FOUND
    # A request version without topic ids may not use a session opened with them.
    by_name = client.fetch(12, fetch_v12.FetchRequest(
        replica_id=-1, max_wait=WAIT, min_bytes=1, max_bytes=1 << 20, isolation_level=0, session_id=session,
        session_epoch=1, topics=(), forgotten_topics_data=(), rack_id=""))
    assert by_name.error_code == FETCH_SESSION_TOPIC_ID_ERROR
    # Still usable at its epoch: the errors changed nothing.
    assert client.fetch(16, v16(session, 1, topic_id, {})).error_code == NONE
    # epoch -1 closes it: a full, sessionless fetch; the id is gone afterwards.
    closed = client.fetch(16, v16(session, -1, topic_id, {0: 0}))
    assert (closed.error_code, closed.session_id, set(answered(closed))) == (NONE, 0, {0})
    assert client.fetch(16, v16(session, 2, topic_id, {})).error_code == FETCH_SESSION_ID_NOT_FOUND


def test_unknown_topic_id_is_answered_in_every_incremental_fetch(node: tuple[Any, uuid.UUID]) -> None:
    broker, topic_id = node
    client = Client(broker.port)
    stranger = uuid.uuid4()
    first = client.fetch(16, v16(0, 0, stranger, {0: 0}))
    assert answered(first) == {0: (UNKNOWN_TOPIC_ID, -1, 0)} and first.session_id != 0
    again = client.fetch(16, v16(first.session_id, 1, stranger, {}))
    assert answered(again) == {0: (UNKNOWN_TOPIC_ID, -1, 0)}
    close(client, first.session_id, topic_id)


def test_a_full_cache_answers_session_id_zero(node: tuple[Any, uuid.UUID]) -> None:
    broker, topic_id = node  # max.incremental.fetch.session.cache.slots=2
    client = Client(broker.port)
    opened = [client.fetch(16, v16(0, 0, topic_id, {0: 0})).session_id for _ in range(2)]
    assert all(opened)
    # Both sessions are younger than the eviction time and not smaller: no room.
    assert client.fetch(16, v16(0, 0, topic_id, {0: 0})).session_id == 0
    # A bigger session may not evict young ones either (only stale or, for a follower, non-follower ones).
    assert client.fetch(16, v16(0, 0, topic_id, {0: 0, 1: 0, 2: 0})).session_id == 0
    for session in opened:
        close(client, session, topic_id)
    assert client.fetch(16, v16(0, 0, topic_id, {0: 0})).session_id != 0


def broker_end(client: Client, topic_id: uuid.UUID, partition: int) -> int:
    """The partition's high watermark, from a sessionless fetch."""
    response = client.fetch(16, v16(0, -1, topic_id, {partition: 0}))
    return int(answered(response)[partition][1])
