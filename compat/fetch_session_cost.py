"""What a fetch session saves on an idle fetch of many partitions: request and answer bytes and
the broker's CPU per fetch, sessionless (every partition named and answered, as before KIP-227)
against incremental (nothing changed: nothing named, nothing answered).

One kbroker node with a topic of ``--partitions`` partitions, nothing produced; a client fetches
every partition with max_wait 0, alternating rounds of sessionless and incremental fetches so the
machine's other load falls on both alike; the broker's CPU is its process's user+system time.

    python -m compat.fetch_session_cost [--partitions 1000] [--fetches 200] [--rounds 3]

``--cluster``: the follower side instead. Three brokers (and a controller) hold the partitions
at replication factor 3 and sit idle, each follower fetching from each leader (a long poll of
replica.fetch.wait.max.ms, 500 ms); the brokers' CPU over ``--idle-s`` seconds with fetch
sessions off (max.incremental.fetch.session.cache.slots=0: every fetch full, as before) and on
(the default), alternating per round.

    python -m compat.fetch_session_cost --cluster [--partitions 1000] [--idle-s 20] [--rounds 2]
"""

from __future__ import annotations

import argparse
import datetime
import os
import socket
import struct
import time
import uuid
from typing import Any

from kbroker.protocol.codec import decode_response, encode_request
from kio.schema.fetch.v16 import request as fetch_v16

from kbroker.testing import kafka_broker, kafka_cluster

FETCH = 1
VERSION = 16
TOPIC = "fetch-session-cost"


def _cpu_s(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class _Fetcher:
    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=30)
        self.correlation = 0

    def fetch(self, body: fetch_v16.FetchRequest) -> tuple[Any, int, int]:
        """The answer, the request's bytes and the answer's bytes."""
        self.correlation += 1
        frame = encode_request(FETCH, VERSION, self.correlation, "fetch-session-cost", body)
        self.sock.sendall(frame)
        size = struct.unpack(">i", self._read(4))[0]
        _id, value = decode_response(FETCH, VERSION, self._read(size))
        return value, len(frame), size + 4

    def _read(self, n: int) -> bytes:
        out = bytearray()
        while len(out) < n:
            chunk = self.sock.recv(n - len(out))
            if not chunk:
                raise EOFError("the broker closed the connection")
            out += chunk
        return bytes(out)


def _request(topic_id: uuid.UUID, partitions: int, session_id: int, epoch: int, name_all: bool) -> Any:
    named = (fetch_v16.FetchTopic(topic_id=topic_id, partitions=tuple(
        fetch_v16.FetchPartition(partition=p, fetch_offset=0, partition_max_bytes=1 << 20)
        for p in range(partitions))),)
    return fetch_v16.FetchRequest(max_wait=datetime.timedelta(0), min_bytes=1, session_id=session_id,
                                  session_epoch=epoch, topics=named if name_all else (), forgotten_topics_data=())


def measure(partitions: int, fetches: int, rounds: int) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    with kafka_broker() as broker:
        broker.create_topic(TOPIC, partitions=partitions, timeout=120)
        topic_id = broker.metadata([TOPIC]).topics[0].topic_id
        assert broker.pid is not None
        client = _Fetcher(broker.port)
        sessionless = _request(topic_id, partitions, 0, -1, True)
        opened, _, _ = client.fetch(_request(topic_id, partitions, 0, 0, True))
        session_id, epoch = opened.session_id, 1
        assert session_id != 0, "no session opened"
        for _round in range(rounds):
            for mode in ("sessionless", "incremental"):
                before = _cpu_s(broker.pid)
                start = time.monotonic()
                for _ in range(fetches):
                    if mode == "sessionless":
                        answer, sent, got = client.fetch(sessionless)
                    else:
                        answer, sent, got = client.fetch(_request(topic_id, partitions, session_id, epoch, False))
                        epoch += 1
                    assert answer.error_code == 0
                rows.append({"mode": mode, "request_bytes": sent, "response_bytes": got,
                             "broker_cpu_ms_per_fetch": (_cpu_s(broker.pid) - before) * 1000 / fetches,
                             "wall_ms_per_fetch": (time.monotonic() - start) * 1000 / fetches,
                             "load1": os.getloadavg()[0]})
    return rows


def measure_cluster(partitions: int, idle_s: float, rounds: int) -> list[dict[str, Any]]:
    """Idle CPU of three brokers replicating ``partitions`` partitions, sessions off and on."""
    rows: list[dict[str, Any]] = []
    for _round in range(rounds):
        for slots in (0, 1000):
            with kafka_cluster(3, **{"max.incremental.fetch.session.cache.slots": slots}) as cluster:
                cluster.create_topic(TOPIC, partitions=partitions, replication_factor=3, timeout=300)
                time.sleep(idle_s / 2)  # followers settle: sessions opened, nothing left to copy
                pids = [b.pid for b in cluster.brokers if b.pid is not None]
                before = sum(_cpu_s(pid) for pid in pids)
                time.sleep(idle_s)
                cores = (sum(_cpu_s(pid) for pid in pids) - before) / idle_s
                rows.append({"sessions": "on" if slots else "off", "cores": cores, "load1": os.getloadavg()[0]})
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--partitions", type=int, default=1000)
    parser.add_argument("--fetches", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--cluster", action="store_true", help="the follower side: an idle RF-3 cluster")
    parser.add_argument("--idle-s", type=float, default=20.0)
    args = parser.parse_args()
    if args.cluster:
        # 6 follower fetch streams (3 brokers x 2 leaders), each one fetch per 500 ms long poll when idle.
        fetches_per_s = 6 / 0.5
        print(f"3 brokers, {args.partitions} partitions x RF 3, idle {args.idle_s:.0f} s")
        print("sessions  brokers' CPU (cores)  ms CPU per follower fetch (at 12 fetches/s)  load1")
        for row in measure_cluster(args.partitions, args.idle_s, args.rounds):
            print(f"{row['sessions']:<9} {row['cores']:>20.3f} {row['cores'] * 1000 / fetches_per_s:>44.2f} "
                  f"{row['load1']:>6.1f}")
        return
    print(f"{args.partitions} partitions, idle, {args.fetches} fetches per round, max_wait 0")
    print("mode         request B  response B  broker CPU ms/fetch  wall ms/fetch  load1")
    for row in measure(args.partitions, args.fetches, args.rounds):
        print(f"{row['mode']:<12} {row['request_bytes']:>9} {row['response_bytes']:>11} "
              f"{row['broker_cpu_ms_per_fetch']:>20.3f} {row['wall_ms_per_fetch']:>14.3f} {row['load1']:>6.1f}")


if __name__ == "__main__":
    main()
