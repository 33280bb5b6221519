"""The replicated clusters the cluster tests share: real Kafka 4.3.1 and kbroker, per layout.

Starting four JVMs takes about half a minute on this machine, so the tests that need a standard
cluster (compat/cluster.py, brokers 1-3 in racks a, b, c with Kafka's RackAwareReplicaSelector)
share one cluster per target and layout for the session; pytest groups the tests by that
parameter, so one cluster runs at a time. The layout is Kafka's isolated one (controller 100,
brokers 1-3) unless a test module lists more in ``CLUSTER_TOPOLOGIES``, e.g. ``("isolated",
"combined")`` for three nodes that are each a broker and a voter. Tests that crash or stop nodes
restart them; before each test every node runs and every broker is registered again. Tests
needing another topology (a three-voter quorum, a network namespace) start their own.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from compat.cluster import Cluster, make_cluster

RACKS = {1: "a", 2: "b", 3: "c"}
SELECTOR = "org.apache.kafka.common.replica.RackAwareReplicaSelector"
TARGETS = ("kafka", "kbroker")


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Run each test on the shared cluster of every target, in each layout its module asks for
    (the isolated layout keeps the bare target as its id: "kafka", "kbroker")."""
    if "shared_cluster" not in metafunc.fixturenames:
        return
    topologies = getattr(metafunc.module, "CLUSTER_TOPOLOGIES", ("isolated",))
    params = [
        pytest.param((target, topology), id=target if topology == "isolated" else f"{target}-{topology}")
        for topology in topologies for target in TARGETS
    ]
    metafunc.parametrize("shared_cluster", params, indirect=True, scope="session")


@pytest.fixture(scope="session")
def shared_cluster(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    target, topology = request.param
    workdir = tmp_path_factory.mktemp(f"cluster-{target}-{topology}")
    node_extra = {broker: {"broker.rack": rack} for broker, rack in RACKS.items()}
    with make_cluster(target, workdir, {"replica.selector.class": SELECTOR}, node_extra=node_extra,
                      topology=topology) as running:
        yield running


@pytest.fixture
def cluster(shared_cluster: Cluster) -> Cluster:
    """The shared cluster, with every node running and every broker registered."""
    for node_id in shared_cluster.nodes:
        if not shared_cluster.is_running(node_id):
            shared_cluster.start_node(node_id)
    shared_cluster.wait_registered(shared_cluster.broker_ids)
    return shared_cluster
