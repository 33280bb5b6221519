"""Apache Kafka 4.3.1 and kbroker, each a single node started from the secured settings.

``secured_target("kafka" | "kbroker", workdir, certs)`` builds the target of ``compat.targets``
(``KafkaTarget`` from the Maven jars, ``KbrokerTarget``) and rewrites its ``server.properties``
with the listeners of ``compat.security.broker_config``; ``SecuredTarget.address(listener)``
says where a listener is. The target's own port stays its PLAINTEXT listener, so waiting for
start-up and the set-up harness work unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from compat.security.broker_config import HOST, LISTENERS, secured_settings
from compat.security.certificates import Certificates
from compat.targets import KafkaTarget, KbrokerTarget, ProcessTarget, free_port, server_properties


@dataclass
class SecuredTarget:
    """A target and the port of each of its listeners."""

    target: ProcessTarget
    ports: dict[str, int]

    def address(self, listener: str) -> str:
        return f"{HOST}:{self.ports[listener]}"


def secured_target(kind: str, workdir: Path, certs: Certificates, extra: dict[str, str] | None = None) -> SecuredTarget:
    """An unstarted secured node of ``kind`` ("kafka" or "kbroker"); ``extra`` goes on top."""
    target: ProcessTarget
    if kind == "kafka":
        kafka = KafkaTarget(workdir)
        target, controller_port = kafka, kafka.controller_port
    else:
        target, controller_port = KbrokerTarget(workdir), free_port()
    ports = {name: target.port if name == "PLAINTEXT" else free_port() for name in LISTENERS}
    settings = {**secured_settings(ports, controller_port, certs), **(extra or {})}
    data_dir = str(workdir / "data")
    properties = workdir / "server.properties"
    properties.write_text(server_properties(target.port, controller_port, data_dir, settings))
    return SecuredTarget(target, ports)
