"""The quota measurement of issue #18: a producer limited to 1 MiB/s gets 1 MiB/s ± 10 %, and an
unlimited producer on the same broker is unaffected.

For each broker (kbroker, then Apache Kafka 4.3.1 with the same server.properties): start it,
create a topic, give the client id ``limited`` ``producer_byte_rate=1048576`` (AlterClientQuotas,
raw), then

1. the unlimited producer alone for ``--seconds``: its rate;
2. both producers together for ``--seconds``: each one's rate.

Rates are counted from ``--warmup`` seconds into a phase: the quota's 11 one-second windows let
a new client send ~10 MiB at once before its first throttle (as on Kafka), so the start is not
the steady rate. A rate is acknowledged value bytes per second (confluent-kafka, acks=all,
10 KiB values, each producer in a process of its own sending as fast as it may). The broker
counts whole request bytes, so the limited producer's value rate sits a little under the quota.

    .venv/bin/python -m compat.quota_probe [--seconds 45] [--warmup 15] [--brokers kbroker,kafka]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import tempfile
import time
from pathlib import Path
from typing import Any

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from kio.schema.alter_client_quotas.v1 import request as alter_v1

from compat.scenarios.protocol import RawConnection
from compat.targets import KafkaTarget, KbrokerTarget, Target

TOPIC = "quota-probe"
QUOTA = 1048576
VALUE = b"x" * 10240
# The unlimited producer writes hundreds of MiB a second: keep a few segments only, deleted at
# once, checked every second (an earlier run without this filled the disk with ~50 GB).
TOPIC_CONFIGS = {"segment.bytes": str(64 * 2**20), "retention.bytes": str(256 * 2**20)}
BROKER_SETTINGS = {"log.retention.check.interval.ms": "1000", "log.segment.delete.delay.ms": "0"}


def set_quota(bootstrap: str, client_id: str, key: str, value: float | None) -> Any:
    conn = RawConnection(bootstrap)
    try:
        op = alter_v1.OpData(key=key, value=value or 0.0, remove=value is None)
        entry = alter_v1.EntryData(entity=(alter_v1.EntityData(entity_type="client-id", entity_name=client_id),),
                                   ops=(op,))
        return conn.request(49, 1, alter_v1.AlterClientQuotasRequest(entries=(entry,), validate_only=False))
    finally:
        conn.close()


def produce_for(bootstrap: str, client_id: str, seconds: float, out: Any) -> None:
    """One producer process: sends as fast as it may for ``seconds``, then puts
    (acknowledged (time, bytes) pairs, throttle times in ms) on ``out``."""
    acked: list[tuple[float, int]] = []
    throttled: list[int] = []
    producer = Producer({
        "bootstrap.servers": bootstrap, "client.id": client_id, "acks": "all", "linger.ms": 5,
        "queue.buffering.max.kbytes": 4096,
        "throttle_cb": lambda event: throttled.append(int(event.throttle_time * 1000)),
    })

    def on_delivery(err: Any, msg: Any) -> None:
        if err is None:
            acked.append((time.monotonic(), len(msg.value())))

    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            producer.produce(TOPIC, VALUE, on_delivery=on_delivery)
        except BufferError:
            producer.poll(0.05)  # the client's queue is full (it is being throttled): let it drain
            continue
        producer.poll(0)
    producer.flush(30)
    out.put((client_id, acked, throttled))


def run_together(bootstrap: str, client_ids: list[str], seconds: float) -> tuple[float, dict[str, Any]]:
    """Each client id's producer in a process of its own (no shared GIL), started together."""
    context = multiprocessing.get_context("spawn")
    out = context.Queue()
    processes = [context.Process(target=produce_for, args=(bootstrap, c, seconds, out)) for c in client_ids]
    started = time.monotonic()
    for p in processes:
        p.start()
    results = {}
    for _ in processes:
        client_id, acked, throttled = out.get(timeout=seconds + 120)
        results[client_id] = (acked, throttled)
    for p in processes:
        p.join()
    return started, results


def rate(acked: list[tuple[float, int]], start: float, end: float) -> float:
    return sum(n for t, n in acked if start <= t < end) / (end - start)


def measure(target: Target, seconds: float, warmup: float) -> dict[str, Any]:
    admin = AdminClient({"bootstrap.servers": target.bootstrap})
    admin.create_topics([NewTopic(TOPIC, 1, 1, config=TOPIC_CONFIGS)])[TOPIC].result(30)
    answer = set_quota(target.bootstrap, "limited", "producer_byte_rate", QUOTA)
    assert all(e.error_code == 0 for e in answer.entries), answer
    time.sleep(2)  # Kafka's brokers apply the committed quota a moment later (no read-back API waits for it)
    start, alone = run_together(target.bootstrap, ["unlimited"], seconds)
    solo_rate = rate(alone["unlimited"][0], start + warmup, start + seconds)
    start, both = run_together(target.bootstrap, ["unlimited", "limited"], seconds)
    (unlimited, unlimited_throttles), (limited, limited_throttles) = both["unlimited"], both["limited"]
    return {
        "unlimited_alone_MiBps": round(solo_rate / 2**20, 1),
        "unlimited_with_limited_MiBps": round(rate(unlimited, start + warmup, start + seconds) / 2**20, 1),
        "limited_MiBps": round(rate(limited, start + warmup, start + seconds) / 2**20, 3),
        "limited_throttle_events": len(limited_throttles),
        "limited_max_throttle_ms": max(limited_throttles, default=0),
        "unlimited_throttle_events": len(unlimited_throttles) + len(alone["unlimited"][1]),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=45.0, help="each phase's length")
    parser.add_argument("--warmup", type=float, default=15.0, help="not counted at the start of a phase")
    parser.add_argument("--brokers", default="kbroker,kafka")
    args = parser.parse_args()
    results = {}
    with tempfile.TemporaryDirectory(prefix="quota-probe-") as tmp:
        for name in args.brokers.split(","):
            target: Target = (KbrokerTarget if name == "kbroker" else KafkaTarget)(Path(tmp) / name,
                                                                                 extra=BROKER_SETTINGS)
            target.start()
            try:
                results[name] = measure(target, args.seconds, args.warmup)
            finally:
                target.stop()
            print(name, json.dumps(results[name]), flush=True)


if __name__ == "__main__":
    main()
