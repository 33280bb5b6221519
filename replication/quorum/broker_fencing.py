"""The partition changes a broker's fencing or return brings, as metadata records.

A broker is fenced when its heartbeats stop for ``broker.session.timeout.ms``, when it finishes
a controlled shutdown, or when a new incarnation registers over a live one; a fenced broker
leads nothing and is in no ISR (``fence_records``). A broker that re-registers after an unclean
shutdown (its previous broker epoch is not the one it had) may have lost unflushed records, so
it loses its ELR claims (``drop_from_elr``). An unfenced broker is elected leader of the
partitions that had none and have it as a replica (``elections_after_unfence``). Each function
reads the current image and returns records; the controller commits them.
"""

from __future__ import annotations

import logging
from dataclasses import replace

from .elections import TopicConfigs, elect, without_replica
from .metadata_image import MetadataImage
from .metadata_records import FenceBrokerRecord, MetadataRecord, PartitionRecord
from .partition_registration import NO_LEADER

log = logging.getLogger(__name__)


def fence_records(image: MetadataImage, configs: TopicConfigs, broker_id: int) -> list[MetadataRecord]:
    """Fence the broker and take it out of every ISR and leadership."""
    records: list[MetadataRecord] = []
    # Elections see the broker as fenced already.
    live = {b.broker_id for b in image.live_brokers()} - {broker_id}
    for topic in image.topics.values():
        for index, reg in topic.partitions.items():
            if broker_id not in reg.replicas:
                continue
            changed = without_replica(topic, index, reg, broker_id, live, configs)
            if changed != reg:
                records.append(PartitionRecord.of(topic.topic_id, index, changed))
    records.append(FenceBrokerRecord(broker_id, image.brokers[broker_id].broker_epoch))
    return records


def drop_from_elr(image: MetadataImage, broker_id: int) -> list[MetadataRecord]:
    """The broker's ELR claims withdrawn (KIP-966: it restarted uncleanly)."""
    records: list[MetadataRecord] = []
    for topic in image.topics.values():
        for index, reg in topic.partitions.items():
            if broker_id in reg.elr:
                log.info("%s-%d: broker %d leaves the ELR (unclean shutdown)", topic.name, index, broker_id)
                records.append(PartitionRecord.of(topic.topic_id, index, replace(
                    reg, elr=tuple(r for r in reg.elr if r != broker_id), partition_epoch=reg.partition_epoch + 1)))
    return records


def elections_after_unfence(image: MetadataImage, configs: TopicConfigs, broker_id: int) -> list[MetadataRecord]:
    """Leaders for the leaderless partitions the returning broker is a replica of."""
    records: list[MetadataRecord] = []
    live = {b.broker_id for b in image.live_brokers()} | {broker_id}
    for topic in image.topics.values():
        for index, reg in topic.partitions.items():
            if reg.leader == NO_LEADER and broker_id in reg.replicas:
                elected = elect(topic, index, reg, live, configs)
                if elected.leader != NO_LEADER:
                    records.append(PartitionRecord.of(
                        topic.topic_id, index, replace(elected, partition_epoch=reg.partition_epoch + 1)))
    return records
