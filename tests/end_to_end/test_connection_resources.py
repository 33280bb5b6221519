"""What one client can make a kbroker process spend, over real sockets (issue 13).

- Ten connections that declare frames just under ``socket.request.max.bytes`` and stall cost
  what they sent, not what they declared (VmRSS of ``/proc/<pid>/status``), and another client
  is served meanwhile.
- A client that pipelines requests and never reads the responses stops being read: the broker
  neither buffers responses without bound nor reads requests ahead; every request is answered,
  in order, once the client reads.
- Running out of file descriptors: accepting backs off (the log stays small, no busy loop),
  existing connections are answered, and waiting clients are accepted once descriptors free up.

Kafka has the per-connection behaviour too (tests/end_to_end/test_connection_limits.py runs
the limits on both); these look at the kbroker process itself. They wait for conditions the
kernel or the log shows, with short windows only where something must *not* happen.
"""

from __future__ import annotations

import datetime
import os
import resource
import select
import socket
import struct
import threading
import time

from kbroker.protocol.record_builder import build_batch
from kio.schema.fetch.v12 import request as fetch_v12
from kio.static.primitive import i8, i32, i64

from compat.connection_costs import API_VERSIONS_V0, status_kib, wait_until_read
from tests.broker_process import BrokerProcess
from tests.end_to_end.raw_kafka import SOCKET_REQUEST_MAX_BYTES, RawClient, encode_request, metadata, produce

DEADLINE_S = 30.0
QUIET_S = 1.0  # a window in which something must not happen
MIB = 1024 * 1024


def connect(broker: BrokerProcess) -> socket.socket:
    return socket.create_connection(("127.0.0.1", broker.port), timeout=DEADLINE_S)


def read_frame(sock: socket.socket) -> bytes:
    head = read_exact(sock, 4)
    return read_exact(sock, struct.unpack(">i", head)[0])


def read_exact(sock: socket.socket, n: int) -> bytes:
    out = bytearray()
    while len(out) < n:
        chunk = sock.recv(n - len(out))
        if not chunk:
            raise ConnectionError("closed by the broker")
        out += chunk
    return bytes(out)


def answered(sock: socket.socket) -> bool:
    sock.sendall(API_VERSIONS_V0)
    return len(read_frame(sock)) > 0


def rss_mib(broker: BrokerProcess) -> float:
    assert broker.proc is not None
    return status_kib(broker.proc.pid, "VmRSS") / 1024


def test_stalled_large_frames_cost_what_was_sent_and_others_are_served(broker: BrokerProcess) -> None:
    bystander = connect(broker)
    stalled = [connect(broker) for _ in range(10)]
    try:
        assert answered(bystander)
        rss_before = rss_mib(broker)
        for sock in stalled:
            sock.sendall(struct.pack(">i", SOCKET_REQUEST_MAX_BYTES - 1))
        wait_until_read(broker.port, stalled)
        for sock in stalled:  # a later read is where a buffer for the body gets sized
            sock.sendall(b"\0" * 100_000)
        wait_until_read(broker.port, stalled)
        assert answered(bystander)
        grown = rss_mib(broker) - rss_before
        assert grown < 32, f"RSS grew {grown:.0f} MiB for 10 x 100 KB received (declared 10 x 100 MiB)"
    finally:
        for sock in stalled:
            sock.close()
    assert answered(bystander)
    bystander.close()


def test_a_client_that_does_not_read_responses_is_not_read_and_everything_is_answered_later(
    broker: BrokerProcess,
) -> None:
    topic = "unread-responses"
    client = RawClient(broker)
    try:
        assert metadata(client, [topic]).topics[0].error_code == 0  # auto-created
        batch = build_batch([(b"k", b"v" * 16_000)], base_timestamp=int(time.time() * 1000))
        assert produce(client, topic, 0, batch).error_code == 0
    finally:
        client.close()
    request = bytearray(encode_request(1, 12, fetch_v12.FetchRequest(
        cluster_id=None, replica_id=i32(-1), max_wait=datetime.timedelta(0), min_bytes=i32(0),
        max_bytes=i32(MIB), isolation_level=i8(0), session_id=i32(0), session_epoch=i32(-1),
        topics=(fetch_v12.FetchTopic(topic=topic, partitions=(fetch_v12.FetchPartition(
            partition=i32(0), current_leader_epoch=i32(-1), fetch_offset=i64(0), last_fetched_epoch=i32(-1),
            log_start_offset=i64(-1), partition_max_bytes=i32(MIB),
        ),)),),
        forgotten_topics_data=(), rack_id="",
    ), 0))
    count = 200_000  # 20 MB of requests, 3 GB of responses: far more than any buffer holds
    stream = bytearray(len(request) * count)
    for i in range(count):
        struct.pack_into(">i", request, 8, i)  # correlation id
        stream[i * len(request) : (i + 1) * len(request)] = request
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 64 * 1024)
    sock.connect(("127.0.0.1", broker.port))
    try:
        rss_before = rss_mib(broker)
        sock.setblocking(False)
        sent = 0
        while sent < len(stream):  # send until the broker stops reading: the kernel buffers stay full
            try:
                sent += sock.send(stream[sent : sent + 65536])
                continue
            except BlockingIOError:
                pass
            if not select.select([], [sock], [], QUIET_S)[1]:
                break
        assert sent < len(stream), "the broker read every request while none of its answers was read"
        grown = rss_mib(broker) - rss_before
        assert grown < 64, f"RSS grew {grown:.0f} MiB while the client read nothing"
        complete = -(-sent // len(request))  # the last request may be cut: its rest follows
        sock.setblocking(True)
        sock.settimeout(DEADLINE_S)
        rest = threading.Thread(target=sock.sendall, args=(stream[sent : complete * len(request)],))
        rest.start()
        for expected in range(complete):
            (correlation_id,) = struct.unpack_from(">i", read_frame(sock), 0)
            assert correlation_id == expected
        rest.join()
    finally:
        sock.close()


def open_descriptors(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as fh:
        fields = fh.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime


def test_out_of_descriptors_backs_off_serves_open_connections_and_recovers(fresh_broker: BrokerProcess) -> None:
    broker = fresh_broker
    assert broker.proc is not None
    pid = broker.proc.pid
    log_start = len(broker.read_log())
    early = connect(broker)
    assert answered(early)
    headroom = 40
    limit = open_descriptors(pid) + headroom
    resource.prlimit(pid, resource.RLIMIT_NOFILE, (limit, limit))
    clients = [connect(broker) for _ in range(headroom + 20)]  # the kernel completes them all
    try:
        for sock in clients:
            sock.sendall(API_VERSIONS_V0)
        deadline = time.monotonic() + DEADLINE_S
        while "out of resources" not in broker.read_log()[log_start:]:
            assert time.monotonic() < deadline, "the broker never ran out of descriptors"
            time.sleep(0.05)
        served = 0  # the broker accepts in order: the first ones are served, the rest wait
        while served < len(clients) and select.select([clients[served]], [], [], QUIET_S)[0]:
            read_frame(clients[served])
            served += 1
        assert 0 < served < len(clients)
        cpu_before, wall_before = cpu_seconds(pid), time.monotonic()
        while broker.read_log()[log_start:].count("out of resources") < 4:  # it retries, backing off
            assert time.monotonic() < deadline, "accepting was not retried"
            assert answered(early), "an open connection was not served meanwhile"
            time.sleep(0.05)
        busy = (cpu_seconds(pid) - cpu_before) / (time.monotonic() - wall_before)
        assert busy < 0.5, f"the broker was on the CPU {busy:.0%} of the time while it could not accept"
        log = broker.read_log()[log_start:]
        assert len(log) < 20_000 and log.count("\n") < 50, log[-3000:]
        for sock in clients[:served]:  # descriptors free up
            sock.close()
        for sock in clients[served:]:
            assert len(read_frame(sock)) > 0
        assert answered(early)
    finally:
        for sock in clients:
            sock.close()
        early.close()
