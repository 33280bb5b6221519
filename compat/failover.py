"""Leader-failover workload and checker for a 3-broker cluster (fault matrix cells M2/M3).

``run_failover(cluster, kills=..., pauses=...)`` creates topic ``failover`` (RF 3, 6 partitions,
``min.insync.replicas=2``) and keeps idempotent confluent-kafka producers (acks=all) sending
unique integer values to every partition at a low rate, recording each value's outcome: ``ok``
with its (partition, offset), ``fail`` (definitely not appended) or ``info`` (indefinite:
timeouts, disconnects, anything the client cannot decide). Meanwhile it repeatedly picks a
partition, finds its leader and crashes it (SIGKILL) or freezes it (SIGSTOP, then SIGCONT);
per fault it measures, from the signal, the time until every surviving broker's Metadata shows
a live leader for every partition (``leader_s``), until none lists the victim in an ISR
(``isr_shrink_s``) and until one probe produce to each partition the victim led succeeded
(``probe_s``); then it restarts the victim and measures the time until every partition's ISR is
full again (``isr_s``) before the next fault.

Afterwards every partition is drained with an ``assign()`` read_committed consumer from the
beginning to the high watermark and checked: ``lost`` (ok values never read), ``duplicates``
(values read at more than one offset), ``inconsistent`` (an ok value not at its acknowledged
offset), ``nonmonotonic`` (one producer session's ok offsets in one partition not increasing in
send order; a value acknowledged without an offset, see ``Send.offset_known``, counts where it
was read), ``failed_but_read`` (a definite failure that is visible) and ``unexpected`` (read
values nobody sent). ``python -m compat.failover --target kafka|kbroker --kills 20`` starts a
cluster, runs it and writes the JSON summary; the workload threads run at nice +5 so the
brokers keep the CPU (two cores; a starved broker falls out of the ISR for no real reason).
``--set key=value`` (repeatable) gives every node a setting, e.g. ``--set
broker.session.timeout.ms=6000 --set kbroker.broker.disconnect.fence.ms=0`` for the outage with
session-timeout fencing only (kbroker's reset-based fencing off).
"""

from __future__ import annotations

import argparse
import itertools
import json
import logging
import os
import random
import statistics
import sys
import tempfile
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, KafkaError, Message, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from compat.cluster import Cluster, make_cluster

TOPIC = "failover"
PARTITIONS = 6
REPLICATION_FACTOR = 3
RATE_PER_S = 150  # all producers together
PRODUCERS = 2
WORKLOAD_NICE = 5
POLL_INTERVAL_S = 0.05  # how often Metadata is asked while waiting for a leader or the ISR
LEADER_DEADLINE_S = 60.0
ISR_DEADLINE_S = 120.0
DRAIN_DEADLINE_S = 60.0

PRODUCER_CONFIG: dict[str, Any] = {
    "acks": "all",
    "enable.idempotence": True,
    "max.in.flight.requests.per.connection": 5,
    "request.timeout.ms": 5000,
    # librdkafka's request.timeout.ms is only the broker-side ack wait; the client-side limit on
    # an in-flight request (Java's request.timeout.ms) is socket.timeout.ms. Without it a produce
    # to a frozen (SIGSTOP) leader waits for the whole delivery timeout.
    "socket.timeout.ms": 5000,
    "delivery.timeout.ms": 30000,
    "linger.ms": 5,
    "retry.backoff.ms": 100,
    "reconnect.backoff.ms": 50,
    "reconnect.backoff.max.ms": 500,
}

LIBRDKAFKA_LOG = logging.getLogger("compat.failover.librdkafka")


def client_config(bootstrap: str) -> dict[str, Any]:
    """Settings every client of the run shares: librdkafka's log lines go to Python logging
    (connection-refused noise during every kill), not to stderr."""
    return {"bootstrap.servers": bootstrap, "logger": LIBRDKAFKA_LOG}


# Errors that prove the record was not appended (Jepsen's "fail"); everything else is "info".
DEFINITE_ERRORS = {
    KafkaError.NOT_ENOUGH_REPLICAS,
    KafkaError.MSG_SIZE_TOO_LARGE,
    KafkaError.UNKNOWN_TOPIC_OR_PART,
    KafkaError.RECORD_LIST_TOO_LARGE,
    KafkaError.INVALID_RECORD,
    KafkaError.INVALID_REQUIRED_ACKS,
    KafkaError.TOPIC_AUTHORIZATION_FAILED,
    KafkaError._UNKNOWN_PARTITION,
    KafkaError._UNKNOWN_TOPIC,
}


@dataclass
class Send:
    """One produced value and what became of it."""

    value: int
    session: str  # producer session: a new one after a fatal producer error
    partition: int
    outcome: str = "pending"  # ok | fail | info | pending (no callback came)
    offset: int | None = None
    error: str | None = None

    @property
    def offset_known(self) -> bool:
        """Whether the delivery report named an offset. librdkafka acknowledges the records of a
        batch that failed indefinitely (a timeout: possibly persisted) and was then implied by a
        later batch's success ("implicitly acked by subsequent batch success") with no error and
        no offset (None here): written once, but the client never learnt where."""
        return self.offset is not None and self.offset >= 0


@dataclass
class Fault:
    """One injected failure and the recovery times measured around it (seconds from the signal)."""

    kind: str  # kill | pause
    node: int
    partition: int
    formerly_led: list[int]
    leader_s: float | None = None
    isr_shrink_s: float | None = None  # until no surviving broker lists the victim in any ISR
    probe_s: float | None = None
    isr_s: float | None = None  # from the restart (or SIGCONT) until every ISR is full
    paused_s: float | None = None


class History:
    """Every send of every producer, shared by the producer threads (callbacks) and the checker."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.sends: list[Send] = []
        self._next_value = 0

    def invoke(self, session: str, partition: int) -> Send:
        with self.lock:
            send = Send(self._next_value, session, partition)
            self._next_value += 1
            self.sends.append(send)
        return send

    def resolve(self, send: Send, err: KafkaError | None, msg: Message) -> None:
        if err is None:
            send.outcome, send.partition, send.offset = "ok", msg.partition(), msg.offset()
        else:
            send.outcome = "fail" if err.code() in DEFINITE_ERRORS else "info"
            send.error = err.name()


def _callback(history: History, send: Send) -> Callable[[KafkaError | None, Message], None]:
    return lambda err, msg: history.resolve(send, err, msg)


class ProducerWorker(threading.Thread):
    """One idempotent producer sending ``rate`` values/s round-robin over the partitions."""

    def __init__(self, name: str, bootstrap: str, history: History, rate: float, stopping: threading.Event) -> None:
        super().__init__(name=name, daemon=True)
        self.bootstrap = bootstrap
        self.history = history
        self.interval = 1.0 / rate
        self.stopping = stopping
        self.fatal: list[str] = []
        self.sessions = 0

    def _producer(self) -> tuple[Producer, str, list[KafkaError]]:
        self.sessions += 1
        fatal: list[KafkaError] = []
        config = {
            **client_config(self.bootstrap),
            **PRODUCER_CONFIG,
            "client.id": f"{self.name}-{self.sessions}",
            "error_cb": lambda err: fatal.append(err) if err.fatal() else None,
        }
        return Producer(config), f"{self.name}-{self.sessions}", fatal

    def run(self) -> None:
        # Linux nice values are per thread and inherited by threads started from it, so this
        # lowers this thread and librdkafka's threads, not the brokers the main thread restarts.
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), WORKLOAD_NICE)
        producer, session, fatal = self._producer()
        partition = 0
        next_at = time.monotonic()
        while not self.stopping.is_set():
            if fatal:  # an idempotent producer's fatal error: only a new producer can go on
                self.fatal.append(fatal[0].str())
                producer.flush(35)
                producer, session, fatal = self._producer()
            send = self.history.invoke(session, partition)
            try:
                producer.produce(
                    TOPIC, key=str(partition).encode(), value=str(send.value).encode(), partition=partition,
                    on_delivery=_callback(self.history, send),
                )  # fmt: skip
            except BufferError:
                send.outcome, send.error = "fail", "local queue full"
            partition = (partition + 1) % PARTITIONS
            producer.poll(0)
            next_at += self.interval
            pause = next_at - time.monotonic()
            if pause > 0:
                producer.poll(pause)  # pacing: serves delivery callbacks while waiting for the next send
            else:
                next_at = time.monotonic()
        producer.flush(PRODUCER_CONFIG["delivery.timeout.ms"] / 1000 + 5)


# --- what the brokers say -------------------------------------------------------------------------


def partition_states(cluster: Cluster, broker: int, timeout: float = 1.0) -> dict[int, tuple[int, list[int]]]:
    """``{partition: (leader, isr)}`` of ``TOPIC`` as ``broker`` sees it; raises ``OSError``."""
    response = cluster.metadata(broker, [TOPIC], timeout)
    [topic] = response.topics
    return {p.partition_index: (p.leader_id, sorted(p.isr_nodes)) for p in topic.partitions}


def wait_until(
    cluster: Cluster, brokers: list[int], done: Callable[[dict[int, tuple[int, list[int]]]], bool], deadline_s: float
) -> float | None:
    """Seconds until every one of ``brokers`` reports a state for which ``done`` holds (None: deadline)."""
    start = time.monotonic()
    pending = set(brokers)
    while time.monotonic() - start < deadline_s:
        for broker in sorted(pending):
            try:
                states = partition_states(cluster, broker)
            except (OSError, ValueError):  # restarting, frozen or topic not known yet
                continue
            if len(states) == PARTITIONS and done(states):
                pending.discard(broker)
        if not pending:
            return time.monotonic() - start
        time.sleep(POLL_INTERVAL_S)
    return None


def all_led_by(live: set[int]) -> Callable[[dict[int, tuple[int, list[int]]]], bool]:
    return lambda states: all(leader in live for leader, _ in states.values())


def none_in_isr(node: int) -> Callable[[dict[int, tuple[int, list[int]]]], bool]:
    return lambda states: all(node not in isr for _, isr in states.values())


def full_isr(states: dict[int, tuple[int, list[int]]]) -> bool:
    return all(leader >= 0 and len(isr) == REPLICATION_FACTOR for leader, isr in states.values())


def current_states(cluster: Cluster, live: list[int]) -> dict[int, tuple[int, list[int]]]:
    for broker in live:
        try:
            return partition_states(cluster, broker)
        except OSError:
            continue
    raise RuntimeError("no live broker answered Metadata")


# --- the run --------------------------------------------------------------------------------------


class Prober:
    """Times how soon partitions take acks=all writes again, with a fresh idempotent producer per
    fault bootstrapped from the live brokers only (a long-lived client's stale connections to a
    frozen broker would measure the client, not the cluster)."""

    def __init__(self, history: History) -> None:
        self.history = history
        self.rounds = 0

    def until_written(self, bootstrap: str, partitions: list[int], start: float, deadline_s: float) -> float | None:
        """Send one value to each partition (again after a failure); seconds from ``start`` until all are ok."""
        self.rounds += 1
        session = f"probe-{self.rounds}"
        producer = Producer({**client_config(bootstrap), **PRODUCER_CONFIG, "client.id": session})
        remaining = set(partitions)
        in_flight: dict[int, Send] = {}
        try:
            while remaining and time.monotonic() - start < deadline_s:
                for partition in sorted(remaining - in_flight.keys()):
                    send = self.history.invoke(session, partition)
                    producer.produce(
                        TOPIC, key=str(partition).encode(), value=str(send.value).encode(), partition=partition,
                        on_delivery=_callback(self.history, send),
                    )  # fmt: skip
                    in_flight[partition] = send
                producer.poll(POLL_INTERVAL_S)
                for partition, send in list(in_flight.items()):
                    if send.outcome == "ok":
                        remaining.discard(partition)
                    if send.outcome != "pending":
                        del in_flight[partition]
            return None if remaining else time.monotonic() - start
        finally:
            producer.flush(PRODUCER_CONFIG["delivery.timeout.ms"] / 1000 + 5)


def create_topic(cluster: Cluster) -> None:
    admin = AdminClient(client_config(cluster.bootstrap))
    topic = NewTopic(TOPIC, PARTITIONS, REPLICATION_FACTOR, config={"min.insync.replicas": "2"})
    admin.create_topics([topic])[TOPIC].result(30)
    if wait_until(cluster, cluster.broker_ids, full_isr, ISR_DEADLINE_S) is None:
        raise RuntimeError(f"topic {TOPIC} did not get a leader and a full ISR everywhere")


def inject(cluster: Cluster, fault: Fault, pause_s: float, prober: Prober) -> None:
    """Fail ``fault.node``, time the failover, bring it back and time the ISR restore."""
    live = sorted(set(cluster.broker_ids) - {fault.node})
    resumer = threading.Timer(pause_s, cluster.resume, [fault.node])
    start = time.monotonic()
    if fault.kind == "kill":
        cluster.kill(fault.node)
    else:
        cluster.pause(fault.node)
        resumer.start()  # SIGCONT after exactly pause_s, whatever the measurements below take
    fault.leader_s = wait_until(cluster, live, all_led_by(set(live)), LEADER_DEADLINE_S)
    # A paused victim comes back at pause_s and may rightly rejoin, so only look until then.
    shrink_deadline = LEADER_DEADLINE_S if fault.kind == "kill" else pause_s - (time.monotonic() - start)
    if wait_until(cluster, live, none_in_isr(fault.node), shrink_deadline) is not None:
        fault.isr_shrink_s = time.monotonic() - start
    bootstrap = ",".join(f"{cluster.host(b)}:{cluster.port(b)}" for b in live)
    fault.probe_s = prober.until_written(bootstrap, fault.formerly_led, start, LEADER_DEADLINE_S)
    if fault.kind == "kill":
        back = time.monotonic()
        cluster.start_node(fault.node)
    else:
        resumer.join()
        back = start + pause_s
        fault.paused_s = pause_s
    if wait_until(cluster, cluster.broker_ids, full_isr, ISR_DEADLINE_S) is not None:
        fault.isr_s = time.monotonic() - back  # from the restart (or SIGCONT), so it includes start-up
    fault_line = {k: (round(v, 3) if isinstance(v, float) else v) for k, v in asdict(fault).items()}
    print(f"failover: {json.dumps(fault_line)}", file=sys.stderr, flush=True)


def drain(bootstrap: str) -> dict[tuple[int, int], int]:
    """Every record of every partition, from the start to the high watermark: ``{(partition, offset): value}``."""
    consumer = Consumer({
        **client_config(bootstrap), "group.id": "failover-drain", "enable.auto.commit": False,
        "isolation.level": "read_committed", "enable.partition.eof": True, "auto.offset.reset": "earliest",
    })  # fmt: skip
    try:
        high = {p: consumer.get_watermark_offsets(TopicPartition(TOPIC, p), timeout=30)[1] for p in range(PARTITIONS)}
        consumer.assign([TopicPartition(TOPIC, p, 0) for p in range(PARTITIONS)])
        position = dict.fromkeys(range(PARTITIONS), 0)
        read: dict[tuple[int, int], int] = {}
        start = time.monotonic()
        while any(position[p] < high[p] for p in position) and time.monotonic() - start < DRAIN_DEADLINE_S:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            if msg.error() is not None:
                if msg.error().code() == KafkaError._PARTITION_EOF:
                    continue
                raise RuntimeError(f"drain: {msg.error()}")
            read[(msg.partition(), msg.offset())] = int(msg.value())
            position[msg.partition()] = msg.offset() + 1
        short = {p: (position[p], high[p]) for p in position if position[p] < high[p]}
        if short:
            raise RuntimeError(f"drain did not reach the high watermark: {short}")
        return read
    finally:
        consumer.close()


def check(sends: list[Send], read: dict[tuple[int, int], int]) -> dict[str, list[int]]:
    """The anomalies: lists of offending values (empty lists mean the run is clean)."""
    positions: dict[int, list[tuple[int, int]]] = defaultdict(list)
    for place, value in read.items():
        positions[value].append(place)
    sent = {s.value: s for s in sends}
    ok = [s for s in sends if s.outcome == "ok"]
    claimed: dict[tuple[int, int], list[int]] = defaultdict(list)
    for s in ok:
        if s.offset_known:
            claimed[(s.partition, s.offset)].append(s.value)

    def offset_of(s: Send) -> int | None:
        """Where ``s`` is: its acknowledged offset, or (acknowledged without one) where it was read."""
        if s.offset_known:
            return s.offset
        places = positions.get(s.value, [])
        return places[0][1] if len(places) == 1 and places[0][0] == s.partition else None

    read_elsewhere = [
        s for s in ok if s.offset_known and s.value in positions and (s.partition, s.offset) not in positions[s.value]
    ]
    nonmonotonic = []
    by_session: dict[tuple[str, int], list[Send]] = defaultdict(list)
    for s in ok:
        by_session[(s.session, s.partition)].append(s)
    for group in by_session.values():
        group.sort(key=lambda s: s.value)  # values are handed out in send order
        placed = [(s.value, offset) for s in group if (offset := offset_of(s)) is not None]
        nonmonotonic += [b for (_a, at_a), (b, at_b) in itertools.pairwise(placed) if at_b <= at_a]
    return {
        "lost": [s.value for s in ok if s.value not in positions],
        "duplicates": [v for v, places in positions.items() if len(places) > 1],
        "inconsistent": sorted(
            {s.value for s in read_elsewhere}
            | {v for values in claimed.values() if len(values) > 1 for v in values}
        ),
        "nonmonotonic": nonmonotonic,
        "failed_but_read": [s.value for s in sends if s.outcome == "fail" and s.value in positions],
        "unexpected": [v for v in positions if v not in sent],
    }


def _stats(times: list[float | None]) -> dict[str, Any]:
    got = [t for t in times if t is not None]
    return {
        "times": [None if t is None else round(t, 3) for t in times],
        "median": round(statistics.median(got), 3) if got else None,
        "max": round(max(got), 3) if got else None,
        "missed": len(times) - len(got),
    }


def run_failover(
    cluster: Cluster,
    kills: int = 20,
    pauses: int = 0,
    pause_s: float = 4.0,
    seed: int | None = None,
    rate: float = RATE_PER_S,
    out: Path | None = None,
) -> dict[str, Any]:
    """Run the workload with ``kills`` SIGKILLs then ``pauses`` SIGSTOPs of leaders; return (and write) the summary."""
    seed = random.SystemRandom().randrange(2**32) if seed is None else seed
    rng = random.Random(seed)
    create_topic(cluster)
    began = time.monotonic()
    history = History()
    stopping = threading.Event()
    workers = [
        ProducerWorker(f"producer-{i}", cluster.bootstrap, history, rate / PRODUCERS, stopping)
        for i in range(PRODUCERS)
    ]
    for worker in workers:
        worker.start()
    prober = Prober(history)
    faults: list[Fault] = []
    try:
        time.sleep(2.0)  # some traffic before the first fault
        for kind in ["kill"] * kills + ["pause"] * pauses:
            states = current_states(cluster, cluster.broker_ids)
            partition = rng.randrange(PARTITIONS)
            leader = states[partition][0]
            led = sorted(p for p, (lead, _) in states.items() if lead == leader)
            fault = Fault(kind, leader, partition, led)
            faults.append(fault)
            inject(cluster, fault, pause_s, prober)
            if fault.isr_s is None:
                break  # the cluster did not heal; later faults would measure nothing useful
    finally:
        stopping.set()
        for worker in workers:
            worker.join()
    load_s = time.monotonic() - began
    read = drain(cluster.bootstrap)
    anomalies = check(history.sends, read)
    outcomes = defaultdict(int)
    for s in history.sends:
        outcomes[s.outcome] += 1
    summary: dict[str, Any] = {
        "target": cluster.name,
        "seed": seed,
        "kills": sum(f.kind == "kill" for f in faults),
        "pauses": sum(f.kind == "pause" for f in faults),
        "faults": [asdict(f) for f in faults],
        "failover_leader_s": _stats([f.leader_s for f in faults]),
        "failover_probe_s": _stats([f.probe_s for f in faults]),
        "isr_shrink_s": _stats([f.isr_shrink_s for f in faults]),
        "isr_restore_s": _stats([f.isr_s for f in faults]),
        "load_s": round(load_s, 1),
        "sends": len(history.sends),
        "sends_per_s": round(len(history.sends) / load_s, 1),
        "ok": outcomes["ok"],
        "failed": outcomes["fail"],
        "indefinite": outcomes["info"],
        "pending": outcomes["pending"],
        "fatal_producer_errors": [e for w in workers for e in w.fatal],
        "read": len(read),
        **{name: len(values) for name, values in anomalies.items()},
        "examples": {name: values[:20] for name, values in anomalies.items() if values},
    }
    if out is not None:
        Path(out).write_text(json.dumps(summary, indent=2) + "\n")
    return summary


def one_line(summary: dict[str, Any]) -> str:
    """The human summary of a run."""
    lead, probe, isr = summary["failover_leader_s"], summary["failover_probe_s"], summary["isr_restore_s"]
    shrink = summary["isr_shrink_s"]
    return (
        f"{summary['target']}: {summary['kills']} kills + {summary['pauses']} pauses; failover leader "
        f"median {lead['median']} s max {lead['max']} s, ISR shrink max {shrink['max']} s (missed {shrink['missed']}), "
        f"probe median {probe['median']} s max {probe['max']} s; ISR restore median {isr['median']} s "
        f"max {isr['max']} s; sends ok {summary['ok']} failed {summary['failed']} indefinite "
        f"{summary['indefinite']} pending {summary['pending']} ({summary['sends_per_s']}/s); lost {summary['lost']} "
        f"duplicates {summary['duplicates']} inconsistent {summary['inconsistent']} nonmonotonic "
        f"{summary['nonmonotonic']} failed-but-read {summary['failed_but_read']} (seed {summary['seed']})"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m compat.failover", description=__doc__.split("\n\n")[0])
    parser.add_argument("--target", choices=["kafka", "kbroker"], required=True)
    parser.add_argument("--kills", type=int, default=20)
    parser.add_argument("--pauses", type=int, default=0)
    parser.add_argument("--pause-s", type=float, default=4.0)
    parser.add_argument("--seed", type=int)
    parser.add_argument("--rate", type=float, default=RATE_PER_S, help="records/s over all producers")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="a setting of every node, over compat.cluster's (repeatable)")
    parser.add_argument("--topology", default="isolated", help="compat.cluster's layout: isolated, combined, mixed")
    parser.add_argument("--workdir", type=Path, help="cluster data and logs (default: a new temporary directory)")
    parser.add_argument("--out", type=Path, default=Path("failover.json"))
    args = parser.parse_args(argv)
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix=f"failover-{args.target}-"))
    workdir.mkdir(parents=True, exist_ok=True)
    logging.basicConfig(filename=workdir / "clients.log", level=logging.INFO, format="%(asctime)s %(message)s")
    print(f"failover: cluster and client logs in {workdir}", file=sys.stderr, flush=True)
    extra = dict(item.split("=", 1) for item in args.set)
    with make_cluster(args.target, workdir, extra, topology=args.topology) as cluster:
        summary = run_failover(cluster, args.kills, args.pauses, args.pause_s, args.seed, args.rate, args.out)
    print(one_line(summary))
    clean = all(summary[k] == 0 for k in ("lost", "duplicates", "inconsistent", "nonmonotonic", "failed_but_read"))
    return 0 if clean else 1


if __name__ == "__main__":
    sys.exit(main())
