"""The two kinds of cluster a compat scenario runs against, behind one interface.

``KafkaTarget`` is a real Apache Kafka 4.3.1 node (KRaft, broker+controller in one JVM) run
from the jars ``compat.deps`` resolves from Maven Central: the storage directory is
formatted with ``kafka.tools.StorageTool format`` and the node is started with
``java -cp <libs>/* kafka.Kafka server.properties``. ``DockerKafkaTarget`` runs the same
broker from the ``apache/kafka`` image through testcontainers, and is chosen automatically
when a Docker engine answers (``COMPAT_KAFKA=maven|docker`` forces one); CI has no Docker and
uses the Maven path, and ``tests/containers`` runs this one against a local image with the same
layout built from the Maven jars (``compat.container_images``) under podman. ``KbrokerTarget``
runs ``python -m kbroker serve`` with the same ``server.properties`` (kbroker accepts Kafka's
keys and lists the ones it does not act on); only ports and directories differ.

Every target has ``start()``, ``stop()`` (SIGTERM, clean), ``kill()`` (SIGKILL, crash),
``restart()`` (start again on the same port and data), ``close()`` and ``bootstrap``
("127.0.0.1:port"). Both listen on loopback only. The benchmark harness reuses these classes.
"""

from __future__ import annotations

import base64
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from compat.deps import kafka_classpath
from kbroker.testing.ports import free_port

HOST = "127.0.0.1"
NODE_ID = 1
KAFKA_IMAGE = "apache/kafka:4.3.1"
START_TIMEOUT_S = 90.0
STOP_TIMEOUT_S = 30.0

# Broker settings both targets run with (same file, only ports and directories differ).
# auto-creation is off so a scenario touching a missing topic sees the error, not a new topic;
# a short retention check interval lets retention scenarios finish in seconds.
SHARED_SETTINGS: dict[str, str] = {
    "num.partitions": "1",
    "default.replication.factor": "1",
    "auto.create.topics.enable": "false",
    "log.retention.check.interval.ms": "250",
    "log.cleaner.backoff.ms": "100",  # compaction scenarios wait for the cleaner, not 15 s
    "offsets.topic.replication.factor": "1",
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
    "share.coordinator.state.topic.replication.factor": "1",
    "share.coordinator.state.topic.min.isr": "1",
    "group.initial.rebalance.delay.ms": "0",
    # After a crash Kafka's controller refuses the restarted broker's registration until the
    # old session expires (9 s by default); shorter sessions make crash restarts quick.
    "broker.session.timeout.ms": "2000",
    "broker.heartbeat.interval.ms": "500",
    # Kafka's LogManager starts its periodic tasks (retention checks among them) this long
    # (30 s) after start-up; kbroker checks retention from the start and accepts the key (an
    # internal one of Kafka's, which both then describe) without acting on it.
    "log.initial.task.delay.ms": "0",
}

# Settings only Kafka gets (none now; the hook stays for knobs kbroker would refuse).
KAFKA_ONLY_SETTINGS: dict[str, str] = {}

KAFKA_JVM_FLAGS = ["-Xms256m", "-Xmx1g", "-XX:+UseG1GC", "-Djava.awt.headless=true"]

# What Kafka 4.3.1's bin/kafka-server-start.sh (KAFKA_HEAP_OPTS, -loggc) and kafka-run-class.sh
# (KAFKA_JVM_PERFORMANCE_OPTS, KAFKA_JMX_OPTS) start kafka.Kafka with when none is set: the
# benchmarks run every Kafka node so ("stock JVM"), tests keep the lighter flags above.
KAFKA_STOCK_JVM = [
    "-Xmx1G", "-Xms1G",
    "-server", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20", "-XX:InitiatingHeapOccupancyPercent=35",
    "-XX:+ExplicitGCInvokesConcurrent", "-XX:MaxInlineLevel=15", "-Djava.awt.headless=true",
    "-Dcom.sun.management.jmxremote", "-Dcom.sun.management.jmxremote.authenticate=false",
    "-Dcom.sun.management.jmxremote.ssl=false",
]  # fmt: skip


def stock_jvm(log_dir: Path) -> list[str]:
    """``KAFKA_STOCK_JVM`` plus the GC log kafka-server-start.sh asks for, written into ``log_dir``."""
    return [*KAFKA_STOCK_JVM, f"-Xlog:gc*:file={log_dir / 'kafkaServer-gc.log'}:time,tags:filecount=10,filesize=100M"]

LOG4J2_FILE_CONFIG = """\
status = error
name = compat
appender.file.type = File
appender.file.name = FILE
appender.file.fileName = {log}
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = {level}
rootLogger.appenderRef.file.ref = FILE
"""


def server_properties(port: int, controller_port: int, log_dir: str, extra: dict[str, str] | None = None) -> str:
    """The ``server.properties`` text both targets start from (plus ``extra``)."""
    settings = {
        "process.roles": "broker,controller",
        "node.id": str(NODE_ID),
        "controller.quorum.voters": f"{NODE_ID}@{HOST}:{controller_port}",
        "listeners": f"PLAINTEXT://{HOST}:{port},CONTROLLER://{HOST}:{controller_port}",
        "advertised.listeners": f"PLAINTEXT://{HOST}:{port}",
        "controller.listener.names": "CONTROLLER",
        "inter.broker.listener.name": "PLAINTEXT",
        "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
        "log.dirs": log_dir,
        **SHARED_SETTINGS,
        **(extra or {}),
    }
    return "".join(f"{k}={v}\n" for k, v in settings.items())


def wait_for_port(
    port: int, alive: Callable[[], bool], timeout: float, what: str, log: Path, host: str = HOST
) -> None:
    """Return once ``host:port`` accepts connections; raise if the process dies or time runs out."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not alive():
            raise RuntimeError(f"{what} exited during start-up; see {log}:\n{tail(log)}")
        try:
            with socket.create_connection((host, port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"{what} did not listen on {host}:{port} within {timeout:.0f} s; see {log}")


def tail(path: Path, chars: int = 3000) -> str:
    try:
        return path.read_text(errors="replace")[-chars:]
    except OSError:
        return ""


class Target:
    """One single-node cluster. Subclasses implement the process handling."""

    name = "target"

    def __init__(self, workdir: Path, host: str = HOST, port: int | None = None) -> None:
        self.workdir = Path(workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.host = host
        self.port = port or free_port(host)

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    def start(self) -> None:
        raise NotImplementedError

    def stop(self) -> None:
        raise NotImplementedError

    def kill(self) -> None:
        raise NotImplementedError

    def is_running(self) -> bool:
        raise NotImplementedError

    def restart(self, *, crash: bool = False) -> None:
        """Stop (SIGKILL when ``crash``, else SIGTERM) and start again on the same port and data."""
        if self.is_running():
            self.kill() if crash else self.stop()
        self.start()

    def close(self) -> None:
        if self.is_running():
            self.stop()

    def __enter__(self) -> Target:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class ProcessTarget(Target):
    """A target that is one local process: SIGTERM to stop (SIGKILL after the stop timeout),
    SIGKILL to crash. Subclasses start ``self.proc``."""

    def __init__(self, workdir: Path, host: str = HOST, port: int | None = None) -> None:
        super().__init__(workdir, host, port)
        self.proc: subprocess.Popen[bytes] | None = None

    def is_running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.proc = None

    def kill(self) -> None:
        assert self.proc is not None
        self.proc.kill()
        self.proc.wait()
        self.proc = None


class KafkaTarget(ProcessTarget):
    """Apache Kafka 4.3.1 from the Maven jars: ``StorageTool format`` then ``kafka.Kafka``."""

    name = "kafka"

    def __init__(self, workdir: Path, log_level: str = "INFO", extra: dict[str, str] | None = None,
                 stock: bool = False) -> None:
        super().__init__(workdir)
        self.jvm = stock_jvm(self.workdir) if stock else KAFKA_JVM_FLAGS  # stock: the benchmarks'
        self.controller_port = free_port()
        self.data_dir = self.workdir / "data"
        self.properties = self.workdir / "server.properties"
        self.log4j = self.workdir / "log4j2.properties"
        self.log = self.workdir / "server.log"
        self.stdout_log = self.workdir / "stdout.log"
        self.java = shutil.which("java") or "java"
        self.classpath = kafka_classpath()
        settings = {**KAFKA_ONLY_SETTINGS, **(extra or {})}
        self.properties.write_text(server_properties(self.port, self.controller_port, str(self.data_dir), settings))
        self.log4j.write_text(LOG4J2_FILE_CONFIG.format(log=self.log, level=log_level))

    def _java(self, *args: str, heap: list[str] | None = None) -> list[str]:
        return [
            self.java, *(heap or ["-Xmx256m", "-XX:TieredStopAtLevel=1"]),
            f"-Dlog4j2.configurationFile={self.log4j}", "-cp", self.classpath, *args,
        ]  # fmt: skip

    def format_storage(self) -> None:
        """Format ``data/`` with a fresh cluster id (once; a formatted directory is kept)."""
        if (self.data_dir / "meta.properties").exists():
            return
        subprocess.run(
            self._java("kafka.tools.StorageTool", "format", "-t", random_cluster_id(), "-c", str(self.properties)),
            capture_output=True, text=True, check=True, timeout=60,
        )  # fmt: skip

    def start(self) -> None:
        self.format_storage()
        with open(self.stdout_log, "ab") as out:
            self.proc = subprocess.Popen(
                self._java("kafka.Kafka", str(self.properties), heap=self.jvm),
                stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            )  # fmt: skip
        proc = self.proc
        wait_for_port(self.port, lambda: proc.poll() is None, START_TIMEOUT_S, "kafka", self.log)


def random_cluster_id() -> str:
    """What ``kafka-storage random-uuid`` prints, without starting a JVM for it: a random (version
    4) UUID in URL-safe base64 without padding, never starting with "-" (Kafka avoids those, a
    command line would take them for an option)."""
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
        if not text.startswith("-"):
            return text


class KbrokerTarget(ProcessTarget):
    """kbroker: ``python -m kbroker serve --config server.properties`` (same file as Kafka's)."""

    name = "kbroker"

    def __init__(self, workdir: Path, python: str = sys.executable, extra: dict[str, str] | None = None) -> None:
        super().__init__(workdir)
        self.data_dir = self.workdir / "data"
        self.properties = self.workdir / "server.properties"
        self.log = self.workdir / "kbroker.log"
        self.python = python
        self.properties.write_text(server_properties(self.port, free_port(), str(self.data_dir), extra))

    def start(self) -> None:
        with open(self.log, "ab") as out:
            self.proc = subprocess.Popen(
                [self.python, "-m", "kbroker", "serve", "--config", str(self.properties)],
                stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            )  # fmt: skip
        proc = self.proc
        wait_for_port(self.port, lambda: proc.poll() is None, START_TIMEOUT_S, "kbroker", self.log)


class DockerKafkaTarget(Target):
    """The same Kafka 4.3.1 from the ``apache/kafka`` image via testcontainers (needs Docker).

    The container gets the same ``server.properties`` (mounted), with the listener on a fixed
    loopback port mapped 1:1, so a restarted container keeps its address and its data.
    """

    name = "kafka"

    def __init__(self, workdir: Path, extra: dict[str, str] | None = None, image: str | None = None,
                 docker_client_kw: dict[str, Any] | None = None) -> None:
        super().__init__(workdir)
        self.controller_port = free_port()
        self.properties = self.workdir / "server.properties"
        self.log = self.workdir / "container.log"
        # COMPAT_KAFKA_IMAGE: an image with the apache/kafka layout built elsewhere, e.g. the one
        # compat.container_images makes from the Maven jars where no registry is reachable.
        self.image = image or os.environ.get("COMPAT_KAFKA_IMAGE", KAFKA_IMAGE)
        self.docker_client_kw = docker_client_kw
        self.cluster_id = random_cluster_id()
        settings = {**KAFKA_ONLY_SETTINGS, **(extra or {})}
        self.properties.write_text(
            server_properties(self.port, self.controller_port, "/tmp/kraft-combined-logs", settings)
            .replace(f"{HOST}:{self.controller_port}", f"localhost:{self.controller_port}")
            .replace(f"PLAINTEXT://{HOST}:{self.port},", f"PLAINTEXT://0.0.0.0:{self.port},")
        )
        self.container = None  # testcontainers.core.container.DockerContainer

    def start(self) -> None:
        if self.container is None:
            from testcontainers.core.container import DockerContainer  # optional dependency

            container = DockerContainer(self.image, docker_client_kw=self.docker_client_kw)
            container.ports[f"{self.port}/tcp"] = (HOST, self.port)  # published on loopback only
            container.with_volume_mapping(str(self.properties), "/mnt/shared/config/server.properties")
            # One cluster id for the container's life: a restart formats again with it, which
            # --ignore-formatted accepts (a new id is refused: "Invalid cluster.id").
            container.with_command(
                f"bash -c '/opt/kafka/bin/kafka-storage.sh format -t {self.cluster_id} "
                "-c /mnt/shared/config/server.properties --ignore-formatted && "
                "exec /opt/kafka/bin/kafka-server-start.sh /mnt/shared/config/server.properties'"
            )
            self.container = container.start()
        else:
            self.container.get_wrapped_container().start()
        wait_for_port(self.port, self.is_running, START_TIMEOUT_S, "kafka (docker)", self.log)

    def is_running(self) -> bool:
        if self.container is None:
            return False
        wrapped = self.container.get_wrapped_container()
        wrapped.reload()
        return wrapped.status == "running"

    def stop(self) -> None:
        self.container.get_wrapped_container().stop(timeout=int(STOP_TIMEOUT_S))

    def kill(self) -> None:
        self.container.get_wrapped_container().kill()

    def close(self) -> None:
        if self.container is not None:
            self.log.write_bytes(self.container.get_wrapped_container().logs())
            self.container.stop()
            self.container = None


def docker_available() -> bool:
    """True when a Docker engine answers and testcontainers is importable."""
    if shutil.which("docker") is None:
        return False
    try:
        import testcontainers  # noqa: F401
    except ImportError:
        return False
    try:
        return subprocess.run(["docker", "info"], capture_output=True, timeout=20).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def kafka_target(workdir: Path, extra: dict[str, str] | None = None) -> Target:
    """The real-Kafka target for this machine: ``COMPAT_KAFKA`` (maven/docker) or automatic;
    ``extra`` settings go on top of the shared ones."""
    choice = os.environ.get("COMPAT_KAFKA", "auto")
    if choice == "docker" or (choice == "auto" and docker_available()):
        return DockerKafkaTarget(workdir, extra)
    return KafkaTarget(workdir, extra=extra)
