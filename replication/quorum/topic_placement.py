"""Where a new topic's (or new partitions') replicas go, and the records that create them.

Placement is Kafka's rack-aware round robin: the live brokers ordered so that racks alternate,
leaders rotating over that order from a random start and followers the next brokers in it, so
with balanced racks every partition's replicas span the racks. A replication factor above the
number of live brokers is INVALID_REPLICATION_FACTOR. A new partition starts with its replica
list as ISR, the first replica leading, at leader and partition epoch 0.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Mapping, Sequence

from kbroker.protocol.errors import ErrorCode, KafkaError

from .metadata_image import TOPIC_RESOURCE, BrokerRegistration
from .metadata_records import ConfigRecord, MetadataRecord, PartitionRecord, TopicRecord
from .partition_registration import PartitionRegistration


def place(live: Sequence[BrokerRegistration], partitions: int, replication_factor: int,
          first_partition: int) -> list[list[int]]:
    """Replica lists of partitions ``first_partition`` .. ``first_partition + partitions - 1``."""
    if replication_factor > len(live):
        raise KafkaError(
            ErrorCode.invalid_replication_factor,
            f"Unable to replicate the partition {replication_factor} time(s): The target replication factor "
            f"of {replication_factor} cannot be reached because only {len(live)} broker(s) are registered or "
            "some brokers have all their log directories cordoned.",
        )
    by_rack: dict[str | None, list[int]] = {}
    for broker in live:
        by_rack.setdefault(broker.rack, []).append(broker.broker_id)
    ordered: list[int] = []
    racks = list(by_rack.values())
    while any(racks):
        for members in racks:
            if members:
                ordered.append(members.pop(0))
    n = len(ordered)
    start = random.randrange(n)
    return [
        [ordered[(start + p + j) % n] for j in range(replication_factor)]
        for p in range(first_partition, first_partition + partitions)
    ]


def partition_records(topic_id: uuid.UUID, first_partition: int,
                      replica_lists: Sequence[Sequence[int]]) -> list[MetadataRecord]:
    """PartitionRecords of new partitions, numbered from ``first_partition``."""
    return [
        PartitionRecord.of(topic_id, first_partition + i, PartitionRegistration(tuple(rs), tuple(rs), rs[0], 0, 0))
        for i, rs in enumerate(replica_lists)
    ]


def topic_records(name: str, topic_id: uuid.UUID, configs: Mapping[str, str],
                  replica_lists: Sequence[Sequence[int]]) -> list[MetadataRecord]:
    """A new topic: its TopicRecord, its config overrides, its partitions."""
    records: list[MetadataRecord] = [TopicRecord(name, topic_id)]
    records += [ConfigRecord(TOPIC_RESOURCE, name, k, v) for k, v in sorted(configs.items())]
    return records + partition_records(topic_id, 0, replica_lists)
