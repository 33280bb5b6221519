"""meta.properties as Kafka writes it, and the start-up refusals of another node's or cluster's dirs."""

from __future__ import annotations

import pytest

from kbroker.node.meta_properties import (
    META_PROPERTIES,
    ClusterIdentityError,
    check_cluster_id,
    init_log_dirs,
)

CLUSTER = "MkU3OEVBNTcwNTJENDM2Qk"
OTHER = "5L6g3nShT-eMCtK--X86sw"


def read(path) -> dict[str, str]:
    lines = path.read_text().splitlines()
    return dict(line.split("=", 1) for line in lines if "=" in line and not line.startswith("#"))


def test_a_fresh_dir_gets_kafkas_four_keys_with_the_given_cluster_id(tmp_path) -> None:
    dirs = [str(tmp_path / "a"), str(tmp_path / "b")]
    assert init_log_dirs(dirs, 7, invent_cluster_id=False, given_cluster_id=CLUSTER) == CLUSTER
    a, b = read(tmp_path / "a" / META_PROPERTIES), read(tmp_path / "b" / META_PROPERTIES)
    assert set(a) == {"node.id", "directory.id", "version", "cluster.id"}
    assert (a["node.id"], a["version"], a["cluster.id"]) == ("7", "1", CLUSTER)
    assert len(a["directory.id"]) == 22 and a["directory.id"] != b["directory.id"]  # one uuid per dir


def test_without_an_id_only_the_sole_voter_invents_one(tmp_path) -> None:
    assert init_log_dirs([str(tmp_path / "broker")], 1, invent_cluster_id=False) == ""
    assert not (tmp_path / "broker" / META_PROPERTIES).exists()  # written when learnt from the metadata log
    invented = init_log_dirs([str(tmp_path / "single")], 1, invent_cluster_id=True)
    assert len(invented) == 22
    assert init_log_dirs([str(tmp_path / "single")], 1, invent_cluster_id=True) == invented  # kept


def test_a_given_id_other_than_the_dirs_is_refused_naming_both_and_the_file(tmp_path) -> None:
    init_log_dirs([str(tmp_path)], 1, invent_cluster_id=False, given_cluster_id=CLUSTER)
    with pytest.raises(ClusterIdentityError) as refused:
        init_log_dirs([str(tmp_path)], 1, invent_cluster_id=False, given_cluster_id=OTHER, given_origin="CLUSTER_ID")
    message = str(refused.value)
    assert CLUSTER in message and OTHER in message and "CLUSTER_ID" in message
    assert str(tmp_path / META_PROPERTIES) in message
    assert init_log_dirs([str(tmp_path)], 1, invent_cluster_id=False, given_cluster_id=CLUSTER) == CLUSTER


def test_another_nodes_dir_and_disagreeing_dirs_are_refused(tmp_path) -> None:
    init_log_dirs([str(tmp_path / "a")], 1, invent_cluster_id=False, given_cluster_id=CLUSTER)
    init_log_dirs([str(tmp_path / "b")], 1, invent_cluster_id=False, given_cluster_id=OTHER)
    with pytest.raises(ClusterIdentityError, match=r"node\.id 1, but this node is node\.id 2"):
        init_log_dirs([str(tmp_path / "a")], 2, invent_cluster_id=False)
    with pytest.raises(ClusterIdentityError, match=r"disagree on cluster\.id") as refused:
        init_log_dirs([str(tmp_path / "a"), str(tmp_path / "b")], 1, invent_cluster_id=False)
    assert CLUSTER in str(refused.value) and OTHER in str(refused.value)


def test_a_zookeeper_era_meta_properties_is_refused(tmp_path) -> None:
    (tmp_path / META_PROPERTIES).write_text("version=0\nbroker.id=1\ncluster.id=x\n")
    with pytest.raises(ClusterIdentityError, match="version=0"):
        init_log_dirs([str(tmp_path)], 1, invent_cluster_id=False)


def test_cluster_ids_kafka_takes_are_taken() -> None:
    # kafka-storage format (4.3.1) formats with any of these; only what meta.properties cannot hold is refused.
    for cluster_id in (CLUSTER, OTHER, "bogus", "AAAAAAAAAAAAAAAAAAAAAA"):
        assert check_cluster_id(cluster_id, "--cluster-id") == cluster_id
    for bad in ("", "   ", "a\nb", " padded "):
        with pytest.raises(ClusterIdentityError, match="--cluster-id"):
            check_cluster_id(bad, "--cluster-id")
