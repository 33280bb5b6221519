"""A client that connects the moment a broker's port opens is answered only once the broker is ready.

"The port is open" is how docker-compose health checks, testcontainers and scripts decide a broker
is up. Kafka processes no client request before its broker has replayed the metadata log up to
where it stood at registration and is unfenced; kbroker holds requests on the accepted connection
until the same point (the Dispatcher's readiness: unfenced by a controller that unfences a broker
only once it has replayed past its own registration record). Here catch-up is made slow — a
metadata log of a few thousand records (topics with partitions and configs) and every answer of
the controller held by a proxy until the client requests are in, then delayed — and a raw Metadata
request and a confluent-kafka AdminClient are sent while the broker cannot have registered: both
get the whole cluster (both brokers, a controller, every topic with a leader), and CreateTopics
through the new broker succeeds.
"""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from kio.schema.metadata.v12 import request as metadata_v12

from kbroker.container.healthcheck import METADATA, call
from kbroker.testing.local import CONTROLLER_ID, HOST, TEST_SETTINGS, LocalBroker, free_port

TOPICS = 300
PARTITIONS = 4  # with a config record each: ~1,500 records, besides registrations and leader changes
CONTROLLER_DELAY_S = 0.3
DEADLINE_S = 90.0


class DelayingProxy:
    """Forwards TCP to ``target_port`` on loopback; what the target sends back waits until
    ``release()`` and then ``delay_s`` per read (runs its own event loop in a daemon thread)."""

    def __init__(self, target_port: int, delay_s: float) -> None:
        self.target_port = target_port
        self.delay_s = delay_s
        self.port = free_port()
        self._loop = asyncio.new_event_loop()
        self._started = threading.Event()
        self._released = asyncio.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> None:
        self._thread.start()
        assert self._started.wait(10)

    def release(self) -> None:
        self._loop.call_soon_threadsafe(self._released.set)

    def stop(self) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._loop.run_until_complete(asyncio.start_server(self._connection, HOST, self.port))
        self._started.set()
        self._loop.run_forever()

    async def _connection(self, client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        try:
            target_r, target_w = await asyncio.open_connection(HOST, self.target_port)
        except OSError:
            client_w.close()
            return
        await asyncio.gather(self._pipe(client_r, target_w, None), self._pipe(target_r, client_w, self._released))

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                    released: asyncio.Event | None) -> None:
        try:
            while data := await reader.read(1 << 16):
                if released is not None:
                    await released.wait()
                    await asyncio.sleep(self.delay_s)
                writer.write(data)
                await writer.drain()
        except OSError:
            pass
        finally:
            writer.close()


def connect_when_open(port: int, deadline: float) -> socket.socket:
    """The first connection the port accepts (polled: nothing else says when it opens)."""
    while True:
        try:
            return socket.create_connection((HOST, port), timeout=DEADLINE_S)
        except ConnectionRefusedError:
            assert time.monotonic() < deadline, f"port {port} never opened"
            time.sleep(0.005)


def all_metadata(sock: socket.socket) -> object:
    request = metadata_v12.MetadataRequest(topics=None, allow_auto_topic_creation=False,
                                           include_topic_authorized_operations=False)
    return call(sock, METADATA, 12, request, time.monotonic() + DEADLINE_S)


@pytest.mark.timeout(300)
def test_requests_sent_as_the_port_opens_get_the_whole_cluster(tmp_path: Path) -> None:
    controller_port = free_port()
    common = {**TEST_SETTINGS, "controller.listener.names": "CONTROLLER", "inter.broker.listener.name": "PLAINTEXT",
              "controller.quorum.voters": f"{CONTROLLER_ID}@{HOST}:{controller_port}", "num.partitions": "1",
              "default.replication.factor": "1", "offsets.topic.replication.factor": "1",
              "transaction.state.log.replication.factor": "1", "transaction.state.log.min.isr": "1"}
    controller = LocalBroker(tmp_path / "controller", CONTROLLER_ID, {
        **common, "process.roles": "controller", "listeners": f"CONTROLLER://{HOST}:{controller_port}"},
        controller_port, role="controller")
    first_port, late_port = free_port(), free_port()
    first = LocalBroker(tmp_path / "broker-1", 1, {
        **common, "process.roles": "broker", "listeners": f"PLAINTEXT://{HOST}:{first_port}"}, first_port)
    proxy = DelayingProxy(controller_port, CONTROLLER_DELAY_S)
    # The late broker reaches the controller only through the proxy: every answer comes late.
    late = LocalBroker(tmp_path / "broker-2", 2, {
        **common, "process.roles": "broker", "listeners": f"PLAINTEXT://{HOST}:{late_port}",
        "controller.quorum.voters": f"{CONTROLLER_ID}@{HOST}:{proxy.port}"}, late_port)
    names = [f"topic-{i:03d}" for i in range(TOPICS)]
    try:
        controller.start(wait=False)
        first.start()
        admin = AdminClient({"bootstrap.servers": first.bootstrap_servers})
        for future in admin.create_topics([NewTopic(name, PARTITIONS, 1, config={"retention.ms": "3600000"})
                                           for name in names], request_timeout=120).values():
            future.result(timeout=120)
        proxy.start()

        deadline = time.monotonic() + DEADLINE_S
        late.start(wait=False)
        sock = connect_when_open(late_port, deadline)
        late_admin = AdminClient({"bootstrap.servers": late.bootstrap_servers})
        with sock, ThreadPoolExecutor(2) as pool:
            raw_answer = pool.submit(all_metadata, sock)
            admin_answer = pool.submit(late_admin.list_topics, timeout=DEADLINE_S)  # its first Metadata
            # Nothing from the controller has reached the late broker yet: it cannot have registered,
            # so whatever it answers now would be an empty cluster.
            assert "registered with the controller" not in late.read_log()
            assert not raw_answer.done() and not admin_answer.done()
            proxy.release()
            raw, described = raw_answer.result(DEADLINE_S), admin_answer.result(DEADLINE_S)

        assert sorted(b.node_id for b in raw.brokers) == [1, 2]
        assert raw.controller_id in (1, 2)
        assert {t.name for t in raw.topics} >= set(names)
        assert all(len(t.partitions) == PARTITIONS and all(p.leader_id == 1 for p in t.partitions)
                   for t in raw.topics if t.name in set(names))
        assert sorted(described.brokers) == [1, 2] and described.controller_id in (1, 2)
        assert set(described.topics) >= set(names)

        late_admin.create_topics([NewTopic("created-through-the-late-broker", 2, 2)])[
            "created-through-the-late-broker"].result(timeout=DEADLINE_S)
    finally:
        for node in (late, first, controller):
            node.close()
        proxy.stop()
