"""Scripted partition and timing faults on a 3-broker cluster, each with Kafka's expected outcome.

``python -m compat.faults --target kafka|kbroker --out faults.json`` re-executes itself in a
private network namespace (``compat.netns``), starts one cluster (real Kafka 4.3.1 under the bind
shim, or kbroker), checks that nodes connect from their own addresses and that cuts really cut,
then runs the scenarios one after the other, each on its own single-partition topic (RF 3,
``min.insync.replicas=2``), and writes one JSON document of figures and checks (``--topology
combined``: on three combined nodes, compat.cluster's, where only ``zombie`` applies):

- ``jepsen`` (S8 / M4): the leader is cut from both followers, not from the controller or the
  client. No acks=all write may be acknowledged while the ISR is {leader}; after the heal no
  acknowledged write is lost, one leader, a full ISR, identical replica logs.
- ``zombie`` (S4 / M3): the leader is SIGSTOPped past the session timeout while writes go on to
  the new leader, then SIGCONTed: nothing acknowledged is lost, no two different batches ever
  sit at one (leader epoch, offset) on any replica, and the old leader rejoins as a follower.
- ``elr`` (S7, KIP-966): follower A is cut from the others (ISR {L, B}), then B (ISR {L}, ELR
  {B}), then the leader is cut from everyone; then A comes back, then everything heals. Records
  who leads at each step; nothing acknowledged may be lost.
- ``unclean`` (M20 / S5): with ``unclean.leader.election.enable=true`` the out-of-sync replica
  O becomes the only live one and must be elected; the acknowledged values above its log end are
  lost and, after the heal, every replica holds the same value at every offset.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from confluent_kafka.admin import AdminClient, NewTopic

from compat import netns
from compat.cluster import CONTROLLER_ID, Cluster
from compat.deps import kafka_classpath
from compat.failover import History, client_config
from compat.fault_probes import (
    BoundKafkaCluster,
    FaultKbrokerCluster,
    Writer,
    acked_without_offset,
    agreed_full,
    converge,
    drain,
    live_brokers,
    logged_values,
    moved_detail,
    partition_view,
    probe_errors,
    replica_logs,
    views,
    wait_for,
    write_check,
)
from compat.replica_logs import epoch_conflicts, log_matching

SCENARIOS = ["jepsen", "zombie", "elr", "unclean", "elr_kill"]  # elr_kill last: it crashes every broker
LONG_SCENARIOS: list[str] = []  # none yet: every scenario fits the CI budget
# On three combined nodes every broker is a voter: cutting a leader from its followers cuts it from
# the quorum too (jepsen, elr, unclean keep the controller link), and killing two of three nodes
# (elr_kill) loses the quorum. Pausing the leader (zombie) keeps its meaning, with the leader
# possibly the active controller as well.
COMBINED_SCENARIOS = ["zombie"]
RATE = 40.0  # values/s of one scenario's writer
CLIENT_HOST = "127.0.0.1"  # the driver's sockets are unbound: the kernel picks 127.0.0.1
STEP_DEADLINE_S = 30.0
UNDER_MIN_ISR_S = 3.0  # how long writes go on while the ISR is {leader}
PAUSE_S = 5.0  # zombie: SIGSTOP length, past broker.session.timeout.ms=2000


def make_fault_cluster(target: str, workdir: Path, topology: str = "isolated") -> Cluster:
    kind = BoundKafkaCluster if target == "kafka" else FaultKbrokerCluster
    return kind(workdir, topology=topology)


def _round(value: Any) -> Any:
    return round(value, 3) if isinstance(value, float) else value


class Run:
    """One scenario's clock, figures and checks."""

    def __init__(self, cluster: Cluster, topic: str) -> None:
        self.cluster = cluster
        self.topic = topic
        self.start = time.monotonic()
        self.figures: dict[str, Any] = {}
        self.history = History()
        self.writer: Writer | None = None

    def at(self) -> float:
        return round(time.monotonic() - self.start, 3)

    def note(self, key: str, value: Any) -> None:
        self.figures[key] = _round(value)
        print(f"faults: {self.topic} +{self.at():.2f}s {key} = {self.figures[key]}", file=sys.stderr, flush=True)

    def host(self, node: int) -> str:
        return self.cluster.host(node)

    def view(self, broker: int) -> dict[str, Any] | None:
        v = partition_view(self.cluster, broker, self.topic)
        return None if v is None else v.as_dict()

    def start_writer(self, name: str) -> Writer:
        self.writer = Writer(self.cluster.bootstrap, self.topic, self.history, RATE, f"{self.topic}-{name}")
        self.writer.start()
        return self.writer

    def cut(self, a: int, b: int) -> None:
        netns.cut(self.host(a), self.host(b))
        self.figures.setdefault("cuts_bite", []).append(not netns.link_works(self.host(a), self.host(b)))

    def finish(self) -> None:
        """Heal, stop the writer, converge, then read back and check everything."""
        netns.heal()
        if self.writer is not None:
            self.writer.stop()
        self.note("converge_s", converge(self.cluster, self.topic))
        logs = replica_logs(self.cluster, self.topic)
        ends = {b: log.log_end_offset for b, log in logs.items()}
        self.note("log_end_offsets", ends)
        self.note("log_matching", log_matching(logs, min(ends.values())))
        self.note("epochs", {b: log.epochs() for b, log in logs.items()})
        final = views(self.cluster, self.cluster.broker_ids, self.topic)
        self.note("final_views", {b: None if v is None else v.as_dict() for b, v in final.items()})
        self.note("one_leader", agreed_full(self.cluster, self.topic))
        read = drain(self.cluster.bootstrap, self.topic)
        on_disk = {o: (v.decode() if v is not None else None) for o, v in logs[min(logs)].values().items()}
        self.note("drain_matches_replicas", read == {o: v for o, v in on_disk.items() if o < max(read, default=-1) + 1})
        outcomes: dict[str, int] = {}
        for s in self.history.sends:
            key = s.outcome if s.outcome != "fail" and s.outcome != "info" else f"{s.outcome}:{s.error}"
            outcomes[key] = outcomes.get(key, 0) + 1
        self.note("outcomes", outcomes)
        self.note("read", len(read))
        self.figures["check"] = write_check(self.history.sends, read)
        self.figures["moved_detail"] = moved_detail(self.history.sends, read)
        self.note("acked_without_offset", acked_without_offset(self.history.sends, read))
        self.note("check_counts", {k: len(v) for k, v in self.figures["check"].items()})


def create_topics(cluster: Cluster) -> None:
    admin = AdminClient(client_config(cluster.bootstrap))
    safe = {"min.insync.replicas": "2", "unclean.leader.election.enable": "false"}
    topics = [NewTopic(t, 1, 3, config=safe) for t in SCENARIOS + LONG_SCENARIOS if t != "unclean"]
    topics.append(
        NewTopic("unclean", 1, 3, config={"min.insync.replicas": "2", "unclean.leader.election.enable": "true"})
    )
    for future in admin.create_topics(topics).values():
        future.result(30)
    for topic in SCENARIOS + LONG_SCENARIOS:
        if wait_for(lambda t=topic: agreed_full(cluster, t), 60) is None:
            raise RuntimeError(f"topic {topic} has no leader with a full ISR on every broker")


def leader_and_followers(cluster: Cluster, topic: str) -> tuple[int, list[int]]:
    v = partition_view(cluster, cluster.broker_ids[0], topic)
    assert v is not None and v.leader >= 0
    return v.leader, [b for b in cluster.broker_ids if b != v.leader]


# --- the scenarios ------------------------------------------------------------------------------------


def jepsen(run: Run) -> None:
    cluster = run.cluster
    leader, followers = leader_and_followers(cluster, run.topic)
    run.note("leader", leader)
    writer = run.start_writer("w")
    run.note("warmup_acks_s", writer.wait_acks(20, 0.0, STEP_DEADLINE_S))
    cut_at = time.monotonic()
    for f in followers:
        run.cut(leader, f)
    run.note("controller_link_kept", netns.link_works(run.host(leader), cluster.host(CONTROLLER_ID)))
    run.note("client_link_kept", netns.link_works(CLIENT_HOST, run.host(leader)))
    run.note("isr_shrink_s", wait_for(lambda: (run.view(leader) or {}).get("isr") == [leader], STEP_DEADLINE_S))
    shrunk_at = time.monotonic()
    run.note("view_isr1", {b: run.view(b) for b in cluster.broker_ids})
    run.note("probe", probe_errors(f"{run.host(leader)}:{cluster.port(leader)}", run.topic, 5))
    time.sleep(max(0.0, shrunk_at + UNDER_MIN_ISR_S - time.monotonic()))  # the fault's length, not a sync
    follower_values = logged_values(replica_logs(cluster, run.topic, followers))
    healed_at = time.monotonic()
    netns.heal()
    acked = [v for v, t in writer.acked_at.items() if t < healed_at]
    run.note("acked_before_heal", len(acked))
    run.note("acked_only_on_leader", sorted(v for v in acked if v not in follower_values))
    run.note("acks_while_isr1", sum(1 for t in list(writer.acked_at.values()) if shrunk_at <= t < healed_at))
    run.note("acks_cut_to_shrink", sum(1 for t in list(writer.acked_at.values()) if cut_at <= t < shrunk_at))
    run.note("isr_restore_s", wait_for(lambda: agreed_full(cluster, run.topic), 60))
    run.note("acks_after_heal_s", writer.wait_acks(10, time.monotonic(), STEP_DEADLINE_S))
    run.finish()


def zombie(run: Run) -> None:
    cluster = run.cluster
    leader, followers = leader_and_followers(cluster, run.topic)
    first = partition_view(cluster, leader, run.topic)
    assert first is not None
    run.note("leader", leader)
    run.note("epoch_before", first.epoch)
    writer = run.start_writer("w")
    run.note("warmup_acks_s", writer.wait_acks(20, 0.0, STEP_DEADLINE_S))
    paused_at = time.monotonic()
    cluster.pause(leader)

    def elected() -> bool:
        seen = [partition_view(cluster, b, run.topic) for b in followers]
        return all(v is not None and v.leader in followers and v.epoch > first.epoch for v in seen)

    run.note("new_leader_s", wait_for(elected, STEP_DEADLINE_S))
    run.note("view_during_pause", {b: run.view(b) for b in followers})
    run.note("acks_on_new_leader_s", writer.wait_acks(20, time.monotonic(), STEP_DEADLINE_S))
    time.sleep(max(0.0, paused_at + PAUSE_S - time.monotonic()))  # the fault's length, not a sync
    snapshots = [replica_logs(cluster, run.topic)]
    cluster.resume(leader)
    run.note("paused_s", time.monotonic() - paused_at)

    def rejoined() -> bool:
        snapshots.append(replica_logs(cluster, run.topic, [leader]))  # catches the zombie's own appends
        seen = views(cluster, cluster.broker_ids, run.topic).values()
        return all(v is not None and v.leader in followers and leader in v.isr for v in seen)

    run.note("rejoin_as_follower_s", wait_for(rejoined, 60))
    run.finish()
    snapshots.append(replica_logs(cluster, run.topic))
    run.note("epoch_conflicts", epoch_conflicts(snapshots))
    final = snapshots[-1][followers[0]]
    newer = [base for epoch, base in final.epochs() if epoch > first.epoch]
    fence_offset = newer[0] if newer else None
    zombie_batches = {
        b.key() for snap in snapshots[1:-1] for b in snap.get(leader, None).batches
        if b.leader_epoch <= first.epoch and fence_offset is not None and b.last_offset >= fence_offset
    } if fence_offset is not None else set()  # fmt: skip
    run.note("zombie_appends_seen_then_truncated", len(zombie_batches))


def elr(run: Run) -> None:
    cluster = run.cluster
    leader, (a, b) = leader_and_followers(cluster, run.topic)
    controller = CONTROLLER_ID
    run.note("roles", {"leader": leader, "a": a, "b": b})
    writer = run.start_writer("w")
    run.note("warmup_acks_s", writer.wait_acks(10, 0.0, STEP_DEADLINE_S))
    run.cut(a, leader)
    run.cut(a, b)
    run.note("a_out_s", wait_for(lambda: (run.view(leader) or {}).get("isr") == sorted([leader, b]), STEP_DEADLINE_S))
    run.note("view_isr2", run.view(leader))
    run.note("acks_isr2_s", writer.wait_acks(20, time.monotonic(), STEP_DEADLINE_S))
    run.cut(b, leader)
    run.note("b_out_s", wait_for(lambda: (run.view(leader) or {}).get("isr") == [leader], STEP_DEADLINE_S))
    under_at = time.monotonic()
    run.note("view_isr1", {x: run.view(x) for x in cluster.broker_ids})
    netns.isolate(run.host(leader), [cluster.host(controller)])
    isolated_at = time.monotonic()
    run.note("acks_while_isr1", sum(1 for t in list(writer.acked_at.values()) if under_at <= t < isolated_at))
    run.note("leader_fenced_s", wait_for(lambda: leader not in (live_brokers(cluster, b) or [leader]), STEP_DEADLINE_S))
    run.note("leader_moved_s", wait_for(lambda: (run.view(b) or {}).get("leader") != leader, 5.0))
    run.note("view_leader_cut", {x: run.view(x) for x in (a, b)})
    netns.heal(run.host(a))
    netns.cut(run.host(a), run.host(leader))  # A comes back to B and the controller, the old leader stays away
    run.note("a_back_s", wait_for(lambda: a in (live_brokers(cluster, b) or []) and run.view(a) is not None
                                  and (run.view(a) or {}).get("leader") == (run.view(b) or {}).get("leader"),
                                  STEP_DEADLINE_S))  # fmt: skip
    run.note("isr_with_a_s", wait_for(lambda: a in (run.view(b) or {}).get("isr", []), STEP_DEADLINE_S))
    run.note("view_a_back", {x: run.view(x) for x in (a, b)})
    run.finish()


def elr_kill(run: Run) -> None:
    """S7 with crashes instead of cuts (longer: three restarts). SIGKILL is an unclean shutdown, after
    which KIP-966 takes a restarted broker out of the ELR; the last known leader may lead again."""
    cluster = run.cluster
    leader, (a, b) = leader_and_followers(cluster, run.topic)
    run.note("roles", {"leader": leader, "a": a, "b": b})
    writer = run.start_writer("w")
    run.note("warmup_acks_s", writer.wait_acks(10, 0.0, STEP_DEADLINE_S))
    cluster.kill(a)
    run.note("a_out_s", wait_for(lambda: (run.view(leader) or {}).get("isr") == sorted([leader, b]), STEP_DEADLINE_S))
    run.note("acks_isr2_s", writer.wait_acks(20, time.monotonic(), STEP_DEADLINE_S))
    cluster.kill(b)
    run.note("b_out_s", wait_for(lambda: (run.view(leader) or {}).get("isr") == [leader], STEP_DEADLINE_S))
    under_at = time.monotonic()
    run.note("view_isr1", run.view(leader))
    cluster.kill(leader)
    run.note("acks_while_isr1", sum(1 for t in list(writer.acked_at.values()) if t >= under_at))
    down = {a, b, leader}
    for step, node in (("a_back", a), ("b_back", b), ("leader_back", leader)):
        cluster.start_node(node)
        down.discard(node)

        def registered(n: int = node) -> bool:  # the node is live and sees every dead broker fenced
            live = live_brokers(cluster, n) or []
            return n in live and not down & set(live)

        def led(n: int = node) -> bool:
            return (run.view(n) or {}).get("leader", -1) in set(cluster.broker_ids) - down

        run.note(f"{step}_registered_s", wait_for(registered, 60))
        run.note(f"{step}_elected_s", wait_for(led, 3.0))
        run.note(f"view_{step}", run.view(node))
    run.finish()


def unclean(run: Run) -> None:
    cluster = run.cluster
    leader, (stale, other) = leader_and_followers(cluster, run.topic)
    controller = CONTROLLER_ID
    run.note("roles", {"leader": leader, "stale": stale, "other": other})
    writer = run.start_writer("w1")
    run.note("warmup_acks_s", writer.wait_acks(10, 0.0, STEP_DEADLINE_S))
    run.cut(stale, leader)
    run.cut(stale, other)
    run.note("stale_out_s", wait_for(lambda: (run.view(leader) or {}).get("isr") == sorted([leader, other]),
                                     STEP_DEADLINE_S))  # fmt: skip
    run.note("acks_without_stale_s", writer.wait_acks(20, time.monotonic(), STEP_DEADLINE_S))
    writer.stop()
    stale_end = replica_logs(cluster, run.topic, [stale])[stale].log_end_offset
    run.note("stale_log_end", stale_end)
    run.note("leader_log_end", replica_logs(cluster, run.topic, [leader])[leader].log_end_offset)
    netns.isolate(run.host(leader), [cluster.host(controller)])
    netns.isolate(run.host(other), [cluster.host(controller)])
    run.note("unclean_elected_s", wait_for(lambda: (run.view(stale) or {}).get("leader") == stale, STEP_DEADLINE_S))
    run.note("view_elected", run.view(stale))
    run.note("stale_log_end_at_election", replica_logs(cluster, run.topic, [stale])[stale].log_end_offset)
    netns.heal()
    run.note("isr_restore_s", wait_for(lambda: agreed_full(cluster, run.topic), 60))
    writer = run.start_writer("w2")
    run.note("acks_after_heal_s", writer.wait_acks(10, time.monotonic(), STEP_DEADLINE_S))
    run.finish()
    acked_above = [s for s in run.history.sends if s.outcome == "ok" and s.offset is not None and s.offset >= stale_end]
    lost = set(run.figures["check"]["lost"])
    lost_sends = [s for s in run.history.sends if s.value in lost]
    # A value acknowledged without an offset (see Send.offset_known) cannot be shown to lie above the end.
    run.note("lost_only_above_stale_end", all(s.offset_known and s.offset >= stale_end for s in lost_sends))
    run.note("acked_above_stale_end_first_writer", sum(1 for s in acked_above if s.session.endswith("w1")))


SCENARIO_FUNCTIONS: dict[str, Callable[[Run], None]] = {
    "jepsen": jepsen, "zombie": zombie, "elr": elr, "unclean": unclean, "elr_kill": elr_kill,
}  # fmt: skip


def address_check(cluster: Cluster) -> dict[str, Any]:
    """Which local address each node's connections to another node use, and whether cuts bite."""
    hosts = {cluster.host(n): n for n in cluster.nodes}
    controller_listeners = {cluster.nodes[c].controller_bootstrap for c in cluster.controller_ids}
    listeners = {f"{cluster.host(n)}:{cluster.port(n)}" for n in cluster.nodes} | controller_listeners
    inter_node = []
    from_client_address = []
    pids = {node.proc.pid for node in cluster.nodes.values() if node.proc is not None}
    for local, peer, pid in netns.node_links():
        if peer in listeners and pid in pids:  # a node's own outbound connection to another node
            source = local.rsplit(":", 1)[0]
            (inter_node if source in hosts else from_client_address).append(f"{local}->{peer}")
    pairs = [(a, b) for a in cluster.nodes for b in cluster.nodes if a < b]
    ok_before = all(netns.link_works(cluster.host(a), cluster.host(b)) for a, b in pairs)
    netns.cut(cluster.host(1), cluster.host(2))
    cut_bites = not netns.link_works(cluster.host(1), cluster.host(2)) and not netns.link_works(
        cluster.host(2), cluster.host(1))  # fmt: skip
    others_kept = netns.link_works(cluster.host(1), cluster.host(3)) and netns.link_works(CLIENT_HOST, cluster.host(2))
    netns.heal()
    brokers_to_controller = sorted(
        {hosts[link.split("->")[0].rsplit(":", 1)[0]] for link in inter_node
         if link.split("->")[1] in controller_listeners}
    )  # fmt: skip
    return {
        "inter_node_connections": sorted(inter_node),
        "client_address_connections": len(from_client_address),
        "brokers_bound_to_controller": brokers_to_controller,
        "links_ok_before": ok_before,
        "cut_bites": cut_bites,
        "other_links_kept": others_kept and netns.link_works(cluster.host(1), cluster.host(2)),
    }


def run_all(target: str, workdir: Path, scenarios: list[str], topology: str = "isolated") -> dict[str, Any]:
    """Inside the namespace: start the cluster, run ``scenarios``, return the JSON document."""
    netns.bring_up_loopback()
    result: dict[str, Any] = {"target": target, "topology": topology, "scenarios": {}}
    began = time.monotonic()
    with make_fault_cluster(target, workdir / "cluster", topology) as cluster:
        result["cluster_start_s"] = round(time.monotonic() - began, 1)
        create_topics(cluster)
        result["addresses"] = address_check(cluster)
        for name in scenarios:
            run = Run(cluster, name)
            try:
                # An earlier scenario's fault may have moved this topic's leader or shrunk its ISR.
                run.note("full_isr_at_start_s", wait_for(lambda t=name: agreed_full(cluster, t), 60))
                SCENARIO_FUNCTIONS[name](run)
            except Exception:  # one broken scenario must not hide the others' figures
                run.figures["error"] = traceback.format_exc()
                print(run.figures["error"], file=sys.stderr, flush=True)
                netns.heal()
                if run.writer is not None and run.writer.is_alive():
                    run.writer.stop()
            run.figures["duration_s"] = round(time.monotonic() - run.start, 1)
            result["scenarios"][name] = run.figures
    result["total_s"] = round(time.monotonic() - began, 1)
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m compat.faults", description=__doc__.split("\n\n")[0])
    parser.add_argument("--target", choices=["kafka", "kbroker"], required=True)
    parser.add_argument("--topology", choices=["isolated", "combined"], default="isolated",
                        help="compat.cluster's layout; on combined nodes only zombie applies (see COMBINED_SCENARIOS)")
    parser.add_argument("--scenario", action="append", choices=SCENARIOS + LONG_SCENARIOS, help="default: the CI set")
    parser.add_argument("--workdir", type=Path, help="cluster data and logs (default: a new temporary directory)")
    parser.add_argument("--out", type=Path, default=Path("faults.json"))
    parser.add_argument("--timeout", type=float, default=600.0, help="for the whole namespaced run")
    args = parser.parse_args(argv)
    scenarios = args.scenario or (SCENARIOS if args.topology == "isolated" else COMBINED_SCENARIOS)
    workdir = (args.workdir or Path(tempfile.mkdtemp(prefix=f"faults-{args.target}-"))).resolve()
    workdir.mkdir(parents=True, exist_ok=True)
    if not netns.in_namespace():
        if args.target == "kafka":
            kafka_classpath()  # resolve the jars out here: the namespace has no route to the internet
        netns.bind_shim()
        child = [
            "-m", "compat.faults", "--target", args.target, "--topology", args.topology, "--workdir", str(workdir),
            "--out", str(args.out.resolve()), *(f"--scenario={s}" for s in scenarios),
        ]  # fmt: skip
        return netns.reexec_in_namespace(child, args.timeout, cwd=Path(__file__).resolve().parent.parent).returncode
    logging.basicConfig(filename=workdir / "clients.log", level=logging.INFO, format="%(asctime)s %(message)s")
    result = run_all(args.target, workdir, scenarios, args.topology)
    args.out.write_text(json.dumps(result, indent=1, default=str) + "\n")
    print(json.dumps({name: {k: v for k, v in fig.items() if k.endswith("_s")}
                      for name, fig in result["scenarios"].items()}))  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
