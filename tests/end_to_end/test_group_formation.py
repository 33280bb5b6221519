"""Classic group formation with group.initial.rebalance.delay.ms, on Apache Kafka 4.3.1 and kbroker
started alike (issue 17 item 10).

Two librdkafka consumers (classic protocol, range) subscribe to a 4-partition topic, the second
one second after the first: it arrives inside the first one's initial delay (Kafka's default
3000 ms, which the compat suite's shared settings turn off), so the first generation holds both
and each member's first assignment is its final one, two partitions each. A member that got all
four alone first would show a second generation: a revocation, and a first assignment of four.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer
from confluent_kafka.admin import AdminClient, NewTopic

from compat.targets import KbrokerTarget, Target, kafka_target

SETTINGS = {"group.initial.rebalance.delay.ms": "3000"}
SECOND_MEMBER_AFTER_S = 1.0  # the scenario: the second consumer starts while the first one's join is parked
DEADLINE_S = 60.0


@pytest.fixture(params=["kafka", "kbroker"])
def target(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Target]:
    workdir = tmp_path / request.param
    workdir.mkdir()
    started = kafka_target(workdir, SETTINGS) if request.param == "kafka" else KbrokerTarget(workdir, extra=SETTINGS)
    started.start()
    try:
        yield started
    finally:
        started.close()


class Member:
    """One consumer polling in its own thread, recording every assignment and revocation."""

    def __init__(self, bootstrap: str, topic: str, group: str) -> None:
        self.events: list[tuple[str, list[int]]] = []
        self.consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                                  "partition.assignment.strategy": "range", "session.timeout.ms": 6000,
                                  "heartbeat.interval.ms": 500})  # fmt: skip
        self.consumer.subscribe([topic], on_assign=self._on("assign"), on_revoke=self._on("revoke"))
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._poll, daemon=True)
        self.thread.start()

    def _on(self, kind: str) -> Any:
        def record(_consumer: Any, partitions: list[Any]) -> None:
            self.events.append((kind, sorted(p.partition for p in partitions)))
        return record

    def _poll(self) -> None:
        while not self.stop.is_set():
            self.consumer.poll(0.1)

    def assigned(self) -> list[int]:
        return next((parts for kind, parts in reversed(self.events) if kind == "assign"), [])

    def close(self) -> None:
        self.stop.set()
        self.thread.join(10)
        self.consumer.close()


def test_a_member_arriving_within_the_initial_delay_joins_the_first_generation(target: Target) -> None:
    admin = AdminClient({"bootstrap.servers": target.bootstrap})
    admin.create_topics([NewTopic("formation", 4, 1)])["formation"].result(30)
    first = Member(target.bootstrap, "formation", "formation-group")
    members = [first]
    try:
        time.sleep(SECOND_MEMBER_AFTER_S)  # the scenario's start offset, not a wait for a result
        members.append(Member(target.bootstrap, "formation", "formation-group"))
        deadline = time.monotonic() + DEADLINE_S
        while sorted(p for m in members for p in m.assigned()) != [0, 1, 2, 3]:
            assert time.monotonic() < deadline, f"no complete assignment: {[m.events for m in members]}"
            time.sleep(0.05)
        events = [list(m.events) for m in members]  # before close() revokes
    finally:
        for m in members:
            m.close()
    print(f"{target.name}: {events}")
    assert [len(e[0][1]) for e in events] == [2, 2] and all(e[0][0] == "assign" for e in events)
    assert all(kind == "assign" for e in events for kind, _ in e)  # one generation: nothing revoked
