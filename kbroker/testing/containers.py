"""kbroker's container image under testcontainers-python: ``KbrokerContainer`` (one node) and
``KbrokerCluster`` (a controller and N brokers).

A client is sent to the address a broker advertises, so the advertised port must be the one the
host sees. The container therefore listens on the same port number it is published on (a port
free on this host, chosen before start), advertised as ``<docker host>:<port>``. Start returns
once the node is ready for clients (:class:`KbrokerReady`: ApiVersions, then Metadata listing
the node as a broker with a known controller), not when the port opens.

In a cluster every node joins the controller container's network namespace (as containers of
one pod), which publishes the brokers' ports: ``localhost:<port>`` then reaches a broker both
from the other nodes and from the host, which one advertised listener per broker needs.

Needs ``pip install testcontainers`` and an image built from the repository's Dockerfile
(``docker build -t kbroker:<version> .``).
"""

from __future__ import annotations

from typing import Any

from testcontainers.core.container import DockerContainer
from testcontainers.core.waiting_utils import WaitStrategy, WaitStrategyTarget

from kbroker.container.healthcheck import NotReady, Probe, check_ready
from kbroker.testing.ports import free_port

DEFAULT_IMAGE = "kbroker:0.1.0"
CONTROLLER_ID = 100


class KbrokerReady(WaitStrategy):
    """Wait until the node answers as ready for clients (:func:`kbroker.container.healthcheck.check_ready`)."""

    def __init__(self, probe: Probe) -> None:
        super().__init__()
        self.probe = probe
        self._poll_interval = 0.05
        self.last_answer = ""

    def wait_until_ready(self, container: WaitStrategyTarget) -> None:
        def ready() -> bool:
            container.reload()
            if container.status not in ("created", "running"):
                raise RuntimeError(f"container is {container.status}:\n{container.get_logs()[0].decode()[-3000:]}")
            try:
                self.last_answer = check_ready(self.probe)
                return True
            except NotReady as exc:
                self.last_answer = str(exc)
                return False

        if not self._poll(ready):
            raise TimeoutError(f"kbroker not ready within {self._startup_timeout:.0f} s: {self.last_answer}")


class KbrokerContainer(DockerContainer):
    """One kbroker node: a single node by default, or any role through ``KAFKA_*`` settings.

    ``settings`` are broker keys (``{"num.partitions": 3}``), passed as the image's ``KAFKA_*``
    variables; ``port`` is the published (and listening) client port, free by default. A node of
    a :class:`KbrokerCluster` is neither published (``publish``) nor waited for on its own (``wait``).
    """

    def __init__(self, image: str = DEFAULT_IMAGE, settings: dict[str, Any] | None = None, port: int | None = None,
                 node_id: int = 1, *, publish: bool = True, wait: bool = True, **kwargs: Any) -> None:
        super().__init__(image, **kwargs)
        self.node_id = node_id
        self.port = port or free_port("0.0.0.0")
        self.host = self.get_docker_client().host()
        env = {"node.id": node_id, "advertised.listeners": f"PLAINTEXT://{self.host}:{self.port}", **(settings or {})}
        for key, value in env.items():
            self.with_env(kafka_variable(key), str(value).lower() if isinstance(value, bool) else str(value))
        self.ready = KbrokerReady(Probe(self.host, self.port, "broker", node_id))
        if publish:
            publish_port(self, self.port)
        if wait:
            self.waiting_for(self.ready)

    @property
    def bootstrap_servers(self) -> str:
        return f"{self.host}:{self.port}"

    def get_bootstrap_server(self) -> str:
        """The name testcontainers' own KafkaContainer uses for the same thing."""
        return self.bootstrap_servers


def publish_port(container: DockerContainer, port: int) -> None:
    """Publish ``port`` as the same port on the host: on loopback only when the engine is local."""
    host = container.get_docker_client().host()
    container.ports[f"{port}/tcp"] = ("127.0.0.1", port) if host in ("localhost", "127.0.0.1") else port


def kafka_variable(key: str) -> str:
    """The image's variable for a broker key: ``log.retention.ms`` -> ``KAFKA_LOG_RETENTION_MS``
    (``_`` in a key -> ``__``, ``-`` -> ``___``, as the image reads them back)."""
    return "KAFKA_" + key.replace("_", "__").replace("-", "___").replace(".", "_").upper()


class KbrokerCluster:
    """A controller container and ``brokers`` broker containers sharing the controller's network
    namespace; ``bootstrap_servers`` lists every broker. Use as a context manager."""

    def __init__(self, brokers: int = 3, image: str = DEFAULT_IMAGE, settings: dict[str, Any] | None = None,
                 controller_port: int = 9093, **kwargs: Any) -> None:
        replicas, min_isr = min(3, brokers), min(2, brokers)
        common = {
            "controller.quorum.voters": f"{CONTROLLER_ID}@localhost:{controller_port}",
            "default.replication.factor": replicas, "min.insync.replicas": min_isr,
            "offsets.topic.replication.factor": replicas, "transaction.state.log.replication.factor": replicas,
            "transaction.state.log.min.isr": min_isr, "broker.heartbeat.interval.ms": 500,
            "broker.session.timeout.ms": 2000, **(settings or {}),
        }
        self.controller = DockerContainer(image, **kwargs)
        for key, value in {**common, "node.id": CONTROLLER_ID, "process.roles": "controller"}.items():
            self.controller.with_env(kafka_variable(key), str(value))
        self.brokers: list[KbrokerContainer] = []
        for node_id in range(1, brokers + 1):
            port = free_port("0.0.0.0")
            publish_port(self.controller, port)
            # Published by the controller, whose network namespace it joins; there the image's
            # HTTP port (8080) is the controller's, so a broker serves HTTP on a port of its own.
            http = {"kbroker.http.listeners": f"http://0.0.0.0:{free_port()}"}
            self.brokers.append(KbrokerContainer(image, {**common, **http, "process.roles": "broker"}, port, node_id,
                                                 publish=False, wait=False, **kwargs))

    @property
    def bootstrap_servers(self) -> str:
        return ",".join(b.bootstrap_servers for b in self.brokers)

    def start(self) -> KbrokerCluster:
        self.controller.start()
        namespace = f"container:{self.controller.get_wrapped_container().id}"
        for broker in self.brokers:  # all start first, then each is waited for
            broker.with_kwargs(network_mode=namespace)
            broker.start()
        for broker in self.brokers:
            broker.ready.wait_until_ready(broker)
        return self

    def stop(self) -> None:
        for broker in self.brokers:
            broker.stop()
        self.controller.stop()

    def __enter__(self) -> KbrokerCluster:
        try:
            return self.start()
        except BaseException:
            self.stop()
            raise

    def __exit__(self, *exc: object) -> None:
        self.stop()

