"""KIP-848 consumer groups (``group.protocol=consumer``) with real clients against kbroker.

The Java consumer of Kafka 4.3.1 (tests/end_to_end/java/GroupConsumer.java, one JVM per
member, driven over stdin/stdout) and confluent-kafka 2.16 (librdkafka): 3 members over 6
partitions get disjoint complete assignments; closing a member hands its partitions to the
others; a member commits and a later member resumes with no gap and no duplicate; a
broker-side regex subscription picks up a topic created later; the admin client lists and
describes the group (ListGroups v5 type filter, ConsumerGroupDescribe) and deletes it once
Empty; a member keeps its epoch and partitions across kill -9 of the broker (the group's
records in ``__consumer_offsets`` are replayed).

Waiting is bounded polling of the members' own state (no fixed sleeps); the heartbeat interval
is lowered to 500 ms so a rebalance takes about a second. Rebalance times are printed
(``pytest -s`` shows them).
"""

from __future__ import annotations

import os
import pathlib
import queue
import subprocess
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer, ConsumerGroupState, ConsumerGroupType, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from compat.deps import kafka_classpath
from tests.broker_process import BrokerProcess

SOURCE = pathlib.Path(__file__).parent / "java" / "GroupConsumer.java"
JAVA = ["java", "-Xmx128m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1"]
DEADLINE_S = 40.0
CLIENTS = ["java", "confluent"]


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    data = tmp_path_factory.mktemp("cgbroker") / "data"
    proc = BrokerProcess(str(data), {"group.consumer.heartbeat.interval.ms": "500",
                                     "group.consumer.session.timeout.ms": "10000"})
    proc.start()
    yield proc
    proc.close()


@pytest.fixture(scope="module")
def java_classes(tmp_path_factory: pytest.TempPathFactory) -> str:
    classes = tmp_path_factory.mktemp("gcjava")
    done = subprocess.run(["javac", "-nowarn", "-d", str(classes), "-cp", kafka_classpath(), str(SOURCE)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    return str(classes)


class JavaMember:
    """A GroupConsumer JVM; a thread turns its stdout into assignment and records."""

    def __init__(self, classes: str, bootstrap: str, group: str, subscription: str) -> None:
        self.proc = subprocess.Popen(
            [*JAVA, "-cp", f"{classes}{os.pathsep}{kafka_classpath()}", "GroupConsumer", bootstrap, group,
             "consumer", subscription], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
            text=True, env={**os.environ, "KAFKA_LOG4J_OPTS": ""})
        self.assignment: set[tuple[str, int]] = set()
        self.records: list[tuple[str, int, int, str]] = []
        self.events: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            kind, _, rest = line.strip().partition(" ")
            if kind == "assignment":
                self.assignment = {(tp.rsplit("-", 1)[0], int(tp.rsplit("-", 1)[1])) for tp in rest.split(",") if tp}
            elif kind == "record":
                topic, partition, offset, value = rest.split(" ", 3)
                self.records.append((topic, int(partition), int(offset), value))
            else:
                self.events.put(kind)

    def pump(self) -> None:
        """The JVM polls on its own."""

    def _command(self, command: str, answer: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(command + "\n")
        self.proc.stdin.flush()
        deadline = time.monotonic() + DEADLINE_S
        while time.monotonic() < deadline:
            try:
                if self.events.get(timeout=0.2) == answer:
                    return
            except queue.Empty:
                continue
        raise AssertionError(f"no {answer!r} from the Java consumer")

    def commit(self) -> None:
        self._command("commit", "committed")

    def close(self) -> None:
        try:
            self._command("close", "closed")
        finally:
            self.proc.wait(timeout=30)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)


class ConfluentMember:
    """A confluent-kafka consumer, polled by the test's waiting loop."""

    def __init__(self, bootstrap: str, group: str, subscription: str) -> None:
        self.consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "group.protocol": "consumer",
                                  "auto.offset.reset": "earliest", "enable.auto.commit": False})
        topics = [subscription[7:]] if subscription.startswith("topics:") else ["^" + subscription[6:]]
        self.consumer.subscribe(topics)
        self.records: list[tuple[str, int, int, str]] = []
        self.closed = False

    @property
    def assignment(self) -> set[tuple[str, int]]:
        return {(tp.topic, tp.partition) for tp in self.consumer.assignment()}

    def pump(self) -> None:
        msg = self.consumer.poll(0.05)
        if msg is not None and msg.error() is None:
            self.records.append((msg.topic(), msg.partition(), msg.offset(), msg.value().decode()))

    def commit(self) -> None:
        self.consumer.commit(asynchronous=False)

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self.consumer.close()

    def kill(self) -> None:
        self.close()


def wait_until(members: list[Any], condition: Callable[[], bool], what: str) -> float:
    start = time.monotonic()
    while time.monotonic() - start < DEADLINE_S:
        for m in members:
            m.pump()
        if condition():
            return time.monotonic() - start
        time.sleep(0.01)  # only the JVMs are being waited for here; keeps the loop from spinning
    raise AssertionError(f"timed out waiting for {what}: {[sorted(m.assignment) for m in members]}")


@pytest.fixture
def members(broker: BrokerProcess, request: pytest.FixtureRequest) -> Iterator[Callable[..., Any]]:
    made: list[Any] = []

    def make(client: str, group: str, subscription: str) -> Any:
        if client == "java":
            member: Any = JavaMember(request.getfixturevalue("java_classes"), broker.bootstrap, group, subscription)
        else:
            member = ConfluentMember(broker.bootstrap, group, subscription)
        made.append(member)
        return member

    yield make
    for member in made:
        member.kill()


def create_topic(bootstrap: str, name: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(name, partitions, 1)]).values():
        future.result(timeout=15)


def produce(bootstrap: str, topic: str, values: list[str], partitions: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap})
    for i, value in enumerate(values):
        producer.produce(topic, value=value.encode(), partition=i % partitions)
    assert producer.flush(15) == 0


def balanced(members: list[Any], topic: str, partitions: int) -> Callable[[], bool]:
    def check() -> bool:
        assignments = [m.assignment for m in members]
        union = set().union(*assignments)
        disjoint = sum(len(a) for a in assignments) == len(union)
        sizes = [len(a) for a in assignments]
        return disjoint and union == {(topic, p) for p in range(partitions)} and max(sizes) - min(sizes) <= 1
    return check


@pytest.mark.parametrize("client", CLIENTS)
def test_three_members_split_six_partitions_and_a_closed_members_partitions_move(broker, members, client) -> None:
    topic, group = f"cg-split-{client}-{uuid.uuid4().hex[:6]}", f"g-split-{uuid.uuid4().hex[:6]}"
    create_topic(broker.bootstrap, topic, 6)
    group_members = [members(client, group, f"topics:{topic}") for _ in range(3)]
    joined = wait_until(group_members, balanced(group_members, topic, 6), "3 members over 6 partitions")
    assert [len(m.assignment) for m in group_members] == [2, 2, 2]

    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    listed = admin.list_consumer_groups(types={ConsumerGroupType.CONSUMER}).result(timeout=15)
    assert group in {g.group_id for g in listed.valid}
    described = admin.describe_consumer_groups([group])[group].result(timeout=15)
    assert described.type == ConsumerGroupType.CONSUMER and described.state == ConsumerGroupState.STABLE
    assert sorted(len(m.assignment.topic_partitions) for m in described.members) == [2, 2, 2]

    closing = time.monotonic()
    group_members[0].close()
    rest = group_members[1:]
    wait_until(rest, balanced(rest, topic, 6), "2 members over 6 partitions")
    moved = time.monotonic() - closing
    print(f"\n{client}: 3 members balanced {joined:.2f}s after they started; all 6 partitions with the other "
          f"two {moved:.2f}s after close() was called")


def test_killed_java_members_partitions_move_within_the_session_timeout(broker, members) -> None:
    """SIGKILL: no leave heartbeat; group.consumer.session.timeout.ms (10 s here) removes it."""
    topic, group = f"cg-kill-{uuid.uuid4().hex[:6]}", f"g-kill-{uuid.uuid4().hex[:6]}"
    create_topic(broker.bootstrap, topic, 6)
    group_members = [members("java", group, f"topics:{topic}") for _ in range(3)]
    wait_until(group_members, balanced(group_members, topic, 6), "3 members over 6 partitions")
    killed_at = time.monotonic()
    group_members[0].kill()
    rest = group_members[1:]
    wait_until(rest, balanced(rest, topic, 6), "2 members over 6 partitions")
    took = time.monotonic() - killed_at
    assert 9.0 < took < 10.0 + DEADLINE_S  # not before the session timeout
    print(f"\njava: a killed member's partitions moved {took:.2f}s after SIGKILL (session timeout 10 s)")


@pytest.mark.parametrize("client", CLIENTS)
def test_commit_then_resume_without_gap_or_duplicate(broker, members, client) -> None:
    topic, group = f"cg-resume-{client}-{uuid.uuid4().hex[:6]}", f"g-resume-{uuid.uuid4().hex[:6]}"
    create_topic(broker.bootstrap, topic, 3)
    first = [f"a{i}" for i in range(30)]
    produce(broker.bootstrap, topic, first, 3)
    member = members(client, group, f"topics:{topic}")
    wait_until([member], lambda: len(member.records) >= 30, "the first 30 records")
    assert sorted(r[3] for r in member.records) == sorted(first)
    member.commit()
    member.close()

    second = [f"b{i}" for i in range(30)]
    produce(broker.bootstrap, topic, second, 3)
    resumed = members(client, group, f"topics:{topic}")
    wait_until([resumed], lambda: len(resumed.records) >= 30, "the next 30 records")
    assert sorted(r[3] for r in resumed.records) == sorted(second)  # none again, none missing
    for p in range(3):
        offsets = [r[2] for r in resumed.records if r[1] == p]
        assert offsets == list(range(10, 20)), offsets
    resumed.commit()
    resumed.close()

    # An Empty consumer group can be deleted (DeleteGroups), offsets and all.
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.delete_consumer_groups([group])[group].result(timeout=15)
    listed = admin.list_consumer_groups().result(timeout=15)
    assert group not in {g.group_id for g in listed.valid}


@pytest.mark.parametrize("client", CLIENTS)
def test_regex_subscription_picks_up_a_new_topic(broker, members, client) -> None:
    prefix = f"rx{uuid.uuid4().hex[:6]}"
    create_topic(broker.bootstrap, f"{prefix}-a", 2)
    member = members(client, f"g-{prefix}", f"regex:{prefix}-.*")
    wait_until([member], lambda: member.assignment == {(f"{prefix}-a", 0), (f"{prefix}-a", 1)}, "the first topic")
    create_topic(broker.bootstrap, f"{prefix}-b", 2)
    produce(broker.bootstrap, f"{prefix}-b", ["late"], 2)
    took = wait_until([member], lambda: len(member.assignment) == 4 and any(r[3] == "late" for r in member.records),
                      "the topic created later")
    print(f"\n{client}: regex subscription picked up the new topic in {took:.2f}s")


@pytest.mark.parametrize("client", CLIENTS)
def test_members_carry_on_after_the_broker_is_killed_and_restarted(tmp_path, request, client) -> None:
    """The group's records in ``__consumer_offsets`` are replayed on start: the member keeps
    its epoch and partitions across a ``kill -9`` of the broker and a restart, reads what is
    produced after it, and nothing is read twice or skipped."""
    restarted = BrokerProcess(str(tmp_path / "data"), {"group.consumer.heartbeat.interval.ms": "500"})
    restarted.start()
    member: Any = None
    try:
        topic, group = f"cg-restart-{client}", f"g-restart-{client}"
        create_topic(restarted.bootstrap, topic, 3)
        produce(restarted.bootstrap, topic, [f"a{i}" for i in range(15)], 3)
        if client == "java":
            member = JavaMember(request.getfixturevalue("java_classes"), restarted.bootstrap, group, f"topics:{topic}")
        else:
            member = ConfluentMember(restarted.bootstrap, group, f"topics:{topic}")
        wait_until([member], lambda: len(member.records) >= 15, "the records before the restart")
        member.commit()
        restarted.kill()  # kill -9: the group's records were in the OS before each answer
        restarted.start()
        produce(restarted.bootstrap, topic, [f"b{i}" for i in range(15)], 3)
        took = wait_until([member], lambda: len(member.records) >= 30 and len(member.assignment) == 3,
                          "the records after the restart")
        log = restarted.read_log()
        assert "loaded 1 consumer groups" in log
        assert log.count("joined or changed its subscription") == 1  # no rejoin after the restart
        values = [r[3] for r in member.records]
        assert sorted(values) == sorted([f"a{i}" for i in range(15)] + [f"b{i}" for i in range(15)])
        admin = AdminClient({"bootstrap.servers": restarted.bootstrap})
        listed = admin.list_consumer_groups(types={ConsumerGroupType.CONSUMER}).result(timeout=15)
        assert group in {g.group_id for g in listed.valid}
        print(f"\n{client}: after the broker restart, resumed in {took:.2f}s")
    finally:
        if member is not None:
            member.kill()
        restarted.close()
