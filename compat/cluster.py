"""A replicated test cluster of either implementation, in one of Kafka's three deployment layouts.

``KafkaCluster`` runs real Apache Kafka 4.3.1 JVMs from the Maven jars (``compat.deps``), and
``KbrokerCluster`` runs ``python -m kbroker serve`` processes. Both run the same topology
(``topology=``), named as Kafka's documentation names the KRaft modes:

- ``isolated`` (the default, the design notes of the replication issue): a controller-only node
  ``node.id=100`` on 127.0.0.21 (or, with ``controllers=3``, a three-voter quorum 100-102 on
  127.0.0.21-23) and broker-only nodes 1, 2, 3 on 127.0.0.11, .12, .13;
- ``combined``: nodes 1, 2, 3 on 127.0.0.11-13, each with ``process.roles=broker,controller``, a
  PLAINTEXT and a CONTROLLER listener, all three the static voters (Kafka's small-cluster layout);
- ``mixed``: the three combined nodes plus a broker-only node 4 on 127.0.0.14.

Every listener is on a port that is free on its node's own address. Both implementations get the
same settings (short heartbeats and sessions so a crashed leader is replaced within seconds, RF 3
and ``min.insync.replicas=2`` by default), overridable through ``extra``.

Nodes are controlled one by one: ``kill`` (SIGKILL), ``stop`` (SIGTERM), ``start_node``
(same ports and data), ``pause``/``resume`` (SIGSTOP/SIGCONT). Each node keeps its data and
logs under ``workdir/node-<id>``. ``metadata()`` is a raw Metadata request to one broker,
so a caller can ask a chosen broker what it believes (a client library would pick any).
"""

from __future__ import annotations

import io
import shutil
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from kio.schema.metadata.v12 import request as metadata_request
from kio.schema.metadata.v12 import response as metadata_response
from kio.schema.request_header.v2.header import RequestHeader
from kio.serial import entity_reader, entity_writer
from kio.static.primitive import i16, i32

from compat.deps import kafka_classpath
from compat.targets import (
    KAFKA_ONLY_SETTINGS,
    LOG4J2_FILE_CONFIG,
    START_TIMEOUT_S,
    STOP_TIMEOUT_S,
    ProcessTarget,
    free_port,
    random_cluster_id,
    stock_jvm,
    tail,
    wait_for_port,
)

CONTROLLER_ID = 100
# A three-voter controller quorum (``controllers=3``): nodes 100-102 on 127.0.0.21-23.
CONTROLLER_HOSTS: dict[int, str] = {100: "127.0.0.21", 101: "127.0.0.22", 102: "127.0.0.23"}
BROKER_HOSTS: dict[int, str] = {1: "127.0.0.11", 2: "127.0.0.12", 3: "127.0.0.13"}
# The broker-only node the mixed topology adds beside the three combined nodes.
MIXED_BROKER_HOSTS: dict[int, str] = {4: "127.0.0.14"}
TOPOLOGIES = ("isolated", "combined", "mixed")
READY_TIMEOUT_S = 120.0

# Settings every node of both clusters runs with; ``extra`` wins over them.
CLUSTER_SETTINGS: dict[str, str] = {
    "broker.heartbeat.interval.ms": "500",
    "broker.session.timeout.ms": "2000",
    "replica.lag.time.max.ms": "3000",
    "auto.create.topics.enable": "false",
    "num.partitions": "1",
    "default.replication.factor": "3",
    "min.insync.replicas": "2",
    "offsets.topic.replication.factor": "3",
    "transaction.state.log.replication.factor": "3",
    "transaction.state.log.min.isr": "2",
    "share.coordinator.state.topic.replication.factor": "3",
    "share.coordinator.state.topic.min.isr": "2",
    "group.initial.rebalance.delay.ms": "0",
    "unclean.leader.election.enable": "false",
    # Timed-out transactions are looked for every second, not every 10 s: the abandoned-transaction
    # test waits for the abort.
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": "1000",
}

# Small heaps and C1-only JIT: four JVMs share two cores with the test driver and other work.
KAFKA_BROKER_JVM = ["-Xms128m", "-Xmx512m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Djava.awt.headless=true"]
KAFKA_CONTROLLER_JVM = ["-Xms64m", "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1"]


def node_settings(
    node_id: int, roles: str, host: str, ports: dict[str, int], voters: str, log_dir: Path,
    extra: dict[str, str] | None,
) -> dict[str, str]:
    """The ``server.properties`` keys of one node (``roles``: Kafka's ``process.roles``; ``ports``:
    listener name to port; ``voters``: id@host:port,...)."""
    settings = {
        "node.id": str(node_id),
        "process.roles": roles,
        "controller.listener.names": "CONTROLLER",
        "controller.quorum.voters": voters,
        "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
        "listeners": ",".join(f"{name}://{host}:{port}" for name, port in ports.items()),
        "log.dirs": str(log_dir),
    }
    if "PLAINTEXT" in ports:  # a broker: clients and the other brokers reach it there
        settings |= {
            "advertised.listeners": f"PLAINTEXT://{host}:{ports['PLAINTEXT']}",
            "inter.broker.listener.name": "PLAINTEXT",
        }
    return {**settings, **CLUSTER_SETTINGS, **(extra or {})}


def listener_port(settings: dict[str, str], name: str) -> int | None:
    """The port of listener ``name`` in a node's ``listeners`` (None when it has no such listener)."""
    for listener in settings["listeners"].split(","):
        listener_name, _, address = listener.partition("://")
        if listener_name == name:
            return int(address.rpartition(":")[2])
    return None


class ClusterNode(ProcessTarget):
    """One node process of a cluster; subclasses say how it is launched."""

    def __init__(self, workdir: Path, node_id: int, host: str, port: int, settings: dict[str, str]) -> None:
        super().__init__(workdir, host, port)
        self.node_id = node_id
        self.settings = settings
        self.paused = False
        self.log = self.workdir / "stdout.log"
        self.diagnostics = self.log  # the file whose tail explains a failed start
        self.roles = set(settings["process.roles"].split(","))
        controller_port = listener_port(settings, "CONTROLLER")
        self.controller_port = port if controller_port is None else controller_port

    @property
    def controller_bootstrap(self) -> str:
        """Where ``--bootstrap-controller`` reaches this node's controller listener."""
        return f"{self.host}:{self.controller_port}"

    def command(self) -> list[str]:
        raise NotImplementedError

    def start(self) -> None:
        with open(self.log, "ab") as out:
            self.proc = subprocess.Popen(self.command(), stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        self.paused = False

    def wait_listening(self) -> None:
        proc = self.proc
        assert proc is not None
        what = f"node {self.node_id}"
        wait_for_port(self.port, lambda: proc.poll() is None, START_TIMEOUT_S, what, self.diagnostics, self.host)

    def signal(self, sig: signal.Signals) -> None:
        assert self.proc is not None, f"node {self.node_id} is not running"
        self.proc.send_signal(sig)

    def stop(self) -> None:
        if self.paused:  # a stopped process would only see SIGTERM after SIGCONT
            self.resume()
        super().stop()

    def kill(self) -> None:
        super().kill()
        self.paused = False

    def pause(self) -> None:
        self.signal(signal.SIGSTOP)
        self.paused = True

    def resume(self) -> None:
        if self.is_running():  # a timed resume may come after the node was killed or stopped
            self.signal(signal.SIGCONT)
        self.paused = False


class KafkaNode(ClusterNode):
    """A Kafka 4.3.1 JVM (``kafka.Kafka server.properties``) from the Maven jars."""

    def __init__(self, workdir: Path, node_id: int, host: str, port: int, settings: dict[str, str]) -> None:
        super().__init__(workdir, node_id, host, port, {**KAFKA_ONLY_SETTINGS, **settings})
        self.properties = self.workdir / "server.properties"
        self.properties.write_text("".join(f"{k}={v}\n" for k, v in self.settings.items()))
        self.log4j = self.workdir / "log4j2.properties"
        self.server_log = self.workdir / "server.log"
        self.log4j.write_text(LOG4J2_FILE_CONFIG.format(log=self.server_log, level="INFO"))
        self.diagnostics = self.server_log  # log4j writes there; stdout stays nearly empty
        self.java = shutil.which("java") or "java"
        self.classpath = kafka_classpath()
        self.heap = KAFKA_BROKER_JVM if "broker" in self.roles else KAFKA_CONTROLLER_JVM

    def java_command(self, *args: str, heap: list[str] | None = None) -> list[str]:
        return [
            self.java, *(heap or ["-Xmx256m", "-XX:TieredStopAtLevel=1"]),
            f"-Dlog4j2.configurationFile={self.log4j}", "-cp", self.classpath, *args,
        ]  # fmt: skip

    def format_storage(self, cluster_id: str) -> None:
        """``StorageTool format`` with the cluster's id; the static voter set comes from
        ``controller.quorum.voters`` in the file (no ``--standalone``/``--initial-controllers``)."""
        if (Path(self.settings["log.dirs"]) / "meta.properties").exists():
            return
        done = subprocess.run(
            self.java_command("kafka.tools.StorageTool", "format", "-t", cluster_id, "-c", str(self.properties)),
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        if done.returncode != 0:
            raise RuntimeError(f"StorageTool format failed for node {self.node_id}:\n{done.stdout}{done.stderr}")

    def command(self) -> list[str]:
        return self.java_command("kafka.Kafka", str(self.properties), heap=self.heap)


class KbrokerNode(ClusterNode):
    """A kbroker process: ``python -m kbroker serve --override key=value ...``."""

    def __init__(
        self, workdir: Path, node_id: int, host: str, port: int, settings: dict[str, str], python: str = sys.executable
    ) -> None:
        super().__init__(workdir, node_id, host, port, settings)
        self.python = python

    def command(self) -> list[str]:
        args = [self.python, "-m", "kbroker", "serve"]
        for key, value in self.settings.items():
            args += ["--override", f"{key}={value}"]
        return args


class Cluster:
    """The nodes of one topology of one implementation (see the module docstring)."""

    name = "cluster"

    def __init__(self, workdir: Path, extra: dict[str, str] | None = None, controllers: int = 1,
                 node_extra: dict[int, dict[str, str]] | None = None, topology: str = "isolated") -> None:
        self.workdir = Path(workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.topology = topology
        roles = topology_roles(topology, controllers)
        self.controller_ids = sorted(n for n, r in roles.items() if "controller" in r)
        self.broker_ids = sorted(n for n, r in roles.items() if "broker" in r)
        hosts = {**CONTROLLER_HOSTS, **BROKER_HOSTS, **MIXED_BROKER_HOSTS}
        ports: dict[int, dict[str, int]] = {
            node_id: {name: free_port(hosts[node_id]) for name in listener_names(node_roles)}
            for node_id, node_roles in roles.items()
        }
        voters = ",".join(f"{c}@{hosts[c]}:{ports[c]['CONTROLLER']}" for c in self.controller_ids)
        self.nodes: dict[int, ClusterNode] = {}
        for node_id, node_roles in roles.items():
            node_dir = self.workdir / f"node-{node_id}"
            node_ports = ports[node_id]
            settings = node_settings(node_id, node_roles, hosts[node_id], node_ports, voters, node_dir / "data",
                                     {**(extra or {}), **(node_extra or {}).get(node_id, {})})
            # A node's own port is where it is waited for and bootstrapped: a broker's client listener.
            port = node_ports["PLAINTEXT"] if "PLAINTEXT" in node_ports else node_ports["CONTROLLER"]
            self.nodes[node_id] = self.make_node(node_dir, node_id, hosts[node_id], port, settings)

    def make_node(self, workdir: Path, node_id: int, host: str, port: int, settings: dict[str, str]) -> ClusterNode:
        raise NotImplementedError

    @property
    def bootstrap(self) -> str:
        return ",".join(self.nodes[b].bootstrap for b in self.broker_ids)

    @property
    def controller_bootstrap(self) -> str:
        """Every voter's controller listener, as ``--bootstrap-controller`` takes them."""
        return ",".join(self.nodes[c].controller_bootstrap for c in self.controller_ids)

    def host(self, node_id: int) -> str:
        return self.nodes[node_id].host

    def port(self, node_id: int) -> int:
        return self.nodes[node_id].port

    def is_running(self, node_id: int) -> bool:
        return self.nodes[node_id].is_running()

    def start(self) -> None:
        """Start every node and return once each broker's metadata lists all three brokers."""
        for node in self.nodes.values():
            node.start()
        for node in self.nodes.values():
            node.wait_listening()
        self.wait_registered(self.broker_ids)

    def wait_registered(self, expected: list[int], timeout: float = READY_TIMEOUT_S) -> None:
        """Return once every broker in ``expected`` answers Metadata listing all of ``expected``."""
        deadline = time.monotonic() + timeout
        seen: dict[int, object] = {}
        while time.monotonic() < deadline:
            for broker in expected:
                node = self.nodes[broker]
                if not node.is_running():
                    code = None if node.proc is None else node.proc.returncode
                    raise RuntimeError(
                        f"broker {broker} exited ({code}); see {node.diagnostics}:\n{self.log_tail(broker)}"
                    )
                try:
                    seen[broker] = sorted(b.node_id for b in self.metadata(broker, [], timeout=2.0).brokers)
                except OSError as exc:
                    seen[broker] = exc
            if all(seen.get(b) == sorted(expected) for b in expected):
                return
            time.sleep(0.2)
        raise RuntimeError(f"brokers not all registered within {timeout:.0f} s: {seen}")

    def log_tail(self, node_id: int) -> str:
        return tail(self.nodes[node_id].diagnostics)

    def kill(self, node_id: int) -> None:
        """SIGKILL (crash) one node."""
        self.nodes[node_id].kill()

    def stop(self, node_id: int) -> None:
        """SIGTERM (clean shutdown) one node; SIGKILL after the stop timeout."""
        self.nodes[node_id].stop()

    def start_node(self, node_id: int) -> None:
        """Start a stopped or killed node again on the same port and data; returns once it listens."""
        node = self.nodes[node_id]
        node.start()
        node.wait_listening()

    def pause(self, node_id: int) -> None:
        self.nodes[node_id].pause()

    def resume(self, node_id: int) -> None:
        self.nodes[node_id].resume()

    def close(self) -> None:
        """Stop the broker-only nodes (together, so their controlled shutdowns overlap), then the
        voters (together too: a combined voter stopping alone after the others would wait for a
        quorum that is gone)."""
        stop_together([n for n in self.nodes.values() if "controller" not in n.roles])
        stop_together([n for n in self.nodes.values() if "controller" in n.roles])

    def metadata(self, node_id: int, topics: list[str], timeout: float = 2.0) -> Any:
        """A Metadata v12 request to one broker; raises ``OSError`` when it does not answer in time."""
        node = self.nodes[node_id]
        return metadata(node.host, node.port, topics, timeout)

    def __enter__(self) -> Cluster:
        try:
            self.start()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class KafkaCluster(Cluster):
    """Kafka 4.3.1 JVMs; every node's storage is formatted with one cluster id first."""

    name = "kafka"

    def make_node(self, workdir: Path, node_id: int, host: str, port: int, settings: dict[str, str]) -> ClusterNode:
        return KafkaNode(workdir, node_id, host, port, settings)

    def start(self) -> None:
        id_file = self.workdir / "cluster.id"
        if not id_file.exists():
            id_file.write_text(random_cluster_id())
        cluster_id = id_file.read_text().strip()
        with ThreadPoolExecutor(len(self.nodes)) as pool:  # one StorageTool JVM per node, side by side
            for formatted in [pool.submit(node.format_storage, cluster_id) for node in self.nodes.values()]:
                formatted.result()
        super().start()


class StockKafkaCluster(KafkaCluster):
    """Kafka 4.3.1 nodes with the JVM settings of Kafka's start scripts (``compat.targets.KAFKA_STOCK_JVM``):
    what the benchmarks compare against."""

    def make_node(self, workdir: Path, node_id: int, host: str, port: int, settings: dict[str, str]) -> ClusterNode:
        node = KafkaNode(workdir, node_id, host, port, settings)
        node.heap = stock_jvm(node.workdir)
        return node


class KbrokerCluster(Cluster):
    """kbroker processes (cluster mode, because ``controller.quorum.voters`` is set)."""

    name = "kbroker"

    def make_node(self, workdir: Path, node_id: int, host: str, port: int, settings: dict[str, str]) -> ClusterNode:
        return KbrokerNode(workdir, node_id, host, port, settings)


def topology_roles(topology: str, controllers: int) -> dict[int, str]:
    """Each node's ``process.roles`` in ``topology`` (``controllers``: voters of ``isolated`` only)."""
    combined = dict.fromkeys(BROKER_HOSTS, "broker,controller")
    if topology == "combined":
        return combined
    if topology == "mixed":
        return {**combined, **dict.fromkeys(MIXED_BROKER_HOSTS, "broker")}
    if topology != "isolated":
        raise ValueError(f"unknown topology {topology!r}: one of {', '.join(TOPOLOGIES)}")
    voters = sorted(CONTROLLER_HOSTS)[:controllers]
    return {**dict.fromkeys(voters, "controller"), **dict.fromkeys(BROKER_HOSTS, "broker")}


def listener_names(roles: str) -> list[str]:
    """The listeners a node of ``roles`` opens: PLAINTEXT for a broker, CONTROLLER for a voter."""
    return [name for role, name in (("broker", "PLAINTEXT"), ("controller", "CONTROLLER")) if role in roles.split(",")]


def stop_together(nodes: list[ClusterNode]) -> None:
    """SIGTERM every running node of ``nodes`` at once and wait for them all."""
    threads = [threading.Thread(target=node.stop) for node in nodes if node.is_running()]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(STOP_TIMEOUT_S + 5)


def make_cluster(target: str, workdir: Path, extra: dict[str, str] | None = None, controllers: int = 1,
                 node_extra: dict[int, dict[str, str]] | None = None, topology: str = "isolated",
                 stock_jvm: bool = False) -> Cluster:
    """``KafkaCluster`` for "kafka", ``KbrokerCluster`` for "kbroker" (``node_extra``: settings of
    single nodes, e.g. ``broker.rack``; ``topology``: one of ``TOPOLOGIES``; ``stock_jvm``: Kafka
    nodes with its start scripts' JVM settings, ``StockKafkaCluster``, as benchmarks want)."""
    kinds: dict[str, type[Cluster]] = {"kafka": StockKafkaCluster if stock_jvm else KafkaCluster,
                                       "kbroker": KbrokerCluster}
    return kinds[target](workdir, extra, controllers, node_extra, topology)


# --- a raw Metadata request to one chosen broker ---------------------------------------------------

_correlation = iter(range(1, 1 << 30))


def metadata(host: str, port: int, topics: list[str], timeout: float) -> Any:
    """Metadata v12 from ``host:port`` (empty ``topics`` = brokers only); ``OSError`` on failure."""
    body = metadata_request.MetadataRequest(
        topics=tuple(metadata_request.MetadataRequestTopic(topic_id=None, name=t) for t in topics),
        allow_auto_topic_creation=False, include_topic_authorized_operations=False,
    )  # fmt: skip
    correlation_id = next(_correlation)
    buf = io.BytesIO()
    entity_writer(RequestHeader)(buf, RequestHeader(
        request_api_key=i16(3), request_api_version=i16(12), correlation_id=i32(correlation_id),
        client_id="kbroker-cluster-probe",
    ))  # fmt: skip
    entity_writer(metadata_request.MetadataRequest)(buf, body)
    frame = buf.getvalue()
    deadline = time.monotonic() + timeout
    with socket.create_connection((host, port), timeout=timeout) as sock:
        sock.sendall(struct.pack(">i", len(frame)) + frame)
        (size,) = struct.unpack(">i", _read_exact(sock, 4, deadline))
        reply = _read_exact(sock, size, deadline)
    if struct.unpack_from(">i", reply, 0)[0] != correlation_id:
        raise ConnectionError(f"{host}:{port} answered another correlation id")
    # Response header v1: correlation id then an (empty) tagged-field buffer.
    value, _ = entity_reader(metadata_response.MetadataResponse)(reply, 5)
    return value


def _read_exact(sock: socket.socket, n: int, deadline: float) -> bytes:
    out = bytearray()
    while len(out) < n:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError("metadata request timed out")
        sock.settimeout(remaining)
        chunk = sock.recv(n - len(out))
        if not chunk:
            raise ConnectionError("connection closed")
        out += chunk
    return bytes(out)
