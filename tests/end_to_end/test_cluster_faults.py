"""Scripted network-partition and timing faults on a 3-broker cluster end as they do on Kafka 4.3.1.

Each target runs once (``python -m compat.faults``, re-executed in a private network namespace
so ``ip rule ... prohibit`` cuts only the test cluster's links); the tests below assert on the
JSON it writes, with identical assertions for real Kafka (the positive control) and kbroker:

- the cuts really cut (and nothing else), and every node connects from its own address;
- ``jepsen`` (fault matrix S8/M4): leader cut from both followers; no acks=all write is
  acknowledged while the ISR is {leader} (a non-retrying probe gets NOT_ENOUGH_REPLICAS), every
  write acknowledged before the heal is on a follower; after the heal nothing is lost, one leader,
  ISR 3, identical replica logs;
- ``zombie`` (S4/M3): leader SIGSTOPped past the session timeout, a new leader takes the writes,
  SIGCONT: no loss, never two different batches at one (leader epoch, offset), old leader rejoins
  as a follower;
- ``elr`` (S7, KIP-966): followers cut away one by one, then the leader; the ELR member is
  elected, the follower that left while the ISR still met min ISR is not; no loss;
- ``unclean`` (M20/S5): the out-of-sync replica becomes the only live one and is elected; exactly
  the acknowledged values above its log end are lost, and afterwards every replica and a consumer
  agree on every offset.
- ``elr_kill`` (S7 with crashes): the same with SIGKILL and restarts. A SIGKILLed ELR member
  restarts after an unclean shutdown, so KIP-966 drops it from the ELR: the partition stays
  leaderless until the last known leader returns and leads.

On three combined nodes (``--topology combined``: each a broker and a voter) only ``zombie`` keeps
its meaning: there a cut between brokers is also a cut between voters, and killing two of the
three loses the quorum. Its run starts once the isolated ones are done (a fourth and fifth
cluster at once would only slow all of them), and the tests that do not apply to it are
parametrized with the reason in their id.

One scenario alone: ``python -m compat.faults --target kafka|kbroker --scenario elr_kill``.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
RUN_TIMEOUT_S = 420.0
TARGETS = ["kafka", "kbroker"]
# (target, topology) -> the JSON document of that run
FaultRun = Callable[[str, str], dict[str, Any]]


def on(topologies: dict[str, str | None]) -> list[Any]:
    """(target, topology) parameters: each topology with None runs, one with a reason is skipped
    with the reason in its id, so a reader of the test report sees why it did not run."""
    params = []
    for topology, reason in topologies.items():
        for target in TARGETS:
            name = target if topology == "isolated" else f"{target}-{topology}"
            if reason is None:
                params.append(pytest.param(target, topology, id=name))
            else:
                params.append(pytest.param(target, topology, id=f"{name}-skipped-{reason.replace(' ', '-')}",
                                           marks=pytest.mark.skip(reason=reason)))
    return params


EVERY_TOPOLOGY = on({"isolated": None, "combined": None})
CUTS_ISOLATED_ONLY = on({"isolated": None, "combined": "a cut from the followers is a cut from the quorum"})
KILLS_ISOLATED_ONLY = on({"isolated": None, "combined": "killing two of three voters loses the quorum"})


@pytest.fixture(scope="module")
def fault_run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FaultRun]:
    """The JSON document of one run per target and topology. A topology's two runs start on its
    first use and go on side by side: each has a network namespace of its own, and they spend most
    of their time waiting out timeouts (sessions, replica lag), so together they take little
    longer than one."""
    runs: dict[tuple[str, str], tuple[subprocess.Popen[bytes], Path, Path]] = {}
    documents: dict[tuple[str, str], dict[str, Any]] = {}

    def get(target: str, topology: str) -> dict[str, Any]:
        if (target, topology) not in runs:
            for name in TARGETS:
                workdir = tmp_path_factory.mktemp(f"faults-{name}-{topology}")
                out = workdir / "faults.json"
                command = [sys.executable, "-m", "compat.faults", "--target", name, "--topology", topology,
                           "--workdir", str(workdir), "--out", str(out)]
                runs[name, topology] = (subprocess.Popen(command, cwd=REPO), workdir, out)
        if (target, topology) not in documents:
            proc, workdir, out = runs[target, topology]
            returncode = proc.wait(timeout=RUN_TIMEOUT_S)
            assert returncode == 0 and out.exists(), f"{target} {topology} fault run failed; logs in {workdir}"
            documents[target, topology] = json.loads(out.read_text())
        return documents[target, topology]

    yield get
    for proc, _workdir, _out in runs.values():
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def scenario(fault_run: FaultRun, target: str, topology: str, name: str) -> dict[str, Any]:
    figures = fault_run(target, topology)["scenarios"][name]
    assert "error" not in figures, figures["error"]
    assert figures["full_isr_at_start_s"] is not None
    return figures


def assert_converged_without_loss(figures: dict[str, Any]) -> None:
    """After the heal: one leader with ISR 3 on every broker, identical replica logs, a drain that
    matches them, and no acknowledged value lost, moved, duplicated or out of send order; no failed
    value visible. An acknowledgement without an offset (librdkafka's implicit ack of a retried
    batch, offset None) cannot be "moved"; it is still held to exactly once and in order."""
    assert figures["converge_s"] is not None, figures["final_views"]
    assert figures["one_leader"], figures["final_views"]
    assert figures["log_matching"] == []
    assert len(set(figures["log_end_offsets"].values())) == 1, figures["log_end_offsets"]
    assert figures["drain_matches_replicas"]
    check = figures["check"]
    empty: dict[str, list[int]] = {"lost": [], "moved": [], "duplicates": [], "failed_but_read": [], "out_of_order": []}
    assert check == empty, (figures["check_counts"], figures["moved_detail"])


@pytest.mark.timeout(900)
@pytest.mark.parametrize(("target", "topology"), EVERY_TOPOLOGY)
def test_cuts_bite_and_nodes_bind_their_address(target: str, topology: str, fault_run: FaultRun) -> None:
    addresses = fault_run(target, topology)["addresses"]
    assert addresses["links_ok_before"]
    assert addresses["cut_bites"], "a TCP connection got through a cut link"
    assert addresses["other_links_kept"]
    assert addresses["client_address_connections"] == 0, addresses["inter_node_connections"]
    assert {1, 2, 3} <= set(addresses["brokers_bound_to_controller"]), addresses["inter_node_connections"]


@pytest.mark.timeout(900)
@pytest.mark.parametrize(("target", "topology"), CUTS_ISOLATED_ONLY)
def test_leader_cut_from_followers_acks_nothing_alone(target: str, topology: str, fault_run: FaultRun) -> None:
    f = scenario(fault_run, target, topology, "jepsen")
    assert all(f["cuts_bite"]) and f["controller_link_kept"] and f["client_link_kept"]
    assert f["isr_shrink_s"] is not None, "the leader never shrank the ISR to itself"
    assert f["probe"] == {"NOT_ENOUGH_REPLICAS": 5}
    assert f["acks_while_isr1"] == 0
    assert f["acked_only_on_leader"] == []
    assert f["acked_before_heal"] > 0
    assert f["isr_restore_s"] is not None
    assert f["acks_after_heal_s"] is not None
    assert_converged_without_loss(f)


@pytest.mark.timeout(900)
@pytest.mark.parametrize(("target", "topology"), EVERY_TOPOLOGY)
def test_paused_leader_is_fenced_and_rejoins(target: str, topology: str, fault_run: FaultRun) -> None:
    f = scenario(fault_run, target, topology, "zombie")
    assert f["new_leader_s"] is not None, "no follower took over while the leader was frozen"
    assert f["acks_on_new_leader_s"] is not None, "no write was acknowledged by the new leader"
    assert f["rejoin_as_follower_s"] is not None, f["final_views"]
    assert f["epoch_conflicts"] == []
    old = f["leader"]
    for view in f["final_views"].values():
        assert view["leader"] != old and view["epoch"] > f["epoch_before"], f["final_views"]
    assert_converged_without_loss(f)


@pytest.mark.timeout(900)
@pytest.mark.parametrize(("target", "topology"), CUTS_ISOLATED_ONLY)
def test_last_replica_standing_elects_the_eligible_one(target: str, topology: str, fault_run: FaultRun) -> None:
    f = scenario(fault_run, target, topology, "elr")
    roles = f["roles"]
    leader, a, b = roles["leader"], roles["a"], roles["b"]
    assert f["a_out_s"] is not None and f["b_out_s"] is not None
    assert f["view_isr2"]["elr"] == []  # A left while the ISR still met min ISR: not eligible
    assert f["view_isr1"][str(leader)]["isr"] == [leader]
    assert f["view_isr1"][str(leader)]["elr"] == [b]  # KIP-966: B left under min ISR, so it is eligible
    assert f["acks_while_isr1"] == 0
    assert f["leader_fenced_s"] is not None
    cut_view = f["view_leader_cut"][str(b)]
    assert (cut_view["leader"], cut_view["isr"], cut_view["elr"]) == (b, [b], [leader])
    back = f["view_a_back"][str(b)]
    assert back["leader"] == b and back["isr"] == sorted([a, b]), f["view_a_back"]
    assert_converged_without_loss(f)


@pytest.mark.timeout(900)
@pytest.mark.parametrize(("target", "topology"), CUTS_ISOLATED_ONLY)
def test_unclean_election_loses_only_above_the_new_leaders_end(
    target: str, topology: str, fault_run: FaultRun
) -> None:
    f = scenario(fault_run, target, topology, "unclean")
    stale = f["roles"]["stale"]
    assert f["unclean_elected_s"] is not None, "the out-of-sync replica was not elected"
    assert f["view_elected"]["leader"] == stale and f["view_elected"]["isr"] == [stale]
    assert f["stale_log_end_at_election"] == f["stale_log_end"]
    lost = f["check"]["lost"]
    assert lost and f["lost_only_above_stale_end"]
    assert len(lost) == f["acked_above_stale_end_first_writer"]
    assert f["isr_restore_s"] is not None and f["acks_after_heal_s"] is not None
    assert f["converge_s"] is not None and f["one_leader"]
    assert f["log_matching"] == [] and len(set(f["log_end_offsets"].values())) == 1
    assert f["drain_matches_replicas"]
    assert f["check"]["moved"] == [] and f["check"]["duplicates"] == [] and f["check"]["out_of_order"] == []


@pytest.mark.timeout(900)
@pytest.mark.parametrize(("target", "topology"), KILLS_ISOLATED_ONLY)
def test_crashed_replicas_wait_for_the_last_known_leader(
    target: str, topology: str, fault_run: FaultRun
) -> None:
    f = scenario(fault_run, target, topology, "elr_kill")
    roles = f["roles"]
    leader, a, b = roles["leader"], roles["a"], roles["b"]
    assert f["a_out_s"] is not None and f["b_out_s"] is not None
    assert f["acks_while_isr1"] == 0
    assert f["a_back_registered_s"] is not None and f["b_back_registered_s"] is not None
    # A left the ISR while it still met min ISR: never eligible.
    assert f["a_back_elected_s"] is None and f["view_a_back"]["leader"] == -1, f["view_a_back"]
    # B was eligible, but its restart follows an unclean shutdown (SIGKILL): KIP-966 drops it.
    assert f["b_back_elected_s"] is None and f["view_b_back"]["leader"] == -1, f["view_b_back"]
    assert f["leader_back_elected_s"] is not None and f["view_leader_back"]["leader"] == leader, f["view_leader_back"]
    assert a != b
    assert_converged_without_loss(f)
