"""One consumer-group member per client library (confluent-kafka, kafka-python, aiokafka), each
in its own thread (or, run as ``python -m tests.end_to_end.group_members``, its own process, so
a test can kill it with SIGKILL). A member consumes, records what it read, publishes its current
assignment, and commits or closes when the test asks; everything goes through the library's
public API."""

from __future__ import annotations

import asyncio
import sys
import threading
import time
from typing import Any

KINDS = ("confluent", "kafka-python", "aiokafka")


class Member(threading.Thread):
    def __init__(self, kind: str, bootstrap: str, group: str, topic: str, *, session_ms: int = 2000,
                 instance: str | None = None, on_assign: Any = None) -> None:
        super().__init__(daemon=True, name=f"{kind}-member")
        self.kind, self.bootstrap, self.group, self.topic = kind, bootstrap, group, topic
        self.session_ms, self.instance, self.on_assign = session_ms, instance, on_assign
        self.assignment: frozenset[int] = frozenset()
        self.assignments_seen = 0
        self.consumed: list[tuple[int, int, bytes]] = []  # partition, offset, value
        self.committed: dict[int, int] | None = None
        self._commit = threading.Event()
        self._committed = threading.Event()
        self._stopping = threading.Event()
        self.error: BaseException | None = None

    # --- what the test calls --------------------------------------------------------------

    def commit(self, timeout: float = 20.0) -> dict[int, int]:
        """Commit the positions after everything consumed so far; returns them."""
        self._commit.set()
        assert self._committed.wait(timeout), f"{self.kind} member did not commit"
        self._committed.clear()
        assert self.committed is not None
        return self.committed

    def close(self, timeout: float = 30.0) -> None:
        self._stopping.set()
        self.join(timeout)
        assert not self.is_alive(), f"{self.kind} member did not close"
        if self.error is not None:
            raise self.error

    # --- the member -------------------------------------------------------------------------

    def _positions(self) -> dict[int, int]:
        positions: dict[int, int] = {}
        for partition, offset, _ in self.consumed:
            if partition in self.assignment:
                positions[partition] = max(positions.get(partition, 0), offset + 1)
        return positions

    def _publish(self, partitions: frozenset[int]) -> None:
        if partitions != self.assignment:
            self.assignment = partitions
            self.assignments_seen += 1

    def run(self) -> None:
        try:
            if self.kind == "confluent":
                self._run_confluent()
            elif self.kind == "kafka-python":
                self._run_kafka_python()
            else:
                asyncio.run(self._run_aiokafka())
        except BaseException as exc:  # surfaced by close()
            self.error = exc

    def _run_confluent(self) -> None:
        from confluent_kafka import Consumer, TopicPartition

        config = {"bootstrap.servers": self.bootstrap, "group.id": self.group, "auto.offset.reset": "earliest",
                  "enable.auto.commit": False, "session.timeout.ms": self.session_ms,
                  "heartbeat.interval.ms": max(self.session_ms // 10, 100), "max.poll.interval.ms": 20000}
        if self.instance:
            config["group.instance.id"] = self.instance
        consumer = Consumer(config)

        def assigned(_consumer: object, partitions: list[Any]) -> None:
            if self.on_assign is not None:
                self.on_assign(partitions)

        consumer.subscribe([self.topic], on_assign=assigned)
        while not self._stopping.is_set():
            message = consumer.poll(0.05)
            if message is not None and not message.error():
                self.consumed.append((message.partition(), message.offset(), message.value()))
            self._publish(frozenset(tp.partition for tp in consumer.assignment()))
            if self._commit.is_set():
                self._commit.clear()
                positions = self._positions()
                if positions:
                    consumer.commit(offsets=[TopicPartition(self.topic, p, o) for p, o in positions.items()],
                                    asynchronous=False)
                self.committed = positions
                self._committed.set()
        consumer.close()

    def _run_kafka_python(self) -> None:
        from kafka import KafkaConsumer, OffsetAndMetadata, TopicPartition

        consumer = KafkaConsumer(
            bootstrap_servers=self.bootstrap, group_id=self.group, auto_offset_reset="earliest",
            enable_auto_commit=False, session_timeout_ms=self.session_ms,
            heartbeat_interval_ms=max(self.session_ms // 10, 100), max_poll_interval_ms=20000,
            request_timeout_ms=max(30000, self.session_ms + 5000), group_instance_id=self.instance)
        # Learn the topic's partitions before joining, and after subscribing: the metadata update
        # then also gives the coordinator its metadata snapshot of the subscription. A leader
        # without the partitions assigns nothing and rejoins at once; one without the snapshot
        # assigns, then sees the snapshot change on its next metadata update and rejoins (as it
        # would against Kafka). Each extra rebalance is another chance for the race noted below,
        # and a test that closes a member at that moment closes it in mid-rebalance.
        consumer.subscribe([self.topic])
        assert consumer.partitions_for_topic(self.topic)
        while not self._stopping.is_set():
            # Not shorter: kafka-python 3.0.12 can lose a SyncGroup answer that lands just as a
            # short poll() times out (heartbeats then stay off and the member is expired).
            for tp, records in consumer.poll(timeout_ms=500).items():
                self.consumed += [(tp.partition, r.offset, r.value) for r in records]
            self._publish(frozenset(tp.partition for tp in consumer.assignment()))
            if self._commit.is_set():
                self._commit.clear()
                positions = self._positions()
                if positions:
                    consumer.commit({TopicPartition(self.topic, p): OffsetAndMetadata(o, "", -1)
                                     for p, o in positions.items()})
                self.committed = positions
                self._committed.set()
        consumer.close()

    async def _run_aiokafka(self) -> None:
        from aiokafka import AIOKafkaConsumer, TopicPartition

        consumer = AIOKafkaConsumer(
            self.topic, bootstrap_servers=self.bootstrap, group_id=self.group, auto_offset_reset="earliest",
            enable_auto_commit=False, session_timeout_ms=self.session_ms,
            heartbeat_interval_ms=max(self.session_ms // 10, 100), max_poll_interval_ms=20000,
            group_instance_id=self.instance)
        await consumer.start()
        try:
            while not self._stopping.is_set():
                for tp, records in (await consumer.getmany(timeout_ms=50)).items():
                    self.consumed += [(tp.partition, r.offset, r.value) for r in records]
                self._publish(frozenset(tp.partition for tp in consumer.assignment()))
                if self._commit.is_set():
                    self._commit.clear()
                    positions = self._positions()
                    if positions:
                        await consumer.commit({TopicPartition(self.topic, p): o for p, o in positions.items()})
                    self.committed = positions
                    self._committed.set()
        finally:
            await consumer.stop()


def main() -> None:
    """A member in its own process: prints its assignment whenever it changes, until killed."""
    kind, bootstrap, group, topic, session_ms = sys.argv[1:6]
    member = Member(kind, bootstrap, group, topic, session_ms=int(session_ms))
    member.start()
    shown: frozenset[int] | None = None
    while member.is_alive():
        if member.assignment != shown:
            shown = member.assignment
            print("assigned", " ".join(map(str, sorted(shown))), flush=True)
        time.sleep(0.02)


if __name__ == "__main__":
    main()
