"""Cluster identity: a node whose data or given id belongs to another cluster stops, saying so.

Real kbroker processes (kbroker/testing/local.py) on loopback: a controller quorum and brokers
started with ``--cluster-id`` as Kafka's nodes are formatted with ``kafka-storage format -t``.
A broker of another cluster is refused (INCONSISTENT_CLUSTER_ID) and exits with status 1 naming
both ids, while the cluster it tried to join goes on; a voter of another cluster exits once a
majority of the other voters refuse it; a node restarted with an id other than its
meta.properties is refused naming the file; three combined nodes agree on one id, given or not.
(Kafka 4.3.1 in the broker case keeps running, never registers, and logs "Unexpected error
INCONSISTENT_CLUSTER_ID in FETCH response" about 25 times a second; kbroker stops instead.)
"""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from kbroker.testing.local import CONTROLLER_ID, HOST, TEST_SETTINGS, LocalBroker, free_port

CLUSTER = "MkU3OEVBNTcwNTJENDM2Qk"
OTHER = "5L6g3nShT-eMCtK--X86sw"
EXIT_WITHIN_S = 60.0


class Node(LocalBroker):
    """A kbroker node started with ``--cluster-id`` (None: none given)."""

    def __init__(self, workdir: Path, node_id: int, settings: dict[str, str], port: int, role: str,
                 cluster_id: str | None) -> None:
        super().__init__(workdir, node_id, settings, port, role)
        self.cluster_id = cluster_id

    def argv(self) -> list[str]:
        return [*super().argv(), *(["--cluster-id", self.cluster_id] if self.cluster_id is not None else [])]


def quorum(tmp_path: Path, ids: list[int]) -> tuple[dict[str, str], dict[int, int]]:
    ports = {node_id: free_port() for node_id in ids}
    common = {**TEST_SETTINGS, "controller.listener.names": "CONTROLLER",
              "controller.quorum.voters": ",".join(f"{i}@{HOST}:{p}" for i, p in ports.items()),
              "default.replication.factor": "1", "offsets.topic.replication.factor": "1",
              "transaction.state.log.replication.factor": "1", "transaction.state.log.min.isr": "1"}
    return common, ports


def controller(tmp_path: Path, common: dict[str, str], node_id: int, port: int, cluster_id: str | None) -> Node:
    return Node(tmp_path / f"node-{node_id}", node_id,
                {**common, "process.roles": "controller", "listeners": f"CONTROLLER://{HOST}:{port}"},
                port, "controller", cluster_id)


def broker(tmp_path: Path, common: dict[str, str], node_id: int, cluster_id: str | None) -> Node:
    port = free_port()
    return Node(tmp_path / f"node-{node_id}", node_id,
                {**common, "process.roles": "broker", "listeners": f"PLAINTEXT://{HOST}:{port}"},
                port, "broker", cluster_id)


def close(*nodes: Node) -> None:
    for node in nodes:
        if node.is_running():
            node.stop()


@pytest.mark.timeout(240)
def test_a_broker_of_another_cluster_exits_and_the_cluster_goes_on(tmp_path: Path) -> None:
    common, ports = quorum(tmp_path, [CONTROLLER_ID])
    active = controller(tmp_path, common, CONTROLLER_ID, ports[CONTROLLER_ID], CLUSTER)
    member = broker(tmp_path, common, 1, CLUSTER)
    stranger = broker(tmp_path, common, 2, OTHER)
    try:
        for node in (active, member, stranger):
            node.start(wait=False)
        member.wait_ready()
        assert stranger.wait_exit(EXIT_WITHIN_S) == 1
        said = stranger.read_log()
        assert "INCONSISTENT_CLUSTER_ID" in said and CLUSTER in said and OTHER in said, said[-3000:]
        assert (stranger.data_dir / "meta.properties").read_text().count(f"cluster.id={OTHER}") == 1
        assert not [p for p in stranger.data_dir.iterdir() if p.is_dir()]  # nothing of the other cluster written

        # Its data names its cluster even when no id is given: refused the same way.
        stranger.cluster_id = None
        stranger.start(wait=False)
        assert stranger.wait_exit(EXIT_WITHIN_S) == 1
        assert stranger.read_log().count("INCONSISTENT_CLUSTER_ID") >= 2

        answer = member.metadata([])
        assert (answer.cluster_id, [b.node_id for b in answer.brokers]) == (CLUSTER, [1])
        member.create_topic("after-the-stranger", partitions=2)  # the cluster works on

        # A member restarted with another id than its meta.properties: refused, naming the file.
        member.stop()
        member.cluster_id = OTHER
        member.start(wait=False)
        assert member.wait_exit(EXIT_WITHIN_S) == 1
        said = member.read_log()
        assert f"{member.data_dir / 'meta.properties'} holds cluster.id={CLUSTER}" in said, said[-3000:]
        assert f"--cluster-id is {OTHER}" in said
    finally:
        close(stranger, member, active)


@pytest.mark.timeout(240)
def test_a_voter_of_another_cluster_exits_and_the_quorum_goes_on(tmp_path: Path) -> None:
    ids = [CONTROLLER_ID, CONTROLLER_ID + 1, CONTROLLER_ID + 2]
    common, ports = quorum(tmp_path, ids)
    voters = [controller(tmp_path, common, i, ports[i], OTHER if i == ids[-1] else CLUSTER) for i in ids]
    member = broker(tmp_path, common, 1, CLUSTER)
    try:
        for node in (*voters, member):
            node.start(wait=False)
        stranger = voters[-1]
        assert stranger.wait_exit(EXIT_WITHIN_S) == 1
        said = stranger.read_log()
        assert "INCONSISTENT_CLUSTER_ID" in said and OTHER in said, said[-3000:]
        member.wait_ready()  # the two voters of the cluster elect a leader and register the broker
        assert member.metadata([]).cluster_id == CLUSTER
        for voter in voters[:-1]:
            assert voter.is_running()
            assert f"refused Vote from node {ids[-1]}: INCONSISTENT_CLUSTER_ID" in voter.read_log() or \
                f"refused Fetch from node {ids[-1]}: INCONSISTENT_CLUSTER_ID" in voter.read_log()
    finally:
        close(member, *voters)


@pytest.mark.timeout(240)
@pytest.mark.parametrize("given", [CLUSTER, None], ids=["given", "generated"])
def test_three_combined_nodes_agree_on_one_cluster_id(tmp_path: Path, given: str | None) -> None:
    """Kafka's small-cluster layout. Given an id (as ``kafka-storage format -t``), every node
    writes it; given none, the first active controller invents one and writes it as the metadata
    log's first record, and every node adopts it from there (meta.properties written then)."""
    ids = [1, 2, 3]
    common, ports = quorum(tmp_path, ids)
    nodes = []
    for node_id in ids:
        client_port = free_port()
        nodes.append(Node(tmp_path / f"node-{node_id}", node_id, {
            **common, "process.roles": "broker,controller", "inter.broker.listener.name": "PLAINTEXT",
            "listeners": f"PLAINTEXT://{HOST}:{client_port},CONTROLLER://{HOST}:{ports[node_id]}"},
            client_port, "broker", given))
    try:
        for node in nodes:
            node.start(wait=False)
        for node in nodes:
            node.wait_ready(brokers=3)
        answered = {node.metadata([]).cluster_id for node in nodes}
        written = [line.removeprefix("cluster.id=") for node in nodes
                   for line in (node.data_dir / "meta.properties").read_text().splitlines()
                   if line.startswith("cluster.id=")]
        assert len(answered) == 1 and len(written) == 3 and answered == set(written)
        assert given is None or answered == {given}
    finally:
        for node in nodes:  # together: a quorum that loses a voter at a time still has a majority to leave by
            if node.is_running():
                node.signal(signal.SIGTERM)
        for node in nodes:
            if node.pid is not None:
                node.wait_exit()
