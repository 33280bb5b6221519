"""A metadata change reaches a broker's catalogue and replicas at the cost of what it touched.

The broker's MetadataImage records which topics and partitions the applied records touched
(``ImageChanges``); ForwardingController.sync_from_image applies those only, so an ISR change to one
partition of a 1000-partition topic updates that one replica, and the whole image is walked only
for the first image (or a snapshot's) and for a dynamic broker config change (every topic's
resolved configs then change)."""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import dataclass, field

from kbroker.replication.forwarding_controller import ForwardingController
from kbroker.replication.quorum.metadata_image import MetadataImage
from kbroker.replication.quorum.metadata_records import ConfigRecord, PartitionRecord, TopicRecord, UnfenceBrokerRecord
from kbroker.replication.quorum.partition_registration import PartitionRegistration

TOPIC_ID = uuid.UUID(int=7)
PARTITIONS = 1000


@dataclass
class CountingLogs:
    reconfigured: list[str] = field(default_factory=list)

    def reconfigure(self, topic: str) -> None:
        self.reconfigured.append(topic)

    def get(self, topic: str, index: int) -> None:
        return None


@dataclass
class CountingReplicas:
    """What the catalogue asks of the ReplicaManager, counted."""

    log_manager: CountingLogs = field(default_factory=CountingLogs)
    applied: list[tuple[str, int, PartitionRegistration]] = field(default_factory=list)
    partitions: dict[tuple[str, int], object] = field(default_factory=dict)

    created: list[tuple[str, int, uuid.UUID, PartitionRegistration]] = field(default_factory=list)
    rechecked: list[set[int]] = field(default_factory=list)

    async def create_logs(self, wanted: list[tuple[str, int, uuid.UUID, PartitionRegistration]]) -> None:
        self.created += wanted

    def apply_partition(self, topic: str, index: int, topic_id: uuid.UUID, reg: PartitionRegistration) -> None:
        self.applied.append((topic, index, reg))

    def broker_registrations_changed(self, broker_ids: set[int]) -> None:
        self.rechecked.append(set(broker_ids))


def partition(index: int, isr: tuple[int, ...], partition_epoch: int) -> PartitionRecord:
    return PartitionRecord(TOPIC_ID, index, (1, 2, 3), isr, 1, 0, partition_epoch, (), (), (), ())


def test_one_partition_change_touches_one_replica() -> None:
    async def main() -> None:
        replicas = CountingReplicas()
        catalogue = ForwardingController(1, replicas, lambda key: [], 1, 3, send=None)  # type: ignore[arg-type]
        image = MetadataImage()
        offset = 0
        image.apply(offset, TopicRecord("wide", TOPIC_ID))
        for index in range(PARTITIONS):
            offset += 1
            image.apply(offset, partition(index, (1, 2, 3), 0))
        # The first publish hands over the whole image.
        image.take_changes()
        await catalogue.sync_from_image(image)
        assert len(replicas.applied) == PARTITIONS
        assert len(replicas.created) == PARTITIONS  # their logs written together first
        assert catalogue.topics["wide"].partitions == PARTITIONS

        replicas.applied.clear()
        image.apply(offset + 1, partition(417, (1, 3), 1))  # one ISR shrinks
        await catalogue.sync_from_image(image, image.take_changes())
        assert [(topic, index, reg.isr) for topic, index, reg in replicas.applied] == [("wide", 417, (1, 3))]
        assert replicas.log_manager.reconfigured == ["wide"]  # only when the topic first appeared

        replicas.applied.clear()
        image.apply(offset + 2, partition(PARTITIONS, (1, 2, 3), 0))  # CreatePartitions: one more
        await catalogue.sync_from_image(image, image.take_changes())
        assert [(topic, index) for topic, index, _reg in replicas.applied] == [("wide", PARTITIONS)]
        assert len(replicas.created) == PARTITIONS  # one new log goes the ordinary way
        assert catalogue.topics["wide"].partitions == PARTITIONS + 1

        # A dynamic broker default changes every topic's resolved configs: each is reconfigured,
        # and no replica is touched.
        replicas.applied.clear()
        image.apply(offset + 3, ConfigRecord(4, "", "log.retention.ms", "1000"))
        await catalogue.sync_from_image(image, image.take_changes())
        assert replicas.applied == []
        assert replicas.log_manager.reconfigured == ["wide", "wide"]

        # An unfenced broker may now join ISRs it caught up with: only its id is handed on.
        replicas.rechecked.clear()
        image.apply(offset + 4, UnfenceBrokerRecord(2, 9))
        await catalogue.sync_from_image(image, image.take_changes())
        assert replicas.applied == [] and replicas.rechecked == [{2}]

    asyncio.run(main())
