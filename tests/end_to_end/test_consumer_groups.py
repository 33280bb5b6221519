"""Consumer groups (classic protocol) with real clients: confluent-kafka, kafka-python and
aiokafka members sharing partitions, rebalancing when a member leaves or is killed (the time
it takes is printed), committing and resuming at least once without gaps, a static member
rejoining without a rebalance, and committed offsets and group state surviving ``kill -9`` of
the broker; Java: Kafka's console consumer in a group and the kafka-consumer-groups tool
(list, describe with lag, reset offsets all eight ways, delete offsets, delete). The broker runs
with group.initial.rebalance.delay.ms=0 and short sessions so the tests stay fast; every wait
is bounded polling of what the clients observe. (KIP-848 groups: test_consumer_group_protocol.py.)
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.broker_process import BrokerProcess
from tests.end_to_end.group_members import KINDS, Member
from tests.end_to_end.test_java_cli import JVM_FLAGS, KafkaCli, kafka_cli  # noqa: F401 (the fixture)

PARTITIONS = 6
PER_PARTITION = 50
SESSION_MS = 2000
OVERRIDES = {"group.initial.rebalance.delay.ms": "0", "group.min.session.timeout.ms": "500",
             "offsets.topic.num.partitions": "3", "transaction.state.log.num.partitions": "3"}
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
GROUPS_TOOL = "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand"
CONSOLE_CONSUMER = "org.apache.kafka.tools.consumer.ConsoleConsumer"


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    proc = BrokerProcess(str(tmp_path_factory.mktemp("groups") / "data"), OVERRIDES)
    proc.start()
    yield proc
    proc.close()


def wait_for(condition: Callable[[], bool], timeout: float, what: str, every: float = 0.01) -> float:
    """Poll ``condition`` every ``every`` seconds until true; the seconds it took."""
    start = time.monotonic()
    while not condition():
        if time.monotonic() - start > timeout:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(every)
    return time.monotonic() - start


def topic_with_records(bootstrap: str) -> str:
    """A 6-partition topic with PER_PARTITION records per partition, values b"<partition>:<i>"."""
    topic = f"cg-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})  # kept alive until its future is done
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(10)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for partition in range(PARTITIONS):
        for i in range(PER_PARTITION):
            producer.produce(topic, f"{partition}:{i}".encode(), partition=partition)
    assert producer.flush(10) == 0
    return topic


def split(members: list[Member]) -> bool:
    """Every partition assigned to exactly one of ``members``, each holding at least one."""
    assignments = [m.assignment for m in members]
    return all(assignments) and sorted(p for a in assignments for p in a) == list(range(PARTITIONS))


def close_all(members: list[Member]) -> None:
    for member in members:
        if member.is_alive():
            member.close()


@pytest.mark.parametrize("kind", KINDS)
def test_three_members_split_six_partitions_and_take_over_a_leaving_member(broker: BrokerProcess, kind: str) -> None:
    topic, group = topic_with_records(broker.bootstrap), f"split-{kind}"
    members = [Member(kind, broker.bootstrap, group, topic, session_ms=SESSION_MS) for _ in range(3)]
    try:
        for member in members:
            member.start()
        took = wait_for(lambda: split(members), 60, "three disjoint, complete assignments")
        print(f"\n{kind}: 3 members assigned 6 partitions in {took:.2f}s: {[sorted(m.assignment) for m in members]}")
        assert sorted(len(m.assignment) for m in members) == [2, 2, 2]
        members[0].close()  # LeaveGroup: the others take over at once, no session timeout
        took = wait_for(lambda: split(members[1:]), 30, "the leaving member's partitions to move")
        print(f"{kind}: after a member left, rebalanced in {took:.2f}s")
        assert took < SESSION_MS / 1000
        wait_for(lambda: len({(p, o) for m in members for p, o, _ in m.consumed}) == PARTITIONS * PER_PARTITION,
                 30, "every record consumed")
        everything = {(p, o) for m in members for p, o, _ in m.consumed}
        assert everything == {(p, o) for p in range(PARTITIONS) for o in range(PER_PARTITION)}
    finally:
        close_all(members)


@pytest.mark.parametrize("kind", KINDS)
def test_killed_members_partitions_are_reassigned_within_the_session_timeout(broker: BrokerProcess,
                                                                             kind: str) -> None:
    topic, group = topic_with_records(broker.bootstrap), f"kill-{kind}"
    members = [Member(kind, broker.bootstrap, group, topic, session_ms=SESSION_MS) for _ in range(2)]
    victim = subprocess.Popen(
        [sys.executable, "-m", "tests.end_to_end.group_members", kind, broker.bootstrap, group, topic,
         str(SESSION_MS)], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    try:
        for member in members:
            member.start()
        assert victim.stdout is not None
        stdout = victim.stdout
        victim_assignment: list[frozenset[int]] = [frozenset()]

        def read_victim() -> None:  # the victim prints each assignment it gets
            for line in stdout:
                if line.startswith("assigned"):
                    victim_assignment[0] = frozenset(int(p) for p in line.split()[1:])

        threading.Thread(target=read_victim, daemon=True).start()

        def three_way() -> bool:
            parts = [victim_assignment[0], *(m.assignment for m in members)]
            return all(parts) and sorted(p for a in parts for p in a) == list(range(PARTITIONS))

        wait_for(three_way, 60, "a three-way split")
        victim.send_signal(signal.SIGKILL)
        victim.wait()
        took = wait_for(lambda: split(members), 30, "the killed member's partitions to move")
        print(f"\n{kind}: killed member's partitions reassigned {took:.2f}s after SIGKILL "
              f"(session.timeout.ms={SESSION_MS})")
        assert took < SESSION_MS / 1000 + 5
    finally:
        if victim.poll() is None:
            victim.kill()
            victim.wait()
        close_all(members)


@pytest.mark.parametrize("kind", KINDS)
def test_commit_then_resume_reads_at_least_once_without_gaps(broker: BrokerProcess, kind: str) -> None:
    topic, group = topic_with_records(broker.bootstrap), f"resume-{kind}"
    first = Member(kind, broker.bootstrap, group, topic, session_ms=SESSION_MS)
    first.start()
    try:
        wait_for(lambda: len(first.consumed) >= PER_PARTITION * 2, 60, "some records consumed")
        committed = first.commit()
    finally:
        first.close()
    assert committed and all(0 < offset <= PER_PARTITION for offset in committed.values())
    second = Member(kind, broker.bootstrap, group, topic, session_ms=SESSION_MS)
    second.start()
    try:
        wait_for(lambda: len({(p, o) for p, o, _ in second.consumed}) >= PARTITIONS * PER_PARTITION
                 - sum(committed.values()), 60, "the rest consumed")
    finally:
        second.close()
    for partition in range(PARTITIONS):
        resumed = sorted(o for p, o, _ in second.consumed if p == partition)
        # picks up exactly at the commit (a partition read to its end before the commit has nothing left)
        assert (resumed[0] if resumed else PER_PARTITION) == committed.get(partition, 0), partition
        before = {o for p, o, _ in first.consumed if p == partition}
        assert before | set(resumed) == set(range(PER_PARTITION)), partition  # no gap
    assert {v for _, _, v in first.consumed + second.consumed} == {
        f"{p}:{i}".encode() for p in range(PARTITIONS) for i in range(PER_PARTITION)}


def test_static_member_rejoins_without_a_rebalance(broker: BrokerProcess) -> None:
    topic, group = topic_with_records(broker.bootstrap), "static"
    assigns: list[int] = []
    steady = Member("confluent", broker.bootstrap, group, topic, session_ms=10000, instance="steady",
                    on_assign=lambda partitions: assigns.append(len(partitions)))
    bouncing = Member("confluent", broker.bootstrap, group, topic, session_ms=10000, instance="bouncing")
    back = Member("confluent", broker.bootstrap, group, topic, session_ms=10000, instance="bouncing")
    try:
        steady.start()
        bouncing.start()
        wait_for(lambda: split([steady, bouncing]), 60, "a two-way split")
        rebalances = len(assigns)
        before = bouncing.assignment
        bouncing.close()  # a static member sends no LeaveGroup: its place is kept for the session
        back.start()
        took = wait_for(lambda: back.assignment == before, 30, "the static member's partitions back")
        print(f"\nstatic member back with its partitions in {took:.2f}s")
        # A rebalance would have needed the steady member to rejoin before `back` got anything.
        assert len(assigns) == rebalances and steady.assignment == frozenset(range(PARTITIONS)) - before
        assert took < 10
    finally:
        close_all([steady, bouncing, back])


def test_committed_offsets_and_groups_survive_kill_9(tmp_path: pytest.TempPathFactory) -> None:
    broker = BrokerProcess(str(tmp_path / "data"), OVERRIDES)
    broker.start()
    try:
        topic = topic_with_records(broker.bootstrap)
        member = Member("confluent", broker.bootstrap, "durable", topic, session_ms=SESSION_MS)
        member.start()
        try:
            wait_for(lambda: len(member.consumed) >= PER_PARTITION, 60, "records consumed")
            committed = member.commit()
        finally:
            member.close()
        standalone = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "standalone"})
        standalone.commit(offsets=[TopicPartition(topic, 3, 17)], asynchronous=False)
        standalone.close()
        broker.kill()
        broker.start()
        check = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "durable"})
        found = check.committed([TopicPartition(topic, p) for p in range(PARTITIONS)], timeout=10)
        check.close()
        assert {tp.partition: tp.offset for tp in found if tp.offset >= 0} == committed
        check = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "standalone"})
        assert check.committed([TopicPartition(topic, 3)], timeout=10)[0].offset == 17
        check.close()
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        listed = admin.list_consumer_groups().result(10)
        assert listed.errors == [] and {"durable", "standalone"} <= {g.group_id for g in listed.valid}
    finally:
        broker.close()


# --- Java: the classic consumer (Kafka's console consumer) and kafka-consumer-groups -------


def _offsets_table(text: str) -> dict[int, tuple[str, ...]]:
    """kafka-consumer-groups' per-partition rows (GROUP TOPIC PARTITION ...), by partition."""
    rows = {}
    for line in text.splitlines():
        cells = line.split()
        if len(cells) >= 4 and cells[2].isdigit():
            rows[int(cells[2])] = tuple(cells[3:])
    return rows


def test_java_consumer_and_the_consumer_groups_tool(broker: BrokerProcess, kafka_cli: KafkaCli,  # noqa: F811
                                                    tmp_path: Path) -> None:
    topic, group = topic_with_records(broker.bootstrap), "java-group"

    def tool(*args: str) -> str:
        return kafka_cli.run(GROUPS_TOOL, "--bootstrap-server", broker.bootstrap, *args).text

    consumer = subprocess.Popen(
        [kafka_cli.java, *JVM_FLAGS, f"-Dlog4j2.configurationFile={kafka_cli.log4j_config}", "-cp",
         kafka_cli.classpath, CONSOLE_CONSUMER, "--bootstrap-server", broker.bootstrap, "--topic", topic,
         "--group", group, "--from-beginning", "--consumer-property", "auto.commit.interval.ms=100"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    try:
        def all_committed() -> bool:
            listed = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])[group].result(10)
            return sorted(tp.offset for tp in listed.topic_partitions) == [PER_PARTITION] * PARTITIONS

        wait_for(all_committed, 60, "the Java consumer to read and commit everything")
        described = tool("--describe", "--group", group)
        rows = _offsets_table(described)
        assert sorted(rows) == list(range(PARTITIONS)), described
        for current, end, lag, consumer_id, host, _client in rows.values():
            assert (current, end, lag, host) == (str(PER_PARTITION), str(PER_PARTITION), "0", "/127.0.0.1")
            assert consumer_id.startswith("console-consumer-")
        state = tool("--describe", "--group", group, "--state")
        assert re.search(r"java-group\s+127\.0\.0\.1:\d+\s+\(1\)\s+range\s+Stable\s+1", state), state
        assert group in tool("--list").split()
    finally:
        consumer.send_signal(signal.SIGTERM)  # closes: LeaveGroup
        consumer.wait(30)

    def reset(*how: str) -> dict[int, str]:
        out = tool("--reset-offsets", "--group", group, "--topic", topic, *how, "--execute")
        return {p: cells[0] for p, cells in _offsets_table(out).items()}

    everywhere = range(PARTITIONS)
    assert reset("--to-earliest") == dict.fromkeys(everywhere, "0")
    assert reset("--to-offset", "20") == dict.fromkeys(everywhere, "20")
    assert reset("--shift-by", "-5") == dict.fromkeys(everywhere, "15")
    assert reset("--to-latest") == dict.fromkeys(everywhere, str(PER_PARTITION))
    assert reset("--to-datetime", "2000-01-01T00:00:00.000") == dict.fromkeys(everywhere, "0")
    assert reset("--shift-by", "7") == dict.fromkeys(everywhere, "7")
    assert reset("--to-current") == dict.fromkeys(everywhere, "7")
    assert reset("--by-duration", "P1D") == dict.fromkeys(everywhere, "0")  # every record is newer than a day
    plan = tmp_path / "reset.csv"
    plan.write_text("".join(f"{topic},{p},{3 * p}\n" for p in everywhere))
    out = tool("--reset-offsets", "--group", group, "--from-file", str(plan), "--execute")
    assert {p: cells[0] for p, cells in _offsets_table(out).items()} == {p: str(3 * p) for p in everywhere}
    assert reset("--to-earliest") == dict.fromkeys(everywhere, "0")
    described = tool("--describe", "--group", group)
    assert {p: (c[0], c[2]) for p, c in _offsets_table(described).items()} == dict.fromkeys(
        everywhere, ("0", str(PER_PARTITION)))
    assert re.search(r"java-group\s+\S+\s+\(1\)\s+-\s+Empty\s+0", tool("--describe", "--group", group, "--state"))
    deleted = tool("--delete-offsets", "--group", group, "--topic", topic)
    assert "Request succeeded for deleting offsets from group java-group." in deleted
    statuses = {int(cells[1]): cells[2] for cells in map(str.split, deleted.splitlines()) if cells[:1] == [topic]}
    assert statuses == dict.fromkeys(everywhere, "Successful")  # TOPIC PARTITION STATUS rows
    assert "Deletion of requested consumer groups ('java-group') was successful." in tool("--delete", "--group", group)
    assert group not in tool("--list").split()


class BackgroundScenario(threading.Thread):
    """A scenario that mostly waits, run beside the module's other tests; ``outcome`` re-raises
    its failure in the test that asks for it."""

    def __init__(self, scenario: Callable[[Path], None], workdir: Path) -> None:
        super().__init__(daemon=True)
        self.scenario, self.workdir = scenario, workdir
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            self.scenario(self.workdir)
        except BaseException as error:  # handed to the test
            self.error = error

    def outcome(self, timeout: float) -> None:
        self.join(timeout)
        assert not self.is_alive(), f"{self.scenario.__name__} still running after {timeout}s"
        if self.error is not None:
            raise self.error


@pytest.fixture(scope="module", autouse=True)
def offsets_retention(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BackgroundScenario]:
    """Offset retention cannot be shorter than a minute on Kafka (offsets.retention.minutes), so
    the scenario starts with the module and its minute overlaps the other tests."""
    run = BackgroundScenario(offsets_retention_scenario, tmp_path_factory.mktemp("retention"))
    run.start()
    yield run
    run.join(120)


def test_offsets_retention_expires_an_empty_groups_and_standalone_offsets(
    offsets_retention: BackgroundScenario,
) -> None:
    """offsets.retention.minutes=1 (Kafka's minimum) with a 500 ms check: the offsets of a group
    whose only member closed, and offsets committed outside any membership, are there until a
    minute has passed and gone (group deleted, not listed) within seconds after; they stay gone
    after a restart (tombstones in __consumer_offsets). About 65 s, begun with the module."""
    offsets_retention.outcome(150)


def offsets_retention_scenario(tmp_path: Path) -> None:
    """The retention test's steps and assertions, on a broker of its own."""
    broker = BrokerProcess(str(tmp_path / "data"), {**OVERRIDES, "offsets.retention.minutes": "1",
                                                    "offsets.retention.check.interval.ms": "500"})
    broker.start()
    try:
        topic = topic_with_records(broker.bootstrap)
        member_group, standalone_group = f"ret-{uuid.uuid4().hex[:6]}", f"simple-{uuid.uuid4().hex[:6]}"
        member = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": member_group,
                           "auto.offset.reset": "earliest", "enable.auto.commit": False,
                           "session.timeout.ms": SESSION_MS})
        member.subscribe([topic])
        message = None
        deadline = time.monotonic() + 30
        while message is None and time.monotonic() < deadline:
            polled = member.poll(0.2)
            message = polled if polled is not None and polled.error() is None else None
        assert message is not None
        member.commit(message=message, asynchronous=False)
        simple = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": standalone_group,
                           "enable.auto.commit": False})
        start = time.monotonic()  # the standalone commit and the member group going Empty are after this
        simple.commit(offsets=[TopicPartition(topic, 0, 7)], asynchronous=False)
        simple.close()
        member.close()  # LeaveGroup: the group is Empty

        checkers = {group: Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group})
                    for group in (member_group, standalone_group)}

        def committed(group: str) -> int:
            partition = 0 if group == standalone_group else message.partition()
            return checkers[group].committed([TopicPartition(topic, partition)], timeout=10)[0].offset

        def listed() -> set[str]:
            admin = AdminClient({"bootstrap.servers": broker.bootstrap})  # alive until the result is in
            return {g.group_id for g in admin.list_consumer_groups().result(10).valid}

        assert committed(member_group) == message.offset() + 1 and committed(standalone_group) == 7
        assert {member_group, standalone_group} <= listed()
        # Polled four times a second: this runs beside other tests for a minute.
        wait_for(lambda: committed(member_group) < 0 and committed(standalone_group) < 0, 75, "the offsets to expire",
                 every=0.25)  # fmt: skip
        elapsed = time.monotonic() - start
        print(f"offsets expired {elapsed:.1f}s after the commit / the group became Empty")
        assert 59.5 <= elapsed <= 68, elapsed
        assert not {member_group, standalone_group} & listed()
        for checker in checkers.values():
            checker.close()
        broker.stop()
        broker.start()
        checkers = {group: Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group})
                    for group in (member_group, standalone_group)}
        assert committed(member_group) < 0 and committed(standalone_group) < 0
        assert not {member_group, standalone_group} & listed()
        for checker in checkers.values():
            checker.close()
    finally:
        broker.close()
