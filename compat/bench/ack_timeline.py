"""``python -m compat.bench.ack_timeline``: where the time of one acks=all produce goes on a kbroker cluster.

A debugging tool, not a benchmark. It starts the ``compat.cluster`` kbroker cluster (1 controller
+ 3 brokers) with ``KBROKER_TRACE=1``, so every broker writes its ``kbroker.trace`` stage lines
(``replication/stage_trace.py``) into its log; creates an RF-3 topic (min.insync.replicas=2);
warms up with a burst of acks=all records through the same producer (connections, leader
lookup, page cache, fetch loops running); then sends ``--records`` single records to partition 0,
each after ``--gap-ms`` of quiet, waiting for each acknowledgement. For each record it prints one
timeline, in ms from ``produce()``, merging the client's clock with the brokers' lines (all on
CLOCK_MONOTONIC):

    client produce() → leader: Produce received → leader append (parked fetches to wake) →
    each follower: the fetch that carried the record sent / answered, its follower append, its
    next fetch sent → leader: that follower's position past the record → high watermark advance
    → the follower fetch that advanced it answered, its response's write returned → Produce
    answered → client: acknowledgement; the Produce response's write returned (a write to a
    local peer can return after the peer has run: on a busy machine the woken reader takes the
    writer's core)

and, after the timelines, the median of each stage over the records.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from compat.bench.replicated import create_topic
from compat.cluster import Cluster, make_cluster

LINE = re.compile(r"kbroker\.trace: stage=(\w+) t_ns=(\d+) ?(.*)$")


@dataclass
class Stage:
    node: int
    name: str
    t_ns: int
    fields: dict[str, str] = field(default_factory=dict)

    def int(self, key: str) -> int:
        return int(self.fields[key])


def read_stages(cluster: Cluster) -> list[Stage]:
    """Every ``kbroker.trace`` line of every broker's log, in time order."""
    stages = []
    for node_id in cluster.broker_ids:
        for line in cluster.nodes[node_id].log.read_text(errors="replace").splitlines():
            match = LINE.search(line)
            if match:
                fields = dict(kv.split("=", 1) for kv in match.group(3).split() if "=" in kv)
                stages.append(Stage(node_id, match.group(1), int(match.group(2)), fields))
    return sorted(stages, key=lambda s: s.t_ns)


def _first(stages: list[Stage], after: int, **match: Any) -> Stage | None:
    for s in stages:
        if s.t_ns >= after and all(test(s) for test in match.values()):
            return s
    return None


def _last(stages: list[Stage], before: int, **match: Any) -> Stage | None:
    found = None
    for s in stages:
        if s.t_ns > before:
            break
        if all(test(s) for test in match.values()):
            found = s
    return found


def timeline(stages: list[Stage], tp: str, offset: int, sent_ns: int, acked_ns: int,
             followers: list[int]) -> list[tuple[int, str, str]]:
    """(ns since produce(), where, what) for the record at ``offset`` of ``tp``."""
    rows: list[tuple[int, str, str]] = [(0, "client", "produce()")]

    def add(stage: Stage | None, text: str) -> None:
        if stage is not None:
            rows.append((stage.t_ns - sent_ns, f"broker {stage.node}", text))

    append = _first(stages, sent_ns, name=lambda s: s.name == "leader_append",
                    tp=lambda s: s.fields.get("tp") == tp, at=lambda s: s.int("first") <= offset <= s.int("last"))
    if append is None:
        return [*rows, (acked_ns - sent_ns, "client", "acknowledged (no trace of the leader's append found)")]
    leader = append.node
    on_leader = {"node": lambda s: s.node == leader}
    add(_last(stages, append.t_ns, name=lambda s: s.name == "produce_received", **on_leader), "Produce received")
    add(append, f"leader append offset {offset} (hw {append.fields['hw']}, "
                f"{append.fields['fetches_parked']} parked fetches to wake)")
    for f in followers:
        if f == leader:
            continue
        mine = {"node": lambda s, f=f: s.node == f}
        link = {**mine, "leader": lambda s: s.fields.get("leader") == str(leader)}  # f's fetcher of this leader
        copied = _first(stages, append.t_ns, name=lambda s: s.name == "follower_append",
                        tp=lambda s: s.fields.get("tp") == tp, at=lambda s: s.int("first") <= offset <= s.int("last"),
                        **mine)
        if copied is None:
            rows.append((acked_ns - sent_ns, f"broker {f}", "never copied the record while traced"))
            continue
        answered = _last(stages, copied.t_ns, name=lambda s: s.name == "fetch_answered", **link)
        if answered is not None:
            add(_last(stages, answered.t_ns, name=lambda s: s.name == "fetch_sent", **link),
                "fetch sent (the one that carries the record)")
            add(answered, "fetch answered")
        add(copied, f"follower append offset {offset}")
        add(_first(stages, copied.t_ns, name=lambda s: s.name == "fetch_sent", **link), "next fetch sent")
        add(_first(stages, copied.t_ns, name=lambda s: s.name == "follower_position", **on_leader,
                   tp=lambda s: s.fields.get("tp") == tp,
                   who=lambda s, f=f: s.fields.get("replica") == str(f) and s.int("fetch_offset") > offset),
            f"broker {f}'s fetch position past {offset}")
    hw = _first(stages, append.t_ns, name=lambda s: s.name == "hw_advance", **on_leader,
                tp=lambda s: s.fields.get("tp") == tp, past=lambda s: s.int("hw") > offset)
    add(hw, f"high watermark → {hw.fields['hw'] if hw else '?'}")
    if hw is not None:
        # the follower fetch whose position advanced the high watermark: the rest of its handling
        # and its response run before the delayed produce's task can resume
        fetch = _last(stages, hw.t_ns, name=lambda s: s.name == "request_received", **on_leader,
                      key=lambda s: s.fields.get("api_key") == "1")
        if fetch is not None:
            same = {"peer": lambda s: s.fields.get("peer") == fetch.fields["peer"]}
            handled = _first(stages, hw.t_ns, name=lambda s: s.name == "request_handled", **on_leader, **same,
                             corr=lambda s: s.fields.get("correlation_id") == fetch.fields["correlation_id"])
            add(handled, "the fetch that advanced it answered")
            if handled is not None:
                add(_first(stages, handled.t_ns, name=lambda s: s.name == "responses_written", **on_leader, **same),
                    "the fetch that advanced it: its write returned")
        answered = _first(stages, hw.t_ns, name=lambda s: s.name == "produce_answered", **on_leader)
        add(answered, "Produce answered")
        if answered is not None:
            handled = _first(stages, answered.t_ns, name=lambda s: s.name == "request_handled", **on_leader,
                             corr=lambda s: s.fields.get("correlation_id") == answered.fields["correlation_id"],
                             key=lambda s: s.fields.get("api_key") == "0")
            if handled is not None:
                add(_first(stages, handled.t_ns, name=lambda s: s.name == "responses_written", **on_leader,
                           peer=lambda s: s.fields.get("peer") == handled.fields["peer"]),
                    "Produce response: its write returned")
    rows.append((acked_ns - sent_ns, "client", "acknowledged (delivery report)"))
    return sorted(rows)


def stage_label(text: str) -> str:
    """A row's stage without its numbers, to take medians over records."""
    return re.sub(r"\d+", "#", text.split(" (")[0])


def run(args: argparse.Namespace) -> str:
    from confluent_kafka import Producer

    out = [f"kbroker ack timeline, {time.strftime('%Y-%m-%d %H:%M:%S %Z')}, {args.partitions} partitions, "
           f"{args.warmup} warm-up records, {args.gap_ms:.0f} ms quiet before each traced record; machine load "
           f"average at start {os.getloadavg()[0]:.1f} ({os.cpu_count()} cores, shared)"]
    with tempfile.TemporaryDirectory(prefix="kbroker-ack-timeline-", dir=args.workdir) as tmp:
        cluster = make_cluster("kbroker", Path(tmp) / "cluster")
        try:
            previous = os.environ.get("KBROKER_TRACE")
            os.environ["KBROKER_TRACE"] = "1"  # the brokers inherit it
            try:
                cluster.start()
            finally:
                if previous is None:
                    del os.environ["KBROKER_TRACE"]
                else:
                    os.environ["KBROKER_TRACE"] = previous
            topic = "ack-timeline"
            create_topic(cluster, topic, args.partitions, 120.0)
            acks: dict[int, tuple[int, int]] = {}  # sequence → (ack time, offset)

            def on_delivery(err: Any, msg: Any) -> None:
                if err is not None:
                    raise RuntimeError(f"delivery failed: {err}")
                acks[int(msg.value()[:8])] = (time.monotonic_ns(), msg.offset())

            producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "enable.idempotence": True,
                                 "linger.ms": 0, "on_delivery": on_delivery})
            value = b"x" * 1016
            for i in range(args.warmup):  # the warm-up burst: every partition, same producer
                while True:
                    try:
                        producer.produce(topic, b"%08d" % (10**7 + i % 10**7) + value, partition=i % args.partitions)
                        break
                    except BufferError:
                        producer.poll(0.05)
            if producer.flush(120):
                raise RuntimeError("warm-up not acknowledged within 120 s")
            sent: dict[int, int] = {}
            for seq in range(args.records):
                quiet_until = time.monotonic() + args.gap_ms / 1000
                while time.monotonic() < quiet_until:  # an idle partition, as P3's are between records
                    producer.poll(max(0.0, quiet_until - time.monotonic()))
                sent[seq] = time.monotonic_ns()
                producer.produce(topic, b"%08d" % seq + value, partition=0)
                if producer.flush(30):
                    raise RuntimeError(f"record {seq} not acknowledged within 30 s")
            # every line of a record's way is written before its Produce is answered
            stages = read_stages(cluster)
        finally:
            cluster.close()
        per_stage: dict[str, list[float]] = {}
        for seq in range(args.records):
            acked_ns, offset = acks[seq]
            rows = timeline(stages, f"{topic}-0", offset, sent[seq], acked_ns, cluster.broker_ids)
            out.append(f"record {seq} (offset {offset}):")
            for t_ns, where, what in rows:
                out.append(f"  {t_ns / 1e6:9.3f} ms  {where:<9} {what}")
                per_stage.setdefault(f"{where:<9} {stage_label(what)}", []).append(t_ns / 1e6)
        out.append(f"median over {args.records} records (ms since produce()):")
        for label, times in sorted(per_stage.items(), key=lambda kv: statistics.median(kv[1])):
            out.append(f"  {statistics.median(times):9.3f} ms  {label}  (n={len(times)})")
        if args.keep_logs:
            shutil.copytree(Path(tmp) / "cluster", args.keep_logs, dirs_exist_ok=True)
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m compat.bench.ack_timeline", description=__doc__.split("\n")[0])
    parser.add_argument("--records", type=int, default=5, help="traced records (5)")
    parser.add_argument("--warmup", type=int, default=20000, help="acks=all records before the traced ones (20000)")
    parser.add_argument("--partitions", type=int, default=100, help="partitions of the topic, as P3 (100)")
    parser.add_argument("--gap-ms", type=float, default=100.0, help="quiet before each traced record (100)")
    parser.add_argument("--workdir", type=Path, help="where the cluster keeps its data (a temp dir)")
    parser.add_argument("--keep-logs", type=Path, help="copy the nodes' directories (logs, data) here")
    parser.add_argument("--out", type=Path, help="also write the timelines to this file")
    args = parser.parse_args(argv)
    text = run(args)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
