"""Consumer-group churn and the Java classic consumer, against a real kbroker process.

1. Churn: confluent-kafka, kafka-python and aiokafka members, each in its own process, share one
   classic group over 6 partitions while a producer writes keyed records. For about a minute,
   on a fixed seeded schedule, members join, close (LeaveGroup) or are killed (SIGKILL, so the
   session timeout has to expire them); every member commits its positions twice a second.
   When the churn stops, the members left must reach a stable, disjoint, complete assignment
   within the session timeout plus a few seconds, the group's committed offsets must reach the
   end of every partition, the offsets consumed across the group must cover [0, end) of every
   partition (at least once, no gap), every member that lived long enough must have been given
   partitions (nobody stuck in an UNKNOWN_MEMBER_ID / ILLEGAL_GENERATION loop; the number of such
   errors each member saw, from its client's logs and failed commits, is printed), and the
   broker log must hold no traceback.
2. The Java consumer with ``group.protocol=classic`` (tests/end_to_end/java/GroupConsumer.java):
   3 members over 6 partitions get disjoint complete assignments, and the partitions of a member
   whose JVM is SIGKILLed move to the others within the session timeout (+ slack).

Waiting is bounded polling of what the members report; only the churn schedule and the
producer's pace use timers (time is what is being tested). ``pytest -s`` shows the figures.
``KBROKER_CHURN_S`` sets the churn's length (55 s); the same churn, with the same assertions,
runs against Apache Kafka 4.3.1 (compat.targets.KafkaTarget) at the same time.
Run as ``python -m tests.end_to_end.test_group_churn KIND BOOTSTRAP GROUP TOPIC SESSION_MS``, the
module is one churn member (it reports on stdout, see ``member_main``).
"""

from __future__ import annotations

import asyncio
import logging
import os
import random
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from tests.broker_process import BrokerProcess

PARTITIONS = 6
SESSION_MS = 3000
CHURN_S = float(os.environ.get("KBROKER_CHURN_S", "55"))
EVENT_EVERY_S = 2.5
MIN_ALIVE, MAX_ALIVE = 3, 6  # never more members than partitions: every member should get some
LONG_ENOUGH_S = 10.0  # a member alive this long must have been given partitions at some point
STABLE_BOUND_S = SESSION_MS / 1000 + 7
MAX_FENCED = 20  # per member: a few are normal while others come and go; a loop makes dozens
KINDS = ("confluent", "kafka-python", "aiokafka")
OVERRIDES = {"group.initial.rebalance.delay.ms": "0", "group.min.session.timeout.ms": "500",
             "offsets.topic.num.partitions": "3", "transaction.state.log.num.partitions": "3"}
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
JAVA_SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "java", "GroupConsumer.java")
# What the clients say when the coordinator answers UNKNOWN_MEMBER_ID or ILLEGAL_GENERATION.
FENCED_WORDS = ("UNKNOWN_MEMBER_ID", "Unknown member", "UnknownMemberId", "ILLEGAL_GENERATION",
                "IllegalGeneration", "generation id is not valid")


# --- one churn member, in its own process -----------------------------------------------------


def member_main(kind: str, bootstrap: str, group: str, topic: str, session_ms: int) -> None:
    """Consume ``topic`` in ``group`` and report on stdout, a line each: ``assigned P...`` when the
    assignment changes, ``consumed P:O...`` per batch, ``fenced WORDS`` per client log line or
    failed commit that names UNKNOWN_MEMBER_ID / ILLEGAL_GENERATION, ``commitfail NAME`` for
    other failed commits. Commits the consumed positions every 0.5 s; "close" on stdin (or EOF)
    makes it commit once more, close (LeaveGroup) and print ``closed``."""
    lock = threading.Lock()

    def out(*words: object) -> None:
        with lock:
            print(*words, flush=True)

    class Fenced(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            text = record.getMessage()
            if any(word in text for word in FENCED_WORDS):
                out("fenced", text.replace("\n", " ")[:200])

    client_log = logging.getLogger(f"client-{kind}")
    for name in (client_log.name, "kafka", "aiokafka"):
        logging.getLogger(name).addHandler(Fenced())
        logging.getLogger(name).setLevel(logging.DEBUG if name == client_log.name else logging.INFO)
    closing = threading.Event()

    def read_stdin() -> None:
        for line in sys.stdin:
            if line.strip() == "close":
                break
        closing.set()

    threading.Thread(target=read_stdin, daemon=True).start()
    shown: list[frozenset[int] | None] = [None]

    def publish(partitions: frozenset[int]) -> None:
        if partitions != shown[0]:
            shown[0] = partitions
            out("assigned", *sorted(partitions))

    def consumed(pairs: list[tuple[int, int]]) -> None:
        if pairs:
            out("consumed", *(f"{p}:{o}" for p, o in pairs))

    def failed(exc: BaseException) -> None:
        text = f"{type(exc).__name__} {exc}"
        out("fenced" if any(word in text for word in FENCED_WORDS) else "commitfail", text.replace("\n", " ")[:200])

    heartbeat_ms = max(session_ms // 10, 100)
    if kind == "confluent":
        from confluent_kafka import Consumer, KafkaError, KafkaException

        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                             "enable.auto.commit": False, "session.timeout.ms": session_ms,
                             "heartbeat.interval.ms": heartbeat_ms, "max.poll.interval.ms": 20000,
                             "logger": client_log, "debug": "cgrp"})
        consumer.subscribe([topic])
        last = time.monotonic()
        while True:
            stop = closing.is_set()
            messages = consumer.consume(500, 0.05)
            consumed([(m.partition(), m.offset()) for m in messages if m.error() is None])
            publish(frozenset(tp.partition for tp in consumer.assignment()))
            if stop or time.monotonic() - last > 0.5:
                last = time.monotonic()
                try:
                    consumer.commit(asynchronous=False)
                except KafkaException as exc:
                    if exc.args[0].code() != KafkaError._NO_OFFSET:
                        failed(exc)
            if stop:
                break
        consumer.close()
    elif kind == "kafka-python":
        from kafka import KafkaConsumer

        consumer = KafkaConsumer(
            bootstrap_servers=bootstrap, group_id=group, auto_offset_reset="earliest", enable_auto_commit=False,
            session_timeout_ms=session_ms, heartbeat_interval_ms=heartbeat_ms, max_poll_interval_ms=20000,
            request_timeout_ms=max(30000, session_ms + 5000))
        assert consumer.partitions_for_topic(topic)  # see group_members.py: fewer needless rebalances
        consumer.subscribe([topic])
        last = time.monotonic()
        while True:
            stop = closing.is_set()
            # 500 ms, as in group_members.py (kafka-python can lose a SyncGroup on shorter polls)
            batches = consumer.poll(timeout_ms=500)
            consumed([(tp.partition, r.offset) for tp, records in batches.items() for r in records])
            publish(frozenset(tp.partition for tp in consumer.assignment()))
            if stop or time.monotonic() - last > 0.5:
                last = time.monotonic()
                try:
                    consumer.commit()
                except Exception as exc:  # CommitFailedError and friends: counted, not fatal
                    failed(exc)
            if stop:
                break
        consumer.close()
    else:
        asyncio.run(_aiokafka_member(bootstrap, group, topic, session_ms, heartbeat_ms, closing,
                                     publish, consumed, failed))
    out("closed")


async def _aiokafka_member(bootstrap: str, group: str, topic: str, session_ms: int, heartbeat_ms: int,
                           closing: threading.Event, publish: Callable[[frozenset[int]], None],
                           consumed: Callable[[list[tuple[int, int]]], None],
                           failed: Callable[[BaseException], None]) -> None:
    from aiokafka import AIOKafkaConsumer

    consumer = AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=group, auto_offset_reset="earliest",
                                enable_auto_commit=False, session_timeout_ms=session_ms,
                                heartbeat_interval_ms=heartbeat_ms, max_poll_interval_ms=20000)
    await consumer.start()
    try:
        last = time.monotonic()
        while True:
            stop = closing.is_set()
            batches = await consumer.getmany(timeout_ms=50)
            consumed([(tp.partition, r.offset) for tp, records in batches.items() for r in records])
            assignment = frozenset(tp.partition for tp in consumer.assignment())
            publish(assignment)
            if assignment and (stop or time.monotonic() - last > 0.5):
                last = time.monotonic()
                try:
                    await consumer.commit()
                except Exception as exc:  # CommitFailedError, RebalanceInProgressError: counted
                    failed(exc)
            if stop:
                break
    finally:
        await consumer.stop()


# --- the test's view of a member process --------------------------------------------------------


class ChurnMember:
    def __init__(self, number: int, kind: str, bootstrap: str, group: str, topic: str) -> None:
        self.name = f"{kind}#{number}"
        self.kind = kind
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.end_to_end.test_group_churn", kind, bootstrap, group, topic,
             str(SESSION_MS)], cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
            text=True)
        self.started = time.monotonic()
        self.ended: float | None = None
        self.how_ended = ""
        self.assignment: frozenset[int] = frozenset()
        self.assignments = 0
        self.first_assigned: float | None = None
        self.consumed: set[tuple[int, int]] = set()
        self.fenced = 0
        self.commit_failures = 0
        self.closed = threading.Event()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            word, *rest = line.split()
            if word == "assigned":
                self.assignment = frozenset(int(p) for p in rest)
                self.assignments += 1
                if rest and self.first_assigned is None:
                    self.first_assigned = time.monotonic()
            elif word == "consumed":
                self.consumed.update((int(p), int(o)) for p, o in (pair.split(":") for pair in rest))
            elif word == "fenced":
                self.fenced += 1
            elif word == "commitfail":
                self.commit_failures += 1
            elif word == "closed":
                self.closed.set()

    @property
    def alive(self) -> bool:
        return self.ended is None

    def close(self) -> None:
        """LeaveGroup; returns at once (the churn goes on), ``finish`` checks it ended."""
        assert self.proc.stdin is not None
        self.proc.stdin.write("close\n")
        self.proc.stdin.flush()
        self.ended, self.how_ended = time.monotonic(), "closed"

    def kill(self) -> None:
        self.proc.kill()
        self.proc.wait()
        self.ended, self.how_ended = time.monotonic(), "killed"
        self.assignment = frozenset()

    def finish(self, timeout: float) -> None:
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise AssertionError(f"{self.name} did not close within {timeout}s") from None
        self.reader.join(5)
        if self.how_ended == "closed":
            assert self.closed.is_set() and self.proc.returncode == 0, f"{self.name} exited {self.proc.returncode}"


def wait_for(condition: Callable[[], bool], timeout: float, what: str, hold: float = 0.0) -> float:
    """Poll until ``condition`` has held for ``hold`` seconds; the seconds until it first held."""
    start = time.monotonic()
    since: float | None = None
    while True:
        now = time.monotonic()
        if condition():
            since = now if since is None else since
            if now - since >= hold:
                return since - start
        else:
            since = None
        if now - start > timeout:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.02)


def split(assignments: list[frozenset[int]]) -> bool:
    """Every partition held by exactly one, each holding at least one."""
    return all(assignments) and sorted(p for a in assignments for p in a) == list(range(PARTITIONS))


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    proc = BrokerProcess(str(tmp_path_factory.mktemp("churn") / "data"), OVERRIDES)
    proc.start()
    yield proc
    proc.close()


def create_topic(bootstrap: str, topic: str) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(15)


class KeyedProducer(threading.Thread):
    """Writes keyed records at a steady pace until stopped; keeps every delivered offset."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        super().__init__(daemon=True, name="churn-producer")
        from confluent_kafka import Producer

        self.producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "enable.idempotence": True})
        self.topic = topic
        self.delivered: set[tuple[int, int]] = set()
        self.failures: list[str] = []
        self.stopping = threading.Event()

    def _delivered(self, error: Any, message: Any) -> None:
        if error is not None:
            self.failures.append(str(error))
        else:
            self.delivered.add((message.partition(), message.offset()))

    def run(self) -> None:
        i = 0
        while not self.stopping.wait(0.01):  # ~100 records/s: a timer, since the pace is the point
            for _ in range(2):
                self.producer.produce(self.topic, key=f"key-{i % 60}".encode(), value=f"value-{i}".encode(),
                                      on_delivery=self._delivered)
                i += 1
            self.producer.poll(0)
        self.producer.flush(15)

    def ends(self) -> dict[int, int]:
        return {p: 1 + max((o for q, o in self.delivered if q == p), default=-1) for p in range(PARTITIONS)}


def churn(name: str, bootstrap: str) -> dict[str, Any]:
    """The churn against the broker ``name`` at ``bootstrap``, with every client-side assertion; returns
    the figures (and the group's name, for the broker-side checks)."""
    from confluent_kafka import ConsumerGroupState, ConsumerGroupTopicPartitions
    from confluent_kafka.admin import AdminClient

    topic, group = f"churn-{uuid.uuid4().hex[:8]}", f"churn-{uuid.uuid4().hex[:8]}"
    create_topic(bootstrap, topic)
    schedule = random.Random(6)  # a fixed schedule: the same churn on every run
    members: list[ChurnMember] = []
    counts = {"joins": 0, "leaves": 0, "kills": 0}

    def join() -> None:
        kind = KINDS[len(members) % len(KINDS)]
        members.append(ChurnMember(len(members), kind, bootstrap, group, topic))
        counts["joins"] += 1

    producer = KeyedProducer(bootstrap, topic)
    admin = AdminClient({"bootstrap.servers": bootstrap})
    try:
        for _ in range(4):
            join()
        producer.start()
        churn_start = time.monotonic()
        next_event = churn_start + EVENT_EVERY_S
        while next_event < churn_start + CHURN_S:
            time.sleep(max(0.0, next_event - time.monotonic()))  # the pace of the churn
            next_event += EVENT_EVERY_S
            alive = [m for m in members if m.alive]
            roll = schedule.random()
            if len(alive) <= MIN_ALIVE:
                roll = 0.0  # too few: a join
            elif len(alive) >= MAX_ALIVE:
                roll = 0.45 + 0.55 * roll  # too many: a leave or a kill
            if roll < 0.45:
                join()
            elif roll < 0.82:
                schedule.choice(alive).close()
                counts["leaves"] += 1
            else:
                schedule.choice(alive).kill()
                counts["kills"] += 1
        churn_end = time.monotonic()
        producer.stopping.set()
        producer.join(20)
        assert not producer.is_alive() and not producer.failures, producer.failures[:3]
        ends = producer.ends()
        assert all(ends.values()), ends
        remaining = [m for m in members if m.alive]

        # The members left settle: one disjoint, complete assignment, held for a second, which
        # the coordinator also describes (Stable, these members, these partitions). Measured from
        # the last churn event (a kill just then costs a session timeout).
        stable_after = time.monotonic() - churn_end + wait_for(
            lambda: split([m.assignment for m in remaining]), STABLE_BOUND_S,
            f"a stable split among {[m.name for m in remaining]}: {[sorted(m.assignment) for m in remaining]}",
            hold=1.0)
        final = sorted(sorted(m.assignment) for m in remaining)
        assert stable_after < STABLE_BOUND_S
        described = admin.describe_consumer_groups([group])[group].result(10)
        assert described.state == ConsumerGroupState.STABLE, described.state
        assert sorted(sorted(tp.partition for tp in m.assignment.topic_partitions)
                      for m in described.members) == final

        # They read to the end and commit it.
        def committed() -> dict[int, int]:
            listed = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])[group].result(10)
            return {tp.partition: tp.offset for tp in listed.topic_partitions}

        wait_for(lambda: committed() == ends, 20, f"the committed offsets to reach {ends}")
        for member in remaining:
            member.close()
        for member in members:
            member.finish(30)
    finally:
        producer.stopping.set()
        for member in members:
            if member.proc.poll() is None:
                member.proc.kill()
                member.proc.wait()

    # At least once, no gap: the offsets consumed across the group cover [0, end) everywhere.
    everything = set().union(*(m.consumed for m in members))
    for partition, end in ends.items():
        missing = sorted(set(range(end)) - {o for p, o in everything if p == partition})
        assert not missing, f"partition {partition}: offsets {missing[:10]} never consumed"
    assert producer.delivered <= everything

    # Nobody was stuck: every member that lived long enough was given partitions, and none saw
    # more than a handful of UNKNOWN_MEMBER_ID / ILLEGAL_GENERATION answers (a loop makes dozens).
    stuck = [m.name for m in members
             if (m.ended or churn_end) - m.started >= LONG_ENOUGH_S
             and (m.first_assigned is None or m.first_assigned - m.started > LONG_ENOUGH_S)]
    assert not stuck, f"members never assigned within {LONG_ENOUGH_S}s: {stuck}"
    fenced = {m.name: m.fenced for m in members}
    assert max(fenced.values()) <= MAX_FENCED, fenced

    first_assignments = [m.first_assigned - m.started for m in members if m.first_assigned is not None]
    print(f"\n{name}: churn over {churn_end - churn_start:.0f}s: {counts['joins']} joins (4 at the start), "
          f"{counts['leaves']} leaves, {counts['kills']} kills; {len(producer.delivered)} records produced, "
          f"{sum(len(m.consumed) for m in members)} consumed (with re-reads); stable {stable_after:.2f}s after "
          f"the churn stopped ({len(remaining)} members: {final}); slowest first assignment "
          f"{max(first_assignments):.2f}s; UNKNOWN_MEMBER_ID/ILLEGAL_GENERATION client log lines: "
          f"{sum(fenced.values())} in all, at most {max(fenced.values())} per member")
    for m in members:
        first = f"{m.first_assigned - m.started:.2f}s" if m.first_assigned is not None else "never"
        print(f"  {name} {m.name:15} lived {((m.ended or churn_end) - m.started):5.1f}s, {m.how_ended or 'stayed':7} "
              f"first assignment after {first}, {m.assignments} assignment changes, "
              f"{m.fenced} UNKNOWN_MEMBER_ID/ILLEGAL_GENERATION log lines, {m.commit_failures} other commit failures")
    return {"group": group, **counts}


def test_members_join_leave_and_die_for_a_minute_without_getting_stuck(broker: BrokerProcess, tmp_path: Any) -> None:
    """The churn against kbroker and, at the same time, with the same schedule and assertions,
    against Apache Kafka 4.3.1: what the test demands of kbroker is what Kafka does. The two runs
    share nothing but the machine (the churn mostly waits), so they share the minute."""
    from compat.targets import KafkaTarget

    kafka = KafkaTarget(tmp_path, extra={**OVERRIDES, "num.partitions": "1"})
    kafka.start()
    log_start = len(broker.read_log())
    try:
        with ThreadPoolExecutor(2) as pool:
            on_kbroker = pool.submit(churn, "kbroker", broker.bootstrap)
            on_kafka = pool.submit(churn, "kafka", kafka.bootstrap)
            figures, kafka_figures = on_kbroker.result(), on_kafka.result()
    finally:
        kafka.close()
    log = broker.read_log()[log_start:]
    assert "Traceback" not in log, log[log.index("Traceback"):][:3000]
    generations = log.count(f"group {figures['group']} generation ")
    expired = log.count(f"group {figures['group']}: member ")
    print(f"kbroker: {generations} generations (rebalances completed), {expired} sessions expired "
          f"({figures['kills']} members were killed)")
    kafka_group = kafka_figures["group"]
    print(f"kafka: {kafka.log.read_text().count(f'Stabilized group {kafka_group} generation')} generations")


# --- the Java consumer, classic protocol --------------------------------------------------------


@pytest.fixture(scope="module")
def java_classes(tmp_path_factory: pytest.TempPathFactory) -> str:
    from compat.deps import kafka_classpath

    classes = tmp_path_factory.mktemp("churnjava")
    done = subprocess.run(["javac", "-nowarn", "-d", str(classes), "-cp", kafka_classpath(), JAVA_SOURCE],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    return str(classes)


class JavaClassicMember:
    """A GroupConsumer JVM in a classic group with a short session; stdout gives its assignment."""

    def __init__(self, classes: str, bootstrap: str, group: str, topic: str) -> None:
        from compat.deps import kafka_classpath

        self.proc = subprocess.Popen(
            ["java", "-Xmx128m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-cp",
             f"{classes}{os.pathsep}{kafka_classpath()}", "GroupConsumer", bootstrap, group, "classic",
             f"topics:{topic}", f"session.timeout.ms={SESSION_MS}", f"heartbeat.interval.ms={SESSION_MS // 10}"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
            env={**os.environ, "KAFKA_LOG4J_OPTS": ""})
        self.assignment: frozenset[int] = frozenset()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            word, _, rest = line.strip().partition(" ")
            if word == "assignment":
                self.assignment = frozenset(int(tp.rsplit("-", 1)[1]) for tp in rest.split(",") if tp)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)


def test_java_classic_members_split_and_a_killed_members_partitions_move(broker: BrokerProcess,
                                                                         java_classes: str) -> None:
    topic, group = f"jclassic-{uuid.uuid4().hex[:8]}", f"jclassic-{uuid.uuid4().hex[:8]}"
    create_topic(broker.bootstrap, topic)
    log_start = len(broker.read_log())
    members = [JavaClassicMember(java_classes, broker.bootstrap, group, topic) for _ in range(3)]
    try:
        took = wait_for(lambda: split([m.assignment for m in members]), 40, "three disjoint, complete assignments",
                        hold=0.5)  # a bound only: three JVMs start in 3-5 s (11 s on a loaded 2-core box)
        assert sorted(len(m.assignment) for m in members) == [2, 2, 2]
        print(f"\njava classic: 3 members split 6 partitions {took:.2f}s after the JVMs started: "
              f"{[sorted(m.assignment) for m in members]}")
        killed_at = time.monotonic()
        members[0].kill()  # SIGKILL: no LeaveGroup, the session timeout has to expire it
        wait_for(lambda: split([m.assignment for m in members[1:]]), SESSION_MS / 1000 + 10,
                 "the killed member's partitions to move")
        moved = time.monotonic() - killed_at
        print(f"java classic: the SIGKILLed member's partitions moved {moved:.2f}s after the kill "
              f"(session.timeout.ms={SESSION_MS}): {[sorted(m.assignment) for m in members[1:]]}")
        # not before the session timeout (less a heartbeat interval or so), nor long after it
        assert SESSION_MS / 1000 - 0.8 < moved < SESSION_MS / 1000 + 5
        log = broker.read_log()[log_start:]
        assert f"group {group}: member " in log and "session expired" in log
    finally:
        for member in members:
            member.kill()


if __name__ == "__main__":
    member_main(sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]))
