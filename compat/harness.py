"""Set-up and observation helpers a scenario uses around the client under test.

``Harness`` is the confluent-kafka adapter plus waiting: it creates topics and waits until
the target's metadata shows them with a leader (Kafka applies metadata asynchronously, so a
client's first request right after CreateTopics could otherwise see UNKNOWN_TOPIC), produces
set-up records, and polls conditions with a bounded deadline. It is the same code on both
targets, so anything it does is part of what is compared.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from compat.clients.base import Rec
from compat.clients.confluent import ConfluentClient

T = TypeVar("T")
POLL_S = 0.05


class HarnessError(RuntimeError):
    """Set-up failed on a target (the scenario cannot run there)."""


def wait_until(probe: Callable[[], T], done: Callable[[T], bool], timeout_s: float) -> tuple[bool, T]:
    """Call ``probe`` until ``done(value)`` or the deadline; return (met, last value)."""
    deadline = time.monotonic() + timeout_s
    value = probe()
    while not done(value):
        if time.monotonic() >= deadline:
            return False, value
        time.sleep(POLL_S)
        value = probe()
    return True, value


class Harness(ConfluentClient):
    name = "harness"

    def __init__(self, bootstrap: str, workdir: Path) -> None:
        super().__init__(bootstrap, workdir)

    def cluster_id(self) -> str:
        return str(self.describe_cluster()["cluster_id"])

    def partition_leaders(self, topic: str) -> dict[int, int] | None:
        """{partition: leader} from a fresh metadata request, None if the topic is not there."""
        md = self.admin.list_topics(topic=topic, timeout=10)
        t = md.topics.get(topic)
        if t is None or t.error is not None:
            return None
        return {p: pm.leader for p, pm in t.partitions.items() if pm.error is None}

    def wait_topic(self, topic: str, partitions: int, timeout_s: float = 15.0) -> None:
        """Wait until metadata shows the topic with a leader for each partition and the leader
        answers ListOffsets for each (Kafka's broker becomes leader shortly after the
        controller says so, and bumps leader epochs after a restart)."""
        ok, leaders = wait_until(
            lambda: self.partition_leaders(topic),
            lambda got: got is not None and len(got) == partitions and all(v >= 0 for v in got.values()),
            timeout_s,
        )  # fmt: skip
        if not ok:
            raise HarnessError(f"topic {topic} not ready with {partitions} partitions: {leaders}")
        for p in range(partitions):
            self.offsets(topic, p, timeout_s)

    def wait_topic_gone(self, topic: str, timeout_s: float = 15.0) -> bool:
        return wait_until(lambda: self.partition_leaders(topic), lambda got: got is None, timeout_s)[0]

    def wait_config(self, topic: str, expected: dict[str, str], timeout_s: float = 10.0) -> bool:
        """Wait (bounded) until the target describes ``topic``'s keys with the ``expected``
        values: Kafka's broker applies a config change shortly after the controller accepted
        it. Returns whether it happened; the scenario then observes whatever is there."""

        def probe() -> Any:
            described = self.describe_configs("topic", topic, keys=sorted(expected))
            return {k: v.get("value") for k, v in described.items()} if "error" not in described else described

        return wait_until(probe, lambda got: got == expected, timeout_s)[0]

    def create(self, topic: str, partitions: int = 1, configs: dict[str, str] | None = None) -> str:
        result = self.create_topic(topic, partitions, 1, configs or {})
        if result is not None:
            raise HarnessError(f"creating {topic}: {result}")
        self.wait_topic(topic, partitions)
        return topic

    def put(self, topic: str, records: list[Rec], **kwargs: Any) -> list[int]:
        offsets = self.produce(topic, records, **kwargs)
        if not all(isinstance(o, int) and o >= 0 for o in offsets):
            raise HarnessError(f"set-up produce to {topic} failed: {offsets}")
        return offsets

    def wait_offsets(self, topic: str, partition: int, latest: int, timeout_s: float = 15.0) -> None:
        """Wait until the partition's latest offset (high watermark) reaches ``latest``."""
        ok, got = wait_until(lambda: self.offsets(topic, partition), lambda o: o[1] >= latest, timeout_s)
        if not ok:
            raise HarnessError(f"{topic}-{partition} offsets stayed {got}; waited for latest {latest}")

    def offsets(self, topic: str, partition: int = 0, timeout_s: float = 15.0) -> tuple[int, int]:
        """(earliest, latest) as the target reports them now; a retriable error (a leader that
        is not ready yet, an epoch the client has not seen) is retried until the deadline."""

        def probe() -> Any:
            return self.list_offsets(topic, partition, "earliest"), self.list_offsets(topic, partition, "latest")

        ok, (earliest, latest) = wait_until(probe, lambda o: "error" not in o[0] and "error" not in o[1], timeout_s)
        if not ok:
            raise HarnessError(f"list offsets {topic}-{partition}: {earliest} {latest}")
        return int(earliest["offset"]), int(latest["offset"])
