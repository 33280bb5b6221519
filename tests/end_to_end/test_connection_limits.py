"""Kafka's connection limits, on Apache Kafka 4.3.1 and kbroker alike, over real sockets.

Each test runs against both targets of ``compat.targets`` started with the same
``server.properties``: what kbroker must do is what Kafka does.

- ``max.connections.per.ip`` (through ``max.connections.per.ip.overrides`` for 127.0.0.2): the
  connection beyond the limit is closed at once, the others are served.
- ``max.connections``: the connection beyond the limit is not served until another closes.
- ``queued.max.request.bytes``: while one client's request holds the whole pool, another's
  waits unread; once the first completes both are answered and every record is in the log.
- ``connections.max.idle.ms``: an idle connection is closed, an active one is not.

The tests wait for conditions the kernel shows (``/proc/net/tcp``: the broker has read what was
sent, or has let go of closed connections), never for a fixed time; the only timeouts are the
short windows in which a request must stay unanswered.
"""

from __future__ import annotations

import datetime
import socket
import struct
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition
from kbroker.protocol.codec import response_schema
from kbroker.protocol.record_builder import build_batch
from kio.schema.create_topics.v7 import request as create_topics_v7
from kio.serial import entity_reader
from kio.static.primitive import i16, i32

from compat.connection_costs import API_VERSIONS_V0, tcp_sockets, wait_until_read
from compat.targets import HOST, KbrokerTarget, Target, kafka_target
from tests.end_to_end.raw_kafka import RawClient, encode_request, metadata, produce_v9_body

DEADLINE_S = 30.0
UNANSWERED_S = 1.0  # how long a request that must wait is watched for an answer
MAX_CONNECTIONS = 8
PER_IP_SOURCE = "127.0.0.2"
PER_IP_LIMIT = 2
REQUEST_MAX = 1_048_576  # socket.request.max.bytes, and the whole queued.max.request.bytes pool
IDLE_MS = 2000

LIMITS = {
    "max.connections": str(MAX_CONNECTIONS),
    "max.connections.per.ip.overrides": f"{PER_IP_SOURCE}:{PER_IP_LIMIT}",
    "socket.request.max.bytes": str(REQUEST_MAX),
    "queued.max.request.bytes": str(REQUEST_MAX),
}


def start_target(name: str, workdir: Path, extra: dict[str, str]) -> Target:
    target = kafka_target(workdir, extra) if name == "kafka" else KbrokerTarget(workdir, extra=extra)
    target.start()
    return target


@pytest.fixture(scope="module", params=["kafka", "kbroker"])
def limited(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Target]:
    target = start_target(request.param, tmp_path_factory.mktemp(f"limits-{request.param}"), LIMITS)
    yield target
    target.close()


@pytest.fixture(scope="module", params=["kafka", "kbroker"])
def idle_closing(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Target]:
    extra = {"connections.max.idle.ms": str(IDLE_MS)}
    target = start_target(request.param, tmp_path_factory.mktemp(f"idle-{request.param}"), extra)
    yield target
    target.close()


# --- raw connections ------------------------------------------------------------------------


def connect(target: Target, source: str = HOST) -> socket.socket:
    sock = socket.socket()
    sock.settimeout(DEADLINE_S)
    sock.bind((source, 0))
    sock.connect((target.host, target.port))
    return sock


def read_frame(sock: socket.socket) -> bytes | None:
    """One response frame without its size; None if the broker closed the connection."""
    try:
        head = read_exact(sock, 4)
        return None if head is None else read_exact(sock, struct.unpack(">i", head)[0])
    except ConnectionResetError:
        return None


def read_exact(sock: socket.socket, n: int) -> bytes | None:
    out = bytearray()
    while len(out) < n:
        chunk = sock.recv(n - len(out))
        if not chunk:
            return None
        out += chunk
    return bytes(out)


def answers(sock: socket.socket) -> bool:
    """Send ApiVersions; True once answered, False if the connection is closed instead."""
    sock.sendall(API_VERSIONS_V0)
    return read_frame(sock) is not None


def unanswered(sock: socket.socket) -> bool:
    """Nothing comes back on ``sock`` for UNANSWERED_S (neither an answer nor a close)."""
    sock.settimeout(UNANSWERED_S)
    try:
        sock.recv(1, socket.MSG_PEEK)
    except TimeoutError:
        return True
    finally:
        sock.settimeout(DEADLINE_S)
    return False


def broker_sockets(port: int) -> int:
    """Connections the broker's side still holds on ``port`` (established or half-closed by the
    client): our own clients' ends have other local ports."""
    established, close_wait = "01", "08"
    return sum(1 for local, _remote, state, _queue in tcp_sockets()
               if local == port and state in (established, close_wait))


def wait_until_no_connections(target: Target) -> None:
    """The broker has let go of every connection earlier tests closed (a precondition for
    counting against max.connections)."""
    deadline = time.monotonic() + DEADLINE_S
    while broker_sockets(target.port):
        assert time.monotonic() < deadline, f"{broker_sockets(target.port)} connections still held"
        time.sleep(0.05)


def produce_frame(topic: str, value_size: int, correlation_id: int) -> bytes:
    # Timestamped now: records from 1970 would be deleted by retention (7 days) at once.
    batch = build_batch([(b"k", b"v" * value_size)], base_timestamp=int(time.time() * 1000))
    return encode_request(0, 9, produce_v9_body(topic, 0, batch), correlation_id)


def produce_frame_of(topic: str, frame_size: int, correlation_id: int) -> tuple[bytes, int]:
    """A Produce request whose size prefix declares exactly ``frame_size``, and the size of
    the one record value in it."""
    value_size = frame_size - 200
    for _ in range(10):
        frame = produce_frame(topic, value_size, correlation_id)
        if len(frame) - 4 == frame_size:
            return frame, value_size
        value_size += frame_size - (len(frame) - 4)
    raise AssertionError(f"no produce request of exactly {frame_size} bytes")


def produce_error(frame: bytes | None) -> int:
    assert frame is not None, "connection closed instead of answering the produce"
    response, _size = entity_reader(response_schema(0, 9))(frame, 5)  # after header v1 (id, tags)
    [partition] = response.responses[0].partition_responses
    return int(partition.error_code)


def create_topic(target: Target, name: str) -> None:
    """CreateTopics over a raw socket (no admin client left holding connections), then wait
    until the partition has a leader."""
    client = RawClient(target)  # type: ignore[arg-type]  # it needs only .port
    try:
        client.request(19, 7, create_topics_v7.CreateTopicsRequest(
            topics=(create_topics_v7.CreatableTopic(
                name=name, num_partitions=i32(1), replication_factor=i16(1), assignments=(), configs=(),
            ),),
            timeout=datetime.timedelta(seconds=10), validate_only=False,
        ))
        deadline = time.monotonic() + DEADLINE_S
        while True:
            topic = metadata(client, [name], auto_create=False).topics[0]
            if topic.error_code == 0 and topic.partitions and topic.partitions[0].leader_id >= 0:
                return
            assert time.monotonic() < deadline, f"{name} has no leader"
            time.sleep(0.05)
    finally:
        client.close()


def read_values(target: Target, topic: str, count: int) -> list[bytes]:
    consumer = Consumer({"bootstrap.servers": target.bootstrap, "group.id": f"{topic}-reader",
                         "enable.auto.commit": False})
    values: list[bytes] = []
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        deadline = time.monotonic() + DEADLINE_S
        while len(values) < count:
            assert time.monotonic() < deadline, f"read {len(values)} of {count} records"
            message = consumer.poll(0.2)
            if message is not None and message.error() is None:
                values.append(message.value())
    finally:
        consumer.close()
    return values


# --- max.connections.per.ip -------------------------------------------------------------------


def test_connection_beyond_the_per_ip_limit_is_closed_and_the_others_served(limited: Target) -> None:
    wait_until_no_connections(limited)
    allowed = [connect(limited, PER_IP_SOURCE) for _ in range(PER_IP_LIMIT)]
    try:
        assert all(answers(sock) for sock in allowed)
        extra = connect(limited, PER_IP_SOURCE)  # the TCP handshake completes; then the broker closes it
        try:
            assert read_frame(extra) is None, "the connection beyond max.connections.per.ip was answered"
        finally:
            extra.close()
        assert all(answers(sock) for sock in allowed)
        other_address = connect(limited)  # 127.0.0.1 has no override: not limited
        try:
            assert answers(other_address)
        finally:
            other_address.close()
    finally:
        for sock in allowed:
            sock.close()


# --- max.connections ----------------------------------------------------------------------------


def test_connection_beyond_max_connections_waits_until_one_closes(limited: Target) -> None:
    wait_until_no_connections(limited)
    served = [connect(limited) for _ in range(MAX_CONNECTIONS)]
    waiting = connect(limited)  # completes in the listen backlog; the broker does not take it yet
    try:
        assert all(answers(sock) for sock in served)
        waiting.sendall(API_VERSIONS_V0)
        assert unanswered(waiting), "the connection beyond max.connections was served"
        served.pop().close()
        assert read_frame(waiting) is not None, "the waiting connection was closed instead of served"
        assert all(answers(sock) for sock in served)
    finally:
        waiting.close()
        for sock in served:
            sock.close()


# --- queued.max.request.bytes -------------------------------------------------------------------


def test_request_waits_for_pool_memory_then_both_are_answered(limited: Target) -> None:
    topic = "pool-wait"
    create_topic(limited, topic)
    wait_until_no_connections(limited)
    big, big_value = produce_frame_of(topic, REQUEST_MAX, 1)  # declares the whole pool
    small = produce_frame(topic, 100_000, 2)
    holder, waiter = connect(limited), connect(limited)
    try:
        assert answers(holder) and answers(waiter)
        holder.sendall(big[: 4 + 1000])  # its size prefix takes the pool; the rest is late
        wait_until_read(limited.port, [holder])
        waiter.sendall(small)
        assert unanswered(waiter), "a request was served while the pool was exhausted"
        holder.sendall(big[4 + 1000 :])
        assert produce_error(read_frame(holder)) == 0
        assert produce_error(read_frame(waiter)) == 0
    finally:
        holder.close()
        waiter.close()
    values = read_values(limited, topic, 2)
    assert sorted(len(v) for v in values) == [100_000, big_value]


# --- connections.max.idle.ms --------------------------------------------------------------------


def test_idle_connection_is_closed_and_an_active_one_is_not(idle_closing: Target) -> None:
    idle, active = connect(idle_closing), connect(idle_closing)
    try:
        assert answers(idle) and answers(active)
        deadline = time.monotonic() + DEADLINE_S
        idle.settimeout(IDLE_MS / 1000 / 4)
        while True:  # keep one connection busy while the other idles
            try:
                closed = idle.recv(1) == b""
            except TimeoutError:
                closed = False
            except ConnectionResetError:
                closed = True
            if closed:
                break
            assert time.monotonic() < deadline, "the idle connection was never closed"
            assert answers(active), "the active connection was closed"
        assert answers(active)
    finally:
        idle.close()
        active.close()
