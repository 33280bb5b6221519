"""meta.properties: which node and which cluster a log directory belongs to (Kafka's format).

Every log dir holds ``node.id``, ``directory.id``, ``version`` and ``cluster.id``. A directory
of another node, or dirs that disagree on the cluster id, stop the start-up with a clear error.
A single node invents its cluster id on first start; a cluster broker learns it from the
controller's metadata log and writes it then (``adopt_cluster_id``).
"""

from __future__ import annotations

import base64
import os
import time
import uuid

from kbroker.storage.file_io import replace_atomically

META_PROPERTIES = "meta.properties"


def random_id() -> str:
    """Kafka's text form of a random uuid: URL-safe base64 without padding."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()


def _read_meta(path: str) -> dict[str, str]:
    meta: dict[str, str] = {}
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            if "=" in line and not line.startswith("#"):
                key, _, value = line.strip().partition("=")
                meta[key] = value
    return meta


def init_log_dirs(log_dirs: list[str], node_id: int, invent_cluster_id: bool) -> str:
    """Create the dirs, check their meta.properties; returns the cluster id ("" if not known yet)."""
    for log_dir in log_dirs:
        os.makedirs(log_dir, exist_ok=True)
    cluster_ids = set()
    for log_dir in log_dirs:
        path = os.path.join(log_dir, META_PROPERTIES)
        if os.path.exists(path):
            meta = _read_meta(path)
            if meta.get("node.id") and int(meta["node.id"]) != node_id:
                raise RuntimeError(f"{path} belongs to node.id {meta['node.id']}, but this broker is node.id {node_id}")
            if meta.get("cluster.id"):
                cluster_ids.add(meta["cluster.id"])
    if len(cluster_ids) > 1:
        raise RuntimeError(f"log dirs disagree on cluster.id: {sorted(cluster_ids)}")
    cluster_id = cluster_ids.pop() if cluster_ids else (random_id() if invent_cluster_id else "")
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
                f"version=1\ncluster.id={cluster_id}\n"
            ).encode())
