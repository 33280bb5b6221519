"""Which fetch sessions (KIP-227) each client uses, against Apache Kafka 4.3.1 and against
kbroker: the same clients, the same steps, the Fetch session ids and epochs recorded on the wire.

Each broker runs behind a ``WireTap`` it advertises (advertised.listeners), one broker at a time,
Kafka first. On a 3-partition topic holding 20 records per partition, Kafka's console consumer
(Java client, ``--partition 0``), a confluent-kafka (librdkafka) consumer and a kafka-python
consumer (Fetch v12: sessions keyed by topic name), both assigned all three partitions, read
everything and then idle for ``IDLE_S`` seconds with fetch.wait.max.ms 200, so each sends a run
of fetches after its first. Printed: each client's session steps (``wire_tap.session_pattern``)
on both brokers and whether they are the same.

    python -m compat.scenarios.fetch_sessions

Not among the parity suite's scenario modules (``MODULES``): it needs its own brokers behind a tap.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaConsumer
from kafka import TopicPartition as KafkaTopicPartition

from compat.deps import kafka_classpath
from compat.targets import KafkaTarget, KbrokerTarget, Target, free_port
from compat.wire_tap import FetchExchange, WireTap, session_pattern

TOPIC = "fetch-sessions"
PARTITIONS = 3
RECORDS_PER_PARTITION = 20
IDLE_S = 3.0
FETCH_WAIT_MS = "200"
JAVA_CLIENT_ID = "java-console-consumer"
CONFLUENT_CLIENT_ID = "confluent-consumer"
KAFKA_PYTHON_CLIENT_ID = "kafka-python-consumer"
CLIENTS = (JAVA_CLIENT_ID, CONFLUENT_CLIENT_ID, KAFKA_PYTHON_CLIENT_ID)
CONSOLE_CONSUMER = "org.apache.kafka.tools.consumer.ConsoleConsumer"
JVM_FLAGS = ["-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1"]


def fill(bootstrap: str) -> None:
    """The topic, with RECORDS_PER_PARTITION records in each partition."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)])[TOPIC].result(30)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    deadline = time.monotonic() + 30
    while True:  # the topic's leaders may take a moment to be known through metadata
        try:
            for p in range(PARTITIONS):
                for i in range(RECORDS_PER_PARTITION):
                    producer.produce(TOPIC, value=f"v{i}".encode(), partition=p)
            break
        except Exception:
            if time.monotonic() > deadline:
                raise
            producer.poll(0.1)
    if producer.flush(30) != 0:
        raise RuntimeError("records not acknowledged")


def java_console_consumer(bootstrap: str) -> int:
    """Kafka's console consumer reads partition 0 from the start, then idles until IDLE_S;
    returns how many records it printed."""
    done = subprocess.run([
        shutil.which("java") or "java", *JVM_FLAGS, "-cp", kafka_classpath(), CONSOLE_CONSUMER,
        "--bootstrap-server", bootstrap, "--topic", TOPIC, "--partition", "0", "--offset", "earliest",
        "--timeout-ms", str(int(IDLE_S * 1000)),
        "--consumer-property", f"client.id={JAVA_CLIENT_ID}",
        "--consumer-property", f"fetch.max.wait.ms={FETCH_WAIT_MS}",
    ], capture_output=True, timeout=120, check=False)  # exits 0 or 1 on the idle timeout alike
    # Without a log4j file the tool's own log lines share standard output with the records.
    return sum(1 for line in done.stdout.splitlines() if re.fullmatch(rb"v\d+", line))


def confluent_consumer(bootstrap: str) -> int:
    """librdkafka reads all three partitions from the start, then keeps polling for IDLE_S;
    returns how many records it read."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "fetch-sessions", "client.id": CONFLUENT_CLIENT_ID,
                         "enable.auto.commit": False, "fetch.wait.max.ms": int(FETCH_WAIT_MS)})
    try:
        consumer.assign([TopicPartition(TOPIC, p, 0) for p in range(PARTITIONS)])
        wanted = PARTITIONS * RECORDS_PER_PARTITION
        got = 0
        deadline = time.monotonic() + 60
        while got < wanted and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                got += 1
        idle_until = time.monotonic() + IDLE_S
        while time.monotonic() < idle_until:
            consumer.poll(0.2)
    finally:
        consumer.close()
    return got


def kafka_python_consumer(bootstrap: str) -> int:
    """kafka-python (Fetch v12, topics by name) reads all three partitions, then polls for IDLE_S;
    returns how many records it read."""
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, client_id=KAFKA_PYTHON_CLIENT_ID,
                             fetch_max_wait_ms=int(FETCH_WAIT_MS), enable_auto_commit=False)
    try:
        consumer.assign([KafkaTopicPartition(TOPIC, p) for p in range(PARTITIONS)])
        consumer.seek_to_beginning()
        wanted = PARTITIONS * RECORDS_PER_PARTITION
        got = 0
        deadline = time.monotonic() + 60
        while got < wanted and time.monotonic() < deadline:
            got += sum(len(records) for records in consumer.poll(500).values())
        idle_until = time.monotonic() + IDLE_S
        while time.monotonic() < idle_until:
            consumer.poll(200)
    finally:
        consumer.close()
    return got


def observe(make_target: Callable[[Path, dict[str, str]], Target], workdir: Path) -> dict[str, list[FetchExchange]]:
    """Run both clients against one broker behind a tap; their Fetch exchanges by client."""
    tap_port = free_port()
    target = make_target(workdir, {"advertised.listeners": f"PLAINTEXT://127.0.0.1:{tap_port}"})
    tap = WireTap(tap_port, target.port)
    tap.start()
    try:
        target.start()
        bootstrap = f"127.0.0.1:{tap_port}"
        fill(bootstrap)
        java_console_consumer(bootstrap)
        confluent_consumer(bootstrap)
        kafka_python_consumer(bootstrap)
        return {client: tap.fetches(client) for client in CLIENTS}
    finally:
        target.close()
        tap.close()


def main() -> None:
    root = Path(tempfile.mkdtemp(prefix="fetch-sessions-"))
    try:
        seen = {
            "Kafka 4.3.1": observe(lambda d, extra: KafkaTarget(d, extra=extra), root / "kafka"),
            "kbroker": observe(lambda d, extra: KbrokerTarget(d, extra=extra), root / "kbroker"),
        }
    finally:
        shutil.rmtree(root, ignore_errors=True)
    same = True
    for client in CLIENTS:
        patterns = {broker: session_pattern(by_client[client]) for broker, by_client in seen.items()}
        for broker, by_client in seen.items():
            fetches = by_client[client]
            incremental = [e for e in fetches if e.epoch > 0]
            epochs = [e.epoch for e in fetches]
            print(f"{client} -> {broker}: {len(fetches)} fetches, {len(incremental)} incremental "
                  f"(partitions named per incremental fetch: {sorted({e.partitions_named for e in incremental})}); "
                  f"epochs {epochs[:8]}{'...' if len(epochs) > 8 else ''}; steps {patterns[broker]}")
        match = len(set(map(tuple, patterns.values()))) == 1
        same = same and match
        print(f"{client}: {'same session steps on both' if match else 'DIFFERENT session steps'}")
    raise SystemExit(0 if same else 1)


if __name__ == "__main__":
    main()
