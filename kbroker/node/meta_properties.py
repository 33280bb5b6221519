"""meta.properties: which node and which cluster a log directory belongs to (Kafka's format).

Every log dir (and ``metadata.log.dir``) holds ``node.id``, ``directory.id`` (a uuid of its
own), ``version=1`` (KRaft) and ``cluster.id``, as ``kafka-storage format`` writes them. A
directory of another node, dirs that disagree on the cluster id, or a cluster id given at start
(``--cluster-id``, ``KAFKA_CLUSTER_ID``/``CLUSTER_ID``) other than the one the dirs hold stop the
start-up with a message naming both ids and the file. Without a given id, a quorum's sole voter
(a single node) invents one on first start; every other node learns it from the metadata log,
where the first active controller wrote it, and writes it then (``adopt_cluster_id``).
"""

from __future__ import annotations

import base64
import os
import time
import uuid

from kbroker.storage.file_io import replace_atomically

META_PROPERTIES = "meta.properties"
# Kafka's meta.properties version of a KRaft node (0 was a ZooKeeper broker's).
KRAFT_VERSION = "1"


class ClusterIdentityError(RuntimeError):
    """The log dirs belong to another node or cluster than the one starting on them."""


def random_id() -> str:
    """Kafka's text form of a random uuid: URL-safe base64 without padding."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()


def check_cluster_id(cluster_id: str, origin: str) -> str:
    """``cluster_id`` as given at start, or ``ClusterIdentityError``.

    Kafka 4.3.1 takes any text as a cluster id (``kafka-storage format -t bogus`` formats, and the
    broker then runs as cluster "bogus"); refused here is only what meta.properties cannot hold:
    nothing at all, or a line break (the file would then say something else)."""
    if not cluster_id.strip():
        raise ClusterIdentityError(f"{origin}: the cluster id is empty (kafka-storage random-uuid makes one)")
    if any(ch in cluster_id for ch in "\r\n") or cluster_id != cluster_id.strip():
        raise ClusterIdentityError(f"{origin}: cluster id {cluster_id!r} has surrounding blanks or a line break")
    return cluster_id


def _read_meta(path: str) -> dict[str, str]:
    meta: dict[str, str] = {}
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            if "=" in line and not line.startswith("#"):
                key, _, value = line.strip().partition("=")
                meta[key] = value
    return meta


def init_log_dirs(log_dirs: list[str], node_id: int, invent_cluster_id: bool,
                  given_cluster_id: str = "", given_origin: str = "--cluster-id") -> str:
    """Create the dirs, check their meta.properties; returns the cluster id ("" if not known yet).

    ``given_cluster_id`` (from ``given_origin``) is the id the node was started with; a fresh dir
    is written with it, and a dir that names another is refused."""
    for log_dir in log_dirs:
        os.makedirs(log_dir, exist_ok=True)
    found: dict[str, str] = {}  # cluster id -> the meta.properties that names it
    for log_dir in log_dirs:
        path = os.path.join(log_dir, META_PROPERTIES)
        if not os.path.exists(path):
            continue
        meta = _read_meta(path)
        if meta.get("node.id") and int(meta["node.id"]) != node_id:
            raise ClusterIdentityError(
                f"{path} belongs to node.id {meta['node.id']}, but this node is node.id {node_id}")
        if meta.get("version", KRAFT_VERSION) != KRAFT_VERSION:
            raise ClusterIdentityError(
                f"{path} has version={meta['version']}; a KRaft node's meta.properties has version={KRAFT_VERSION}")
        if meta.get("cluster.id"):
            found.setdefault(meta["cluster.id"], path)
    if len(found) > 1:
        named = ", ".join(f"{cid} in {path}" for cid, path in sorted(found.items()))
        raise ClusterIdentityError(f"log dirs disagree on cluster.id: {named}")
    if found and given_cluster_id:
        ((existing, path),) = found.items()
        if existing != given_cluster_id:
            raise ClusterIdentityError(
                f"INCONSISTENT_CLUSTER_ID: {given_origin} is {given_cluster_id} but {path} holds "
                f"cluster.id={existing}: this log dir belongs to another cluster (start with that id, "
                f"or give an empty log dir)")
    cluster_id = next(iter(found), "") or given_cluster_id or (random_id() if invent_cluster_id else "")
    if cluster_id:
        adopt_cluster_id(log_dirs, node_id, cluster_id)
    return cluster_id


def adopt_cluster_id(log_dirs: list[str], node_id: int, cluster_id: str) -> None:
    """Write meta.properties into every dir that has none yet."""
    for log_dir in log_dirs:
        path = os.path.join(log_dir, META_PROPERTIES)
        if not os.path.exists(path):
            replace_atomically(path, (
                f"#\n#{time.ctime()}\nnode.id={node_id}\ndirectory.id={random_id()}\n"
                f"version={KRAFT_VERSION}\ncluster.id={cluster_id}\n"
            ).encode())
