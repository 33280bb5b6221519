"""The replicated clusters the cluster tests share: one real Kafka 4.3.1 and one kbroker.

Starting four JVMs takes about half a minute on this machine, so the tests that need the
standard topology (compat/cluster.py: controller 100, brokers 1-3 in racks a, b, c with Kafka's
RackAwareReplicaSelector) share one cluster per target for the session; pytest groups the tests
by target. Tests that crash or stop nodes restart them; before each test every node runs and
every broker is registered again. Tests needing another topology (a three-voter quorum, a
network namespace) start their own.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from compat.cluster import Cluster, make_cluster

RACKS = {1: "a", 2: "b", 3: "c"}
SELECTOR = "org.apache.kafka.common.replica.RackAwareReplicaSelector"


@pytest.fixture(scope="session", params=["kafka", "kbroker"])
def shared_cluster(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    workdir = tmp_path_factory.mktemp(f"cluster-{request.param}")
    node_extra = {broker: {"broker.rack": rack} for broker, rack in RACKS.items()}
    with make_cluster(request.param, workdir, {"replica.selector.class": SELECTOR}, node_extra=node_extra) as running:
        yield running


@pytest.fixture
def cluster(shared_cluster: Cluster) -> Cluster:
    """The shared cluster, with every node running and every broker registered."""
    for node_id in shared_cluster.nodes:
        if not shared_cluster.is_running(node_id):
            shared_cluster.start_node(node_id)
    shared_cluster.wait_registered(shared_cluster.broker_ids)
    return shared_cluster
