"""Importing a single node's catalogue written by kbroker before it had one control plane.

Until then a single node kept its topics in ``<first log dir>/kbroker-metadata.json`` and its
producer id blocks in ``kbroker-producer-ids``; now every node keeps them in the metadata log.
At the first start of such a node (its metadata log still empty) the active controller writes
them as its first metadata records — topic ids kept, so each log's ``partition.metadata``
still matches; every partition led by this node; producer ids continuing past every block
handed out — and the old files are renamed ``*.imported``.
"""

from __future__ import annotations

import json
import logging
import os
import uuid

from .metadata_image import BROKER_RESOURCE, TOPIC_RESOURCE
from .metadata_records import ConfigRecord, MetadataRecord, PartitionRecord, ProducerIdsRecord, TopicRecord
from .partition_registration import PartitionRegistration

log = logging.getLogger(__name__)

CATALOGUE_FILE = "kbroker-metadata.json"
PRODUCER_ID_FILE = "kbroker-producer-ids"
IMPORTED_SUFFIX = ".imported"


def legacy_records(log_dir: str, node_id: int) -> list[MetadataRecord]:
    """The records that recreate ``log_dir``'s old catalogue (none if it has none)."""
    path = os.path.join(log_dir, CATALOGUE_FILE)
    if not os.path.exists(path):
        return []
    with open(path, encoding="utf-8") as fh:
        data = json.load(fh)
    records: list[MetadataRecord] = [
        ConfigRecord(BROKER_RESOURCE, "", k, v) for k, v in sorted(data.get("cluster_configs", {}).items())
    ]
    for entry in data["topics"]:
        topic_id = uuid.UUID(entry["id"])
        records.append(TopicRecord(entry["name"], topic_id))
        records += [ConfigRecord(TOPIC_RESOURCE, entry["name"], k, v) for k, v in sorted(entry["configs"].items())]
        only = (node_id,)
        records += [PartitionRecord.of(topic_id, index, PartitionRegistration(only, only, node_id, 0, 0))
                    for index in range(entry["partitions"])]
    next_producer_id = _next_producer_id(log_dir)
    if next_producer_id:
        records.append(ProducerIdsRecord(node_id, -1, next_producer_id))
    log.info("importing the single-node catalogue %s: %d topics, next producer id %d",
             path, len(data["topics"]), next_producer_id)
    return records


def mark_imported(log_dir: str) -> None:
    """Once the records are committed: the old files are kept, renamed, never read again."""
    for name in (CATALOGUE_FILE, PRODUCER_ID_FILE):
        path = os.path.join(log_dir, name)
        if os.path.exists(path):
            os.replace(path, path + IMPORTED_SUFFIX)


def _next_producer_id(log_dir: str) -> int:
    try:
        with open(os.path.join(log_dir, PRODUCER_ID_FILE), encoding="ascii") as fh:
            return int(fh.read().strip() or 0)
    except FileNotFoundError:
        return 0
