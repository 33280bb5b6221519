"""The broker a Spark scenario runs against: Apache Kafka or kbroker, with a set-up harness."""

from __future__ import annotations

import uuid
from pathlib import Path

from compat.harness import Harness
from compat.targets import KbrokerTarget, Target, kafka_target


def start_target(kind: str, workdir: Path, extra: dict[str, str] | None = None) -> Target:
    """A started single-node Kafka (``kind="kafka"``) or kbroker with the compat settings."""
    target = kafka_target(workdir, extra) if kind == "kafka" else KbrokerTarget(workdir, extra=extra)
    target.start()
    return target


class SparkBroker:
    """The broker under test with its set-up harness (confluent-kafka: topics, records, admin)."""

    def __init__(self, target: Target, workdir: Path) -> None:
        self.target = target
        self.name = target.name
        self.workdir = workdir
        self.harness = Harness(target.bootstrap, workdir / "harness")

    @property
    def bootstrap(self) -> str:
        return self.target.bootstrap

    def topic(self, prefix: str, partitions: int = 1, configs: dict[str, str] | None = None) -> str:
        """Create a fresh topic (unique name) and wait until it has leaders."""
        name = f"{prefix}-{uuid.uuid4().hex[:8]}"
        self.harness.create(name, partitions, configs)
        return name

    def restart(self, *, crash: bool) -> None:
        """Stop (SIGKILL when ``crash``) and start again on the same port and data."""
        self.harness.close()
        self.target.restart(crash=crash)
        self.harness = Harness(self.target.bootstrap, self.workdir / "harness")

    def close(self) -> None:
        self.harness.close()
        self.target.close()
