"""What the scripted fault scenarios observe: partition views, acked writes, replica logs, a drain.

``BoundKafkaCluster`` is the real-Kafka cluster whose JVMs bind their outbound sockets to their
own 127.0.0.x (through ``compat.netns.bind_shim``), so address-based cuts bite on Kafka as they
do on kbroker; in both fault clusters a node dies with the driver process. ``partition_view``
asks one broker (DescribeTopicPartitions, raw) for leader, epoch, ISR and ELR; ``Writer`` is an
idempotent acks=all producer thread recording each value's outcome and acknowledgement time;
``replica_logs`` reads every replica's log from disk; ``converge`` waits until one leader, a full
ISR and identical logs; ``drain`` reads a partition to its high watermark.
"""

from __future__ import annotations

import io
import os
import socket
import struct
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from kio.schema.describe_topic_partitions.v0 import request as dtp_request
from kio.schema.describe_topic_partitions.v0 import response as dtp_response
from kio.schema.request_header.v2.header import RequestHeader
from kio.serial import entity_reader, entity_writer
from kio.static.primitive import i16, i32

from compat import netns
from compat.cluster import Cluster, ClusterNode, KafkaCluster, KafkaNode, KbrokerCluster, KbrokerNode
from compat.failover import PRODUCER_CONFIG, WORKLOAD_NICE, History, Send, client_config
from compat.replica_logs import ReplicaLog, log_matching, read_replica_log

POLL_S = 0.05
REPLICATION_FACTOR = 3


# A node dies with the driver that started it: a driver killed on a timeout must not leave JVMs
# running in a namespace nobody can enter any more. (setpriv execs, so the pid stays the node's.)
DIE_WITH_DRIVER = ["setpriv", "--pdeathsig", "SIGKILL"]


class BoundKafkaNode(KafkaNode):
    """A Kafka JVM started under the bind shim with ``KBIND_ADDR`` = its own listener address."""

    def command(self) -> list[str]:
        shim = ["env", f"LD_PRELOAD={netns.bind_shim()}", f"KBIND_ADDR={self.host}"]
        return [*DIE_WITH_DRIVER, *shim, *super().command()]


class BoundKafkaCluster(KafkaCluster):
    def make_node(self, workdir: Path, node_id: int, host: str, port: int, settings: dict[str, str]) -> ClusterNode:
        return BoundKafkaNode(workdir, node_id, host, port, settings)


class FaultKbrokerNode(KbrokerNode):
    """A kbroker node (it binds its outbound sockets itself) that dies with the driver."""

    def command(self) -> list[str]:
        return [*DIE_WITH_DRIVER, *super().command()]


class FaultKbrokerCluster(KbrokerCluster):
    def make_node(self, workdir: Path, node_id: int, host: str, port: int, settings: dict[str, str]) -> ClusterNode:
        return FaultKbrokerNode(workdir, node_id, host, port, settings)


# --- what one broker believes -----------------------------------------------------------------------


@dataclass
class View:
    """Partition 0 of a topic as one broker sees it."""

    leader: int
    epoch: int
    isr: list[int]
    elr: list[int]
    last_known_elr: list[int]

    def as_dict(self) -> dict[str, Any]:
        return {"leader": self.leader, "epoch": self.epoch, "isr": self.isr, "elr": self.elr,
                "last_known_elr": self.last_known_elr}  # fmt: skip


_correlation = iter(range(1, 1 << 30))


def partition_view(cluster: Cluster, broker: int, topic: str, timeout: float = 1.0) -> View | None:
    """DescribeTopicPartitions v0 for ``topic`` partition 0 from ``broker``; None when it does not answer."""
    body = dtp_request.DescribeTopicPartitionsRequest(
        topics=(dtp_request.TopicRequest(name=topic),), response_partition_limit=i32(2000), cursor=None
    )
    try:
        reply = _exchange(cluster.host(broker), cluster.port(broker), 75, 0, body, timeout)
    except OSError:
        return None
    value, _ = entity_reader(dtp_response.DescribeTopicPartitionsResponse)(reply, 5)
    for t in value.topics:
        for p in t.partitions:
            if p.partition_index == 0:
                return View(p.leader_id, p.leader_epoch, sorted(p.isr_nodes), sorted(p.eligible_leader_replicas),
                            sorted(p.last_known_elr))  # fmt: skip
    return None


def live_brokers(cluster: Cluster, broker: int) -> list[int] | None:
    """The brokers ``broker``'s Metadata lists (KRaft leaves fenced brokers out)."""
    try:
        return sorted(b.node_id for b in cluster.metadata(broker, [], timeout=1.0).brokers)
    except OSError:
        return None


def _exchange(host: str, port: int, api_key: int, version: int, body: Any, timeout: float) -> bytes:
    correlation_id = next(_correlation)
    buf = io.BytesIO()
    entity_writer(RequestHeader)(buf, RequestHeader(
        request_api_key=i16(api_key), request_api_version=i16(version), correlation_id=i32(correlation_id),
        client_id="kbroker-fault-probe",
    ))  # fmt: skip
    entity_writer(type(body))(buf, body)
    frame = buf.getvalue()
    with socket.create_connection((host, port), timeout=timeout) as sock:
        sock.sendall(struct.pack(">i", len(frame)) + frame)
        (size,) = struct.unpack(">i", _recv(sock, 4))
        reply = _recv(sock, size)
    if struct.unpack_from(">i", reply, 0)[0] != correlation_id:
        raise ConnectionError("answer to another correlation id")
    return reply


def _recv(sock: socket.socket, n: int) -> bytes:
    out = bytearray()
    while len(out) < n:
        chunk = sock.recv(n - len(out))
        if not chunk:
            raise ConnectionError("connection closed")
        out += chunk
    return bytes(out)


def wait_for(condition: Callable[[], bool], deadline_s: float) -> float | None:
    """Seconds until ``condition()`` holds (None: not within ``deadline_s``)."""
    start = time.monotonic()
    while time.monotonic() - start < deadline_s:
        if condition():
            return time.monotonic() - start
        time.sleep(POLL_S)
    return None


def views(cluster: Cluster, brokers: list[int], topic: str) -> dict[int, View | None]:
    return {b: partition_view(cluster, b, topic) for b in brokers}


def agreed_full(cluster: Cluster, topic: str) -> bool:
    """Every broker reports the same live leader and epoch and an ISR of all three replicas."""
    seen = list(views(cluster, cluster.broker_ids, topic).values())
    if any(v is None for v in seen):
        return False
    first = seen[0]
    assert first is not None
    return all(
        v is not None and v.leader == first.leader and v.epoch == first.epoch and v.leader >= 0
        and len(v.isr) == REPLICATION_FACTOR
        for v in seen
    )  # fmt: skip


# --- writes -------------------------------------------------------------------------------------------


class Writer(threading.Thread):
    """An idempotent acks=all producer sending ``rate`` unique values/s to partition 0 of ``topic``."""

    def __init__(self, bootstrap: str, topic: str, history: History, rate: float, name: str) -> None:
        super().__init__(name=name, daemon=True)
        self.topic = topic
        self.history = history
        self.interval = 1.0 / rate
        self.acked_at: dict[int, float] = {}
        self.stopping = threading.Event()
        self.producer = Producer({**client_config(bootstrap), **PRODUCER_CONFIG, "client.id": name})

    def _callback(self, send: Send) -> Callable[[KafkaError | None, Any], None]:
        def done(err: KafkaError | None, msg: Any) -> None:
            self.history.resolve(send, err, msg)
            if err is None:
                self.acked_at[send.value] = time.monotonic()

        return done

    def run(self) -> None:
        # Per-thread nice (inherited by librdkafka's threads): the brokers keep the two cores.
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), WORKLOAD_NICE)
        next_at = time.monotonic()
        while not self.stopping.is_set():
            send = self.history.invoke(self.name, 0)
            try:
                self.producer.produce(self.topic, value=str(send.value).encode(), partition=0,
                                      on_delivery=self._callback(send))  # fmt: skip
            except BufferError:
                send.outcome, send.error = "fail", "local queue full"
            next_at += self.interval
            self.producer.poll(max(0.0, next_at - time.monotonic()))
        self.producer.flush(PRODUCER_CONFIG["delivery.timeout.ms"] / 1000 + 5)

    def stop(self) -> None:
        self.stopping.set()
        self.join()

    def acks_since(self, since: float) -> int:
        return sum(1 for t in list(self.acked_at.values()) if t >= since)

    def wait_acks(self, count: int, since: float, deadline_s: float) -> float | None:
        return wait_for(lambda: self.acks_since(since) >= count, deadline_s)


def probe_errors(bootstrap: str, topic: str, count: int) -> dict[str, int]:
    """Send ``count`` values with a plain acks=all producer that never retries; outcome name -> count.
    It shows the broker's own answer (an idempotent producer would retry NOT_ENOUGH_REPLICAS)."""
    outcomes: dict[str, int] = {}
    producer = Producer({
        **client_config(bootstrap), "acks": "all", "enable.idempotence": False, "retries": 0,
        "message.timeout.ms": 4000, "socket.timeout.ms": 4000, "request.timeout.ms": 3000,
        "client.id": "fault-probe",
    })  # fmt: skip

    def done(err: KafkaError | None, _msg: Any) -> None:
        name = "ok" if err is None else err.name()
        outcomes[name] = outcomes.get(name, 0) + 1

    for i in range(count):
        producer.produce(topic, value=f"probe-{i}".encode(), partition=0, on_delivery=done)
    producer.flush(10)
    return outcomes


# --- logs and reads -------------------------------------------------------------------------------------


def replica_logs(cluster: Cluster, topic: str, brokers: list[int] | None = None) -> dict[int, ReplicaLog]:
    return {
        b: read_replica_log(Path(cluster.nodes[b].settings["log.dirs"]), topic) for b in (brokers or cluster.broker_ids)
    }


def logged_values(logs: dict[int, ReplicaLog]) -> set[int]:
    """Every integer value on any of ``logs`` (the writers' values; probe records are skipped)."""
    out = set()
    for log in logs.values():
        for value in log.values().values():
            if value is not None and value.isdigit():
                out.add(int(value))
    return out


def converge(cluster: Cluster, topic: str, deadline_s: float = 60.0) -> float | None:
    """Seconds until every broker agrees on a leader with a full ISR and all replica logs are identical."""

    def done() -> bool:
        if not agreed_full(cluster, topic):
            return False
        logs = replica_logs(cluster, topic)
        ends = {log.log_end_offset for log in logs.values()}
        return len(ends) == 1 and not log_matching(logs, ends.pop())

    return wait_for(done, deadline_s)


def drain(bootstrap: str, topic: str, deadline_s: float = 30.0) -> dict[int, str]:
    """Partition 0 of ``topic`` from offset 0 to the high watermark: ``{offset: value}``."""
    consumer = Consumer({
        **client_config(bootstrap), "group.id": f"fault-drain-{topic}", "enable.auto.commit": False,
        "isolation.level": "read_committed", "auto.offset.reset": "earliest",
    })  # fmt: skip
    try:
        high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=20)[1]
        consumer.assign([TopicPartition(topic, 0, 0)])
        read: dict[int, str] = {}
        position = 0
        start = time.monotonic()
        while position < high and time.monotonic() - start < deadline_s:
            msg = consumer.poll(0.5)
            if msg is None or msg.error() is not None:
                continue
            read[msg.offset()] = msg.value().decode()
            position = msg.offset() + 1
        if position < high:
            raise RuntimeError(f"drain of {topic} stopped at {position} of {high}")
        return read
    finally:
        consumer.close()


def _places(read: dict[int, str]) -> dict[int, list[int]]:
    """Writer value -> the offsets it was read at (probe records are skipped)."""
    places: dict[int, list[int]] = {}
    for offset, value in sorted(read.items()):
        if value.isdigit():
            places.setdefault(int(value), []).append(offset)
    return places


def write_check(sends: list[Send], read: dict[int, str]) -> dict[str, list[int]]:
    """Acknowledged values never read, read at another offset than the one acknowledged, read twice,
    or read out of send order; failed values that were read.

    ``moved`` looks only at acknowledgements that name an offset (see ``Send.offset_known``); one without
    is still checked by the rest: read exactly once, and in order. Order: one producer session's
    acknowledged values (an idempotent producer, one partition) must be read at increasing offsets
    in the order they were sent (``sends`` is in send order); a value that is not is ``out_of_order``."""
    places = _places(read)
    ok = [s for s in sends if s.outcome == "ok"]
    out_of_order: list[int] = []
    last: dict[str, int] = {}
    for s in ok:
        where = places.get(s.value, [])
        if len(where) != 1:
            continue  # lost or duplicated: reported as such
        if where[0] <= last.get(s.session, -1):
            out_of_order.append(s.value)
        last[s.session] = max(where[0], last.get(s.session, -1))
    return {
        "lost": [s.value for s in ok if s.value not in places],
        "moved": [s.value for s in ok if s.offset_known and s.value in places and places[s.value] != [s.offset]],
        "duplicates": [v for v, offsets in places.items() if len(offsets) > 1],
        "failed_but_read": [s.value for s in sends if s.outcome == "fail" and s.value in places],
        "out_of_order": out_of_order,
    }


def acked_without_offset(sends: list[Send], read: dict[int, str]) -> list[dict[str, Any]]:
    """Acknowledged values whose delivery report named no offset, with the offsets they were read at."""
    places = _places(read)
    return [
        {"value": s.value, "reported_offset": s.offset, "read_at": places.get(s.value, [])}
        for s in sends if s.outcome == "ok" and not s.offset_known
    ]  # fmt: skip


def moved_detail(sends: list[Send], read: dict[int, str]) -> list[dict[str, Any]]:
    """For each ``moved`` value: the offset acknowledged, the offsets it was read at, and what was read
    at the acknowledged offset (with that value's own outcome, acknowledged offset and error)."""
    places = _places(read)
    by_value = {s.value: s for s in sends}
    out = []
    for s in sends:
        if s.outcome != "ok" or not s.offset_known or s.value not in places or places[s.value] == [s.offset]:
            continue
        there = read.get(s.offset) if s.offset is not None else None
        other = by_value.get(int(there)) if there is not None and there.isdigit() else None
        out.append({
            "value": s.value, "acked_offset": s.offset, "read_at": places[s.value], "at_acked_offset": there,
            "that_outcome": None if other is None else other.outcome,
            "that_acked_offset": None if other is None else other.offset,
            "that_error": None if other is None else other.error,
        })  # fmt: skip
    return out
