"""Where a new topic's (or new partitions') replicas go, and the records that create them.

Which brokers: every *registered* broker, fenced ones included, as Kafka 4's controller places
on its usable brokers. (Kafka leaves out only a broker in the middle of a controlled shutdown;
kbroker fences a broker the moment it asks to shut down, so it has no such middle state, and
Kafka too places on a broker whose controlled shutdown has finished.) So losing one broker of
three does not stop RF 3 topics: the dead broker still gets its replica.

How: striped like Kafka's StripedReplicaPlacer. Leaders rotate, from a random start, over the
unfenced brokers ordered so that racks alternate — a leader is never fenced. Followers are taken
one per rack, walking the racks (ordered by name, rackless first) from the one after the
leader's, each rack handing out its brokers in turn and its unfenced ones before its fenced
ones; so with balanced racks every partition spans the racks, and a fenced broker gets a replica
only where no unfenced one fits. No unfenced broker at all, or a replication factor above the
number of registered brokers, is INVALID_REPLICATION_FACTOR with Kafka's message (CreateTopics
prefixes it with "Unable to replicate the partition N time(s): ").

A new partition's ISR is its replicas on unfenced brokers, in replica order, and the first of
them leads, at leader and partition epoch 0: a fenced replica starts outside the ISR and joins
it once it is back and has caught up (AlterPartition), as Kafka's new partitions do. A manual
assignment naming only fenced brokers for a partition is INVALID_REPLICA_ASSIGNMENT.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Collection, Iterable, Mapping, Sequence
from itertools import zip_longest

from kbroker.protocol.errors import ErrorCode, KafkaError

from .metadata_image import TOPIC_RESOURCE, BrokerRegistration
from .metadata_records import ConfigRecord, MetadataRecord, PartitionRecord, TopicRecord
from .partition_registration import PartitionRegistration

# Kafka 4.3.1's texts; kbroker has no cordoned log directories, but the messages are Kafka's.
ALL_FENCED = "All brokers are currently fenced, or have all their log directories cordoned."


class _Turns:
    """Brokers handed out in turn: each take starts where the previous one stopped."""

    def __init__(self, brokers: list[int], start: int) -> None:
        self.brokers = brokers
        self.cursor = start % len(brokers) if brokers else 0

    def take(self, chosen: Collection[int]) -> int | None:
        """The next broker not in ``chosen``, or None when all are."""
        n = len(self.brokers)
        for step in range(n):
            broker = self.brokers[(self.cursor + step) % n]
            if broker not in chosen:
                self.cursor = (self.cursor + step + 1) % n
                return broker
        return None


class _Rack:
    """One rack's brokers: unfenced ones are handed out before fenced ones."""

    def __init__(self, brokers: list[BrokerRegistration], rng: random.Random) -> None:
        unfenced = sorted(b.broker_id for b in brokers if not b.fenced)
        fenced = sorted(b.broker_id for b in brokers if b.fenced)
        self.unfenced = unfenced
        self.turns = (_Turns(unfenced, rng.randrange(len(unfenced) or 1)),
                      _Turns(fenced, rng.randrange(len(fenced) or 1)))

    def take(self, chosen: Collection[int]) -> int | None:
        for turns in self.turns:
            broker = turns.take(chosen)
            if broker is not None:
                return broker
        return None


def place(brokers: Iterable[BrokerRegistration], partitions: int, replication_factor: int,
          rng: random.Random | None = None) -> list[list[int]]:
    """Replica lists of ``partitions`` new partitions over the registered ``brokers`` (fenced
    included), each list led by an unfenced broker. Raises INVALID_REPLICATION_FACTOR with
    Kafka's placer message (CreatePartitions answers it as is)."""
    rng = rng or random.Random()
    usable = list(brokers)
    if not any(not b.fenced for b in usable):
        raise KafkaError(ErrorCode.invalid_replication_factor, ALL_FENCED)
    if replication_factor > len(usable):
        raise KafkaError(
            ErrorCode.invalid_replication_factor,
            f"The target replication factor of {replication_factor} cannot be reached because only "
            f"{len(usable)} broker(s) are registered or some brokers have all their log directories cordoned.",
        )
    by_name: dict[str | None, list[BrokerRegistration]] = {}
    for broker in usable:
        by_name.setdefault(broker.rack, []).append(broker)
    names = sorted(by_name, key=lambda name: (name is not None, name or ""))
    racks = [_Rack(by_name[name], rng) for name in names]
    # Leaders in an order where racks alternate, so consecutive partitions lead in other racks.
    leaders = [(index, broker) for column in zip_longest(*(rack.unfenced for rack in racks))
               for index, broker in enumerate(column) if broker is not None]
    start = rng.randrange(len(leaders))
    placed: list[list[int]] = []
    for p in range(partitions):
        rack_index, leader = leaders[(start + p) % len(leaders)]
        chosen = [leader]
        while len(chosen) < replication_factor:
            rack_index = (rack_index + 1) % len(racks)
            follower = racks[rack_index].take(chosen)
            if follower is not None:
                chosen.append(follower)
        placed.append(chosen)
    return placed


def place_topic(brokers: Iterable[BrokerRegistration], partitions: int, replication_factor: int,
                rng: random.Random | None = None) -> list[list[int]]:
    """``place`` for CreateTopics, whose answer Kafka prefixes with the replication factor."""
    try:
        return place(brokers, partitions, replication_factor, rng)
    except KafkaError as exc:
        raise KafkaError(exc.code, f"Unable to replicate the partition {replication_factor} time(s): "
                                   f"{exc.message}") from None


def new_partitions(replica_lists: Sequence[Sequence[int]], unfenced: Collection[int],
                   first_partition: int) -> list[PartitionRegistration]:
    """Registrations of new partitions numbered from ``first_partition``: ISR the replicas on
    unfenced brokers, the first of them leading. A list with no unfenced broker (only a manual
    assignment can have one) is INVALID_REPLICA_ASSIGNMENT, with Kafka's message."""
    registrations = []
    for index, replicas in enumerate(replica_lists, first_partition):
        isr = tuple(r for r in replicas if r in unfenced)
        if not isr:
            raise KafkaError(
                ErrorCode.invalid_replica_assignment,
                f"All brokers specified in the manual partition assignment for partition {index} "
                "are fenced or in controlled shutdown.",
            )
        registrations.append(PartitionRegistration(tuple(replicas), isr, isr[0], 0, 0))
    return registrations


def partition_records(topic_id: uuid.UUID, first_partition: int,
                      registrations: Sequence[PartitionRegistration]) -> list[MetadataRecord]:
    """PartitionRecords of new partitions, numbered from ``first_partition``."""
    return [PartitionRecord.of(topic_id, index, reg) for index, reg in enumerate(registrations, first_partition)]


def topic_records(name: str, topic_id: uuid.UUID, configs: Mapping[str, str],
                  registrations: Sequence[PartitionRegistration]) -> list[MetadataRecord]:
    """A new topic: its TopicRecord, its config overrides, its partitions."""
    records: list[MetadataRecord] = [TopicRecord(name, topic_id)]
    records += [ConfigRecord(TOPIC_RESOURCE, name, k, v) for k, v in sorted(configs.items())]
    return records + partition_records(topic_id, 0, registrations)
