"""Pipeline 3: feed realistic shopping events into a topic, with a progress bar.

Events are JSON objects ``{"event_id", "user_id", "kind", "amount", "event_time"}`` keyed by
user id. The stream is deterministic for a seed, so tests can compute the expected aggregates:
event times advance by ``interval_ms`` per event with up to ``jitter_ms`` of lateness (events
arrive slightly out of order, as real clicks do), users follow a skewed popularity, and only
purchases carry an amount. Each record's Kafka timestamp is its event time (CreateTime), so the
topic can be replayed by time (``batch_replay``).

    python -m kbroker.spark.generator --bootstrap localhost:9092 --topic events --events 100000
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from typing import TextIO

KINDS = ("view", "click", "add_to_cart", "purchase")
KIND_WEIGHTS = (60, 25, 10, 5)


@dataclass(frozen=True)
class Event:
    event_id: str
    user_id: str
    kind: str
    amount: float
    event_time: str  # ISO-8601 UTC with milliseconds, as JSON producers usually write it

    @property
    def event_time_ms(self) -> int:
        return int(datetime.fromisoformat(self.event_time).timestamp() * 1000)

    def to_json(self) -> bytes:
        return json.dumps(asdict(self), separators=(",", ":")).encode()


def iso_ms(epoch_ms: int) -> str:
    return datetime.fromtimestamp(epoch_ms / 1000, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def generate(
    count: int,
    *,
    seed: int = 1,
    start_ms: int = 1_767_225_600_000,
    interval_ms: int = 10,
    jitter_ms: int = 2000,
    users: int = 500,
) -> Iterator[Event]:
    """``count`` events starting at ``start_ms`` (default 2026-01-01T00:00Z), deterministic per ``seed``."""
    rng = random.Random(seed)
    for i in range(count):
        kind = rng.choices(KINDS, KIND_WEIGHTS)[0]
        user = int(users * rng.random() ** 2)  # a few users are far more active than the rest
        amount = round(rng.uniform(1, 200), 2) if kind == "purchase" else 0.0
        event_ms = start_ms + i * interval_ms - rng.randint(0, jitter_ms)
        yield Event(f"{seed}-{i}", f"user-{user:04d}", kind, amount, iso_ms(event_ms))


class ProgressBar:
    """A one-line bar on a terminal stream, redrawn at most every ``every_s`` seconds."""

    def __init__(self, total: int, label: str, stream: TextIO = sys.stderr, every_s: float = 0.2) -> None:
        self.total, self.label, self.stream, self.every_s = total, label, stream, every_s
        self.started = self.drawn = time.monotonic()

    def update(self, done: int, *, force: bool = False) -> None:
        now = time.monotonic()
        if not force and now - self.drawn < self.every_s:
            return
        self.drawn = now
        fraction = done / self.total if self.total else 1.0
        filled = int(30 * fraction)
        rate = done / max(now - self.started, 1e-9)
        self.stream.write(
            f"\r{self.label} [{'#' * filled}{'.' * (30 - filled)}] {done}/{self.total} ({fraction:4.0%}) {rate:,.0f}/s"
        )
        self.stream.flush()

    def finish(self, done: int) -> None:
        self.update(done, force=True)
        self.stream.write("\n")


def ensure_topic(bootstrap: str, topic: str, partitions: int) -> bool:
    """Create ``topic`` with ``partitions`` unless it exists; True when it was created."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    if topic in admin.list_topics(timeout=15).topics:
        return False
    try:
        admin.create_topics([NewTopic(topic, partitions)])[topic].result(30)
    except KafkaException as exc:
        if exc.args[0].name() != "TOPIC_ALREADY_EXISTS":
            raise
        return False
    return True


def produce(
    bootstrap: str,
    topic: str,
    events: Iterator[Event],
    total: int,
    *,
    progress: bool = True,
    config: dict[str, object] | None = None,
) -> int:
    """Send ``events`` keyed by user with an idempotent, acks=all producer; return how many
    were acknowledged (raises if any delivery failed)."""
    from confluent_kafka import Producer

    producer = Producer({
        "bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all",
        "linger.ms": 20, "compression.type": "lz4", **(config or {}),
    })  # fmt: skip
    failures: list[str] = []
    acked = 0

    def delivered(error: object, _msg: object) -> None:
        nonlocal acked
        if error is not None:
            failures.append(str(error))
        else:
            acked += 1

    bar = ProgressBar(total, f"producing to {topic}") if progress else None
    for sent, event in enumerate(events, 1):
        while True:
            try:
                producer.produce(topic, event.to_json(), event.user_id.encode(),
                                 timestamp=event.event_time_ms, on_delivery=delivered)  # fmt: skip
                break
            except BufferError:  # the local queue is full: let deliveries drain it
                producer.poll(0.05)
        producer.poll(0)
        if bar:
            bar.update(sent)
    remaining = producer.flush(60)
    if bar:
        bar.finish(acked)
    if failures or remaining:
        raise RuntimeError(f"{len(failures)} deliveries failed, {remaining} unconfirmed; first: {failures[:1]}")
    return acked


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kbroker.spark.generator", description=__doc__.split("\n\n")[0])
    parser.add_argument("--bootstrap", default="localhost:9092")
    parser.add_argument("--topic", default="events")
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--partitions", type=int, default=3, help="partitions when the topic is created")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--start", default=None, help="event time of the first event (ISO-8601; default: now)")
    parser.add_argument("--interval-ms", type=int, default=10, help="event-time step between events")
    args = parser.parse_args(argv)
    start = datetime.fromisoformat(args.start) if args.start else datetime.now(UTC)
    start_ms = int(start.timestamp() * 1000)
    if ensure_topic(args.bootstrap, args.topic, args.partitions):
        print(f"created topic {args.topic} with {args.partitions} partitions")
    events = generate(args.events, seed=args.seed, start_ms=start_ms, interval_ms=args.interval_ms)
    acked = produce(args.bootstrap, args.topic, events, args.events)
    print(f"{acked} events acknowledged on {args.topic} ({iso_ms(start_ms)} onwards)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
