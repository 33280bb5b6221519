"""Leader failover on a 3-broker cluster loses, duplicates and reorders nothing (fault matrix M2/M3, short).

Run on the session's shared clusters (conftest.py), isolated and combined: real Apache Kafka 4.3.1 (the positive
control: the harness must report a clean run there) and kbroker.
``compat.failover.run_failover`` keeps idempotent acks=all producers writing unique values to
topic ``failover`` (RF 3, 6 partitions, min.insync.replicas=2) while the
leader of a random partition is SIGKILLed and restarted three times, then SIGSTOPped for 4 s and
SIGCONTed once. Every partition must show a live leader on every surviving broker within 5 s of
each failure (on the combined layout, where the victim may be the active controller: 10 s, and
the pause lasts 10 s), the victim must leave every ISR while it is down or frozen, writes to the
partitions the victim led must be accepted again, the ISR must be back to 3 after each restart,
and the final read_committed drain must show 0 lost acknowledged values, 0 duplicates and 0
acknowledged values away from their acknowledged offset. The seed is printed;
``KBROKER_FAILOVER_SEED=<n>`` replays a schedule. ``test_checker_reports_each_anomaly`` feeds
the checker a hand-made history with one of each anomaly (its negative control).

kbroker's reset-based fencing (``kbroker.broker.disconnect.fence.ms``) runs on a kbroker cluster of
its own whose session timeout is long (30 s), so "fenced before the session ended" is decided by a
wide margin: a killed leader (its kernel closes its heartbeat connection) must be fenced, and its
partitions led by survivors, within half the session; a frozen one (SIGSTOP: the connection stays
open and silent, as in a network partition) must still be registered and leading after five
graces.
"""

from __future__ import annotations

import json
import os
import random
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from compat.cluster import CONTROLLER_ID, Cluster, make_cluster
from compat.failover import Send, check, one_line, run_failover

CLUSTER_TOPOLOGIES = ("isolated", "combined")  # conftest.py: each target's shared cluster in both layouts

KILLS = 3
PAUSES = 1
# On the combined layout the victim may be the active controller: before a new one fences it,
# the voters wait out controller.quorum.fetch.timeout.ms (2 s) and elect, and the new controller
# gives every broker a full session (2 s) — on Kafka as on kbroker. So the leader bound and the
# pause (the victim must be seen leaving the ISR while frozen) are longer there.
PAUSE_S = {"isolated": 4.0, "combined": 10.0}
LEADER_WITHIN_S = {"isolated": 5.0, "combined": 10.0}

LONG_SESSION_MS = 30_000
DISCONNECT_FENCE_MS = 1000
FENCING_TOPIC = "fencing"


def _seed() -> int:
    fixed = os.environ.get("KBROKER_FAILOVER_SEED")
    return int(fixed) if fixed else random.SystemRandom().randrange(2**32)


@pytest.mark.timeout(600)
def test_leader_failover_loses_nothing(cluster: Cluster, tmp_path: Path) -> None:
    seed = _seed()
    print(f"failover seed {seed} on {cluster.name}")
    summary = run_failover(
        cluster, kills=KILLS, pauses=PAUSES, pause_s=PAUSE_S[cluster.topology], seed=seed,
        out=tmp_path / "failover.json",
    )
    print(one_line(summary))
    faults = json.dumps(summary["faults"], indent=1)
    assert (summary["kills"], summary["pauses"]) == (KILLS, PAUSES), faults
    for fault in summary["faults"]:
        assert fault["leader_s"] is not None and fault["leader_s"] <= LEADER_WITHIN_S[cluster.topology], faults
        assert fault["isr_shrink_s"] is not None, faults  # the victim left every ISR while it was gone
        assert fault["probe_s"] is not None, faults
        assert fault["isr_s"] is not None, faults
    assert summary["ok"] > 0
    examples = json.dumps(summary.get("examples", {}))
    assert summary["lost"] == 0, examples
    assert summary["duplicates"] == 0, examples
    assert summary["inconsistent"] == 0, examples
    assert summary["nonmonotonic"] == 0, examples
    assert summary["failed_but_read"] == 0, examples
    assert summary["unexpected"] == 0, examples


def test_checker_reports_each_anomaly() -> None:
    """The checker itself, on a hand-made history: each anomaly is found and named (negative control)."""
    sends = [
        Send(0, "p-1", 0, "ok", 0),  # read where acknowledged: fine
        Send(1, "p-1", 0, "ok", 1),  # never read: lost
        Send(2, "p-1", 0, "ok", 2),  # read at offset 3 instead: inconsistent
        Send(3, "p-1", 1, "ok", 5),
        Send(4, "p-1", 1, "ok", 4),  # lower offset than an earlier send of the session: nonmonotonic
        Send(5, "p-2", 1, "fail", None, "NOT_ENOUGH_REPLICAS"),  # definite failure, yet read
        Send(6, "p-2", 1, "info", None, "_MSG_TIMED_OUT"),  # indefinite, read twice: duplicate
        Send(7, "p-3", 2, "ok", None),  # acknowledged without an offset (librdkafka's implicit ack): fine
        Send(8, "p-3", 2, "ok", 2),
        Send(9, "p-3", 2, "ok", None),  # no offset, read before the session's earlier send: nonmonotonic
    ]
    read = {(0, 0): 0, (0, 3): 2, (1, 4): 4, (1, 5): 3, (1, 6): 5, (1, 7): 6, (1, 8): 6, (1, 9): 99,
            (2, 0): 9, (2, 1): 7, (2, 2): 8}  # fmt: skip
    assert check(sends, read) == {
        "lost": [1],
        "duplicates": [6],
        "inconsistent": [2],
        "nonmonotonic": [4, 9],
        "failed_but_read": [5],
        "unexpected": [99],
    }


# --- reset-based fencing (kbroker only: Kafka waits out the session) -------------------------


@pytest.fixture(scope="module")
def long_session_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    settings = {"broker.session.timeout.ms": str(LONG_SESSION_MS),
                "kbroker.broker.disconnect.fence.ms": str(DISCONNECT_FENCE_MS)}
    with make_cluster("kbroker", tmp_path_factory.mktemp("long-session"), settings) as running:
        admin = AdminClient({"bootstrap.servers": running.bootstrap})
        admin.create_topics([NewTopic(FENCING_TOPIC, 3, 3)])[FENCING_TOPIC].result(30)
        yield running


def _view(cluster: Cluster, broker: int) -> tuple[set[int], dict[int, int]]:
    """(the live brokers, {partition: leader}) as ``broker``'s Metadata has them."""
    response = cluster.metadata(broker, [FENCING_TOPIC])
    [topic] = response.topics
    return {b.node_id for b in response.brokers}, {p.partition_index: p.leader_id for p in topic.partitions}


def _led_by(cluster: Cluster, victim: int) -> list[int]:
    survivor = next(b for b in cluster.broker_ids if b != victim)
    live, leaders = _view(cluster, survivor)
    deadline = time.monotonic() + 30
    while not (live == set(cluster.broker_ids) and len(leaders) == 3):  # every broker back after a restart
        assert time.monotonic() < deadline, (live, leaders)
        time.sleep(0.1)
        live, leaders = _view(cluster, survivor)
    return [p for p, leader in leaders.items() if leader == victim]


def test_a_killed_leader_is_fenced_long_before_its_session_ends(long_session_cluster: Cluster) -> None:
    cluster, victim = long_session_cluster, 1
    assert _led_by(cluster, victim), "placement gives every broker a partition to lead"
    killed = time.monotonic()
    cluster.kill(victim)
    survivors = [b for b in cluster.broker_ids if b != victim]
    pending = set(survivors)
    while pending:
        elapsed = time.monotonic() - killed
        assert elapsed < LONG_SESSION_MS / 2000, f"brokers {sorted(pending)} still list broker {victim} live"
        for broker in sorted(pending):
            live, leaders = _view(cluster, broker)
            if victim not in live and all(leader in survivors for leader in leaders.values()):
                pending.discard(broker)
        time.sleep(0.05)
    controller_log = cluster.nodes[CONTROLLER_ID].log.read_text()
    assert f"broker {victim} fenced: its controller connection" in controller_log
    print(f"broker {victim} fenced and its partitions led by survivors {elapsed:.2f} s after kill -9 "
          f"(session {LONG_SESSION_MS} ms, grace {DISCONNECT_FENCE_MS} ms)")
    cluster.start_node(victim)  # a new incarnation registers at once: the old one is fenced
    cluster.wait_registered(cluster.broker_ids)


def test_a_frozen_leader_is_not_fenced_before_its_session_ends(long_session_cluster: Cluster) -> None:
    cluster, victim = long_session_cluster, 2
    led = _led_by(cluster, victim)
    assert led
    survivor = next(b for b in cluster.broker_ids if b != victim)
    cluster.pause(victim)
    try:
        paused = time.monotonic()
        while time.monotonic() - paused < 5 * DISCONNECT_FENCE_MS / 1000:
            live, leaders = _view(cluster, survivor)
            assert victim in live, "a silent connection must not end the session early"
            assert all(leaders[p] == victim for p in led), leaders
            time.sleep(0.1)
    finally:
        cluster.resume(victim)
    cluster.wait_registered(cluster.broker_ids)
    assert "broker 2 fenced" not in cluster.nodes[CONTROLLER_ID].log.read_text()
