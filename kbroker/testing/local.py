"""Real kbroker nodes on this machine for tests: no container, no JVM.

``kafka_broker(**overrides)`` starts a single node (broker and controller in one process) on a
free loopback port in a temporary directory and yields a :class:`LocalBroker`;
``kafka_cluster(n)`` starts a replicated cluster — one controller and ``n`` brokers — and yields
a :class:`LocalCluster`. Both return once clients can use them: every broker answers a Metadata
request listing all brokers and a controller (:mod:`kbroker.container.healthcheck`), not merely once a port
is open. Nodes are forked from a template process that has kbroker imported already
(:mod:`kbroker.testing.zygote`), so a start costs tens of milliseconds, and each node is a process
of its own: ``kill()`` is a real ``kill -9``, ``restart()`` starts it again on the same port and data.

Overrides are Kafka's broker keys: ``kafka_broker(num_partitions=3)`` (underscores read as dots)
or ``kafka_broker(**{"log.retention.ms": 1000})``.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import tempfile
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any

from kio.schema.create_topics.v7 import request as create_topics_v7
from kio.schema.metadata.v12 import request as metadata_v12

from kbroker.container.healthcheck import METADATA, NotReady, Probe, call, wait_ready
from kbroker.testing.ports import free_port
from kbroker.testing.zygote import Zygote

HOST = "127.0.0.1"
CONTROLLER_ID = 100
START_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 30.0
CREATE_TOPICS = 19
NO_ERROR, TOPIC_ALREADY_EXISTS = 0, 36

# A node for tests: topics appear on first use, a new group starts at once, and a crashed broker
# is fenced (and its partitions moved) within about two seconds.
TEST_SETTINGS: dict[str, str] = {
    "group.initial.rebalance.delay.ms": "0",
    "broker.heartbeat.interval.ms": "500",
    "broker.session.timeout.ms": "2000",
    "replica.lag.time.max.ms": "3000",
}


def broker_settings(overrides: Mapping[str, Any]) -> dict[str, str]:
    """``overrides`` as broker keys and strings: ``num_partitions=3`` -> ``{"num.partitions": "3"}``."""
    out = {}
    for key, value in overrides.items():
        name = key if "." in key else key.replace("_", ".")
        out[name] = str(value).lower() if isinstance(value, bool) else str(value)
    return out


def metadata(host: str, port: int, topics: list[str] | None, timeout: float = 5.0,
             allow_auto_topic_creation: bool = False) -> Any:
    """A Metadata v12 answer from the broker at ``host:port`` itself, whatever it advertises
    (``topics`` None: all topics)."""
    request = metadata_v12.MetadataRequest(
        topics=None if topics is None else tuple(metadata_v12.MetadataRequestTopic(topic_id=None, name=t)
                                                 for t in topics),
        allow_auto_topic_creation=allow_auto_topic_creation, include_topic_authorized_operations=False)
    with socket.create_connection((host, port), timeout=timeout) as sock:
        return call(sock, METADATA, 12, request, time.monotonic() + timeout)


class LocalBroker:
    """One kbroker node process (see the module docstring); ``bootstrap_servers`` is "host:port"."""

    def __init__(self, workdir: Path, node_id: int, settings: Mapping[str, str], port: int | None = None,
                 role: str = "broker") -> None:
        self.workdir = Path(workdir)
        self.node_id = node_id
        self.role = role
        self.port = port or free_port()
        self.data_dir = self.workdir / "data"
        self.log_path = self.workdir / "kbroker.log"
        self.settings = {"node.id": str(node_id), "log.dirs": str(self.data_dir), **settings}
        self.pid: int | None = None

    @property
    def bootstrap_servers(self) -> str:
        return f"{HOST}:{self.port}"

    def argv(self) -> list[str]:
        args = ["serve"]
        for key, value in self.settings.items():
            args += ["--override", f"{key}={value}"]
        return args

    def start(self, timeout: float = START_TIMEOUT_S, *, wait: bool = True) -> None:
        """Start the node (same port and data as before, if it ran already)."""
        if self.is_running():
            raise RuntimeError(f"node {self.node_id} is running already")
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.pid = Zygote.shared().start(self.argv(), str(self.log_path), timeout)
        if wait:
            self.wait_ready(timeout)

    def wait_ready(self, timeout: float = START_TIMEOUT_S, *, brokers: int = 1) -> None:
        """Return once the node answers as ready (a broker: Metadata lists ``brokers`` brokers,
        itself among them); ``RuntimeError`` with the log's tail if it exits or time runs out."""
        deadline = time.monotonic() + timeout
        probe = Probe(HOST, self.port, self.role, self.node_id)
        try:
            wait_ready(probe, timeout, interval=0.01, alive=self.is_running)
            while self.role == "broker" and len(self.metadata([]).brokers) < brokers:
                if time.monotonic() > deadline or not self.is_running():
                    raise NotReady(f"node {self.node_id} does not see {brokers} brokers")
                time.sleep(0.01)
        except NotReady as exc:
            raise RuntimeError(f"{exc}; see {self.log_path}:\n{self.read_log()[-3000:]}") from None

    def is_running(self) -> bool:
        return self.pid is not None and Zygote.shared().exit_status(self.pid) is None

    def stop(self, timeout: float = STOP_TIMEOUT_S) -> int:
        """SIGTERM (a clean shutdown, as ``docker stop``); returns the exit status."""
        return self._end(signal.SIGTERM, timeout)

    def kill(self) -> None:
        """SIGKILL: a crash, as ``kill -9``."""
        self._end(signal.SIGKILL, STOP_TIMEOUT_S)

    def _end(self, sig: signal.Signals, timeout: float) -> int:
        self.signal(sig)
        return self.wait_exit(timeout)

    def signal(self, sig: signal.Signals) -> None:
        """Send ``sig`` to the node's process (SIGSTOP/SIGCONT freeze and thaw it)."""
        if self.pid is None:
            raise RuntimeError(f"node {self.node_id} is not running")
        if Zygote.shared().exit_status(self.pid) is None:
            os.kill(self.pid, sig)

    def wait_exit(self, timeout: float = STOP_TIMEOUT_S) -> int:
        """Wait for the node's process to end; returns its exit status."""
        if self.pid is None:
            raise RuntimeError(f"node {self.node_id} is not running")
        pid, self.pid = self.pid, None
        return Zygote.shared().wait_exit(pid, timeout)

    def restart(self, *, crash: bool = False, timeout: float = START_TIMEOUT_S) -> None:
        """Stop the node (``kill -9`` when ``crash``) and start it again on the same port and data."""
        if self.is_running():
            self.kill() if crash else self.stop()
        self.start(timeout)

    def read_log(self) -> str:
        """Everything the node wrote to standard output and error, across restarts."""
        try:
            return self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def metadata(self, topics: list[str] | None, timeout: float = 5.0) -> Any:
        """A Metadata v12 answer from this node (``topics`` None: all topics)."""
        return metadata(HOST, self.port, topics, timeout)

    def create_topic(self, name: str, partitions: int = 1, replication_factor: int = -1,
                     config: Mapping[str, Any] | None = None, timeout: float = 30.0) -> None:
        """CreateTopics (an existing topic is fine), then wait until the node knows a leader for
        every partition, so a client may produce right away. ``replication_factor`` -1: the default."""
        topic = create_topics_v7.CreatableTopic(
            name=name, num_partitions=partitions, replication_factor=replication_factor, assignments=(),
            configs=tuple(create_topics_v7.CreatableTopicConfig(name=k, value=str(v))
                          for k, v in (config or {}).items()))
        request = create_topics_v7.CreateTopicsRequest(topics=(topic,), timeout=timedelta(seconds=timeout),
                                                       validate_only=False)
        deadline = time.monotonic() + timeout
        with socket.create_connection((HOST, self.port), timeout=timeout) as sock:
            answer = call(sock, CREATE_TOPICS, 7, request, deadline)
        result = answer.topics[0]
        if result.error_code not in (NO_ERROR, TOPIC_ALREADY_EXISTS):
            raise RuntimeError(f"CreateTopics {name}: error {result.error_code} {result.error_message}")
        self.wait_for_topic(name, partitions, deadline - time.monotonic())

    def wait_for_topic(self, name: str, partitions: int, timeout: float) -> None:
        """Return once this node's metadata has ``partitions`` partitions of ``name``, each with a leader."""
        deadline = time.monotonic() + timeout
        while True:
            topics = self.metadata([name]).topics
            if (topics and topics[0].error_code == NO_ERROR and len(topics[0].partitions) >= partitions
                    and all(p.leader_id >= 0 for p in topics[0].partitions)):
                return
            if time.monotonic() > deadline:
                raise TimeoutError(f"topic {name}: no leader for every partition on node {self.node_id}")
            time.sleep(0.01)

    def leader(self, topic: str, partition: int = 0) -> int:
        """The node id this node's metadata names as the partition's leader (-1 when none)."""
        for p in self.metadata([topic]).topics[0].partitions:
            if p.partition_index == partition:
                return int(p.leader_id)
        return -1

    def close(self) -> None:
        if self.is_running():
            self.stop()


@contextmanager
def kafka_broker(**overrides: Any) -> Iterator[LocalBroker]:
    """A single kbroker node, ready for clients, removed (data and all) when the block ends."""
    workdir = Path(tempfile.mkdtemp(prefix="kbroker-"))
    port = free_port()
    settings = {"listeners": f"PLAINTEXT://{HOST}:{port}", **TEST_SETTINGS, **broker_settings(overrides)}
    broker = LocalBroker(workdir, int(settings.get("node.id", 1)), settings, port)
    try:
        broker.start()
        yield broker
    finally:
        broker.close()
        shutil.rmtree(workdir, ignore_errors=True)


class LocalCluster:
    """A controller (node 100) and brokers 1..n on loopback ports; ``bootstrap_servers`` lists
    every broker. Replicated topics by default: replication factor min(3, n), min ISR min(2, n)."""

    def __init__(self, workdir: Path, brokers: int, overrides: Mapping[str, Any]) -> None:
        self.workdir = Path(workdir)
        controller_port = free_port()
        voters = f"{CONTROLLER_ID}@{HOST}:{controller_port}"
        replicas, min_isr = str(min(3, brokers)), str(min(2, brokers))
        common = {
            **TEST_SETTINGS, "controller.quorum.voters": voters, "controller.listener.names": "CONTROLLER",
            "default.replication.factor": replicas, "min.insync.replicas": min_isr,
            "offsets.topic.replication.factor": replicas, "transaction.state.log.replication.factor": replicas,
            "transaction.state.log.min.isr": min_isr, **broker_settings(overrides),
        }
        self.controller = LocalBroker(
            self.workdir / f"node-{CONTROLLER_ID}", CONTROLLER_ID,
            {**common, "process.roles": "controller", "listeners": f"CONTROLLER://{HOST}:{controller_port}"},
            controller_port, role="controller")
        self.brokers: list[LocalBroker] = []
        for node_id in range(1, brokers + 1):
            port = free_port()
            self.brokers.append(LocalBroker(self.workdir / f"node-{node_id}", node_id, {
                **common, "process.roles": "broker", "listeners": f"PLAINTEXT://{HOST}:{port}",
                "inter.broker.listener.name": "PLAINTEXT"}, port))

    @property
    def bootstrap_servers(self) -> str:
        return ",".join(b.bootstrap_servers for b in self.brokers)

    def broker(self, node_id: int) -> LocalBroker:
        return next(b for b in self.brokers if b.node_id == node_id)

    def start(self, timeout: float = START_TIMEOUT_S) -> None:
        """Start every node side by side; return once each broker lists all the brokers."""
        for node in [self.controller, *self.brokers]:
            node.start(timeout, wait=False)
        for broker in self.brokers:
            try:
                broker.wait_ready(timeout, brokers=len(self.brokers))
            except RuntimeError as exc:  # often another node's fault: say which exited, and why
                exited = [n for n in (self.controller, *self.brokers) if not n.is_running()]
                raise RuntimeError("\n".join([str(exc), *(f"node {n.node_id} exited; {n.log_path}:\n"
                                                        f"{n.read_log()[-1500:]}" for n in exited)])) from None

    def create_topic(self, name: str, partitions: int = 1, replication_factor: int = -1,
                     config: Mapping[str, Any] | None = None, timeout: float = 30.0) -> None:
        """CreateTopics through a running broker, then wait until every running broker knows a
        leader for each partition."""
        running = [b for b in self.brokers if b.is_running()]
        running[0].create_topic(name, partitions, replication_factor, config, timeout)
        for broker in running[1:]:
            broker.wait_for_topic(name, partitions, timeout)

    def leader(self, topic: str, partition: int = 0) -> int:
        """The partition's leader as the first running broker sees it."""
        return next(b for b in self.brokers if b.is_running()).leader(topic, partition)

    def read_log(self, node_id: int) -> str:
        return (self.controller if node_id == CONTROLLER_ID else self.broker(node_id)).read_log()

    def close(self) -> None:
        """SIGTERM to every broker at once (their controlled shutdowns overlap), then the controller."""
        running = [b for b in self.brokers if b.is_running()]
        for broker in running:
            broker.signal(signal.SIGTERM)
        for broker in running:
            broker.wait_exit()
        self.controller.close()


@contextmanager
def kafka_cluster(brokers: int = 3, **overrides: Any) -> Iterator[LocalCluster]:
    """A replicated kbroker cluster (one controller, ``brokers`` brokers), ready for clients."""
    workdir = Path(tempfile.mkdtemp(prefix="kbroker-cluster-"))
    cluster = LocalCluster(workdir, brokers, overrides)
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.close()
        shutil.rmtree(workdir, ignore_errors=True)
