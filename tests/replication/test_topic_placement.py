"""Replica placement as Kafka 4's controller does it: registered brokers, fenced ones included,
leaders unfenced, racks spread, Kafka's INVALID_REPLICATION_FACTOR texts (topic_placement.py).

Each property is checked over several random starts (seeded), since placement starts at a
random broker as Kafka's does.
"""

from __future__ import annotations

import random
from collections import Counter
from itertools import pairwise

import pytest
from kbroker.protocol.errors import ErrorCode, KafkaError
from kbroker.replication.quorum.metadata_image import BrokerRegistration
from kbroker.replication.quorum.topic_placement import ALL_FENCED, new_partitions, place, place_topic

SEEDS = range(20)


def brokers(fenced: set[int] = frozenset(), racks: dict[int, str] | None = None,
            ids: tuple[int, ...] = (1, 2, 3)) -> list[BrokerRegistration]:
    return [BrokerRegistration(b, 10 + b, f"incarnation-{b}", "127.0.0.1", 9092, (racks or {}).get(b),
                               fenced=b in fenced) for b in ids]


@pytest.mark.parametrize("seed", SEEDS)
def test_one_fenced_broker_of_three_still_gets_its_replica_but_never_leads(seed):
    lists = place(brokers(fenced={3}), 6, 3, random.Random(seed))
    assert all(sorted(replicas) == [1, 2, 3] for replicas in lists)
    assert Counter(replicas[0] for replicas in lists) == {1: 3, 2: 3}  # leaders spread over the survivors
    # The survivors come first: the fenced broker is the last resort.
    assert all(replicas[2] == 3 for replicas in lists)


@pytest.mark.parametrize("seed", SEEDS)
def test_a_fenced_broker_gets_no_replica_while_unfenced_ones_suffice(seed):
    lists = place(brokers(fenced={3}), 4, 2, random.Random(seed))
    assert all(sorted(replicas) == [1, 2] for replicas in lists)


@pytest.mark.parametrize("seed", SEEDS)
def test_racks_are_spread_and_leaders_and_replicas_balanced(seed):
    racks = {1: "a", 2: "a", 3: "b", 4: "b"}
    lists = place(brokers(racks=racks, ids=(1, 2, 3, 4)), 8, 3, random.Random(seed))
    assert all(len(set(replicas)) == 3 and {racks[r] for r in replicas} == {"a", "b"} for replicas in lists)
    assert Counter(replicas[0] for replicas in lists) == {1: 2, 2: 2, 3: 2, 4: 2}
    # 24 replicas over 4 brokers: about 6 each (the random starts make it 5 to 7 at worst).
    assert all(5 <= count <= 7 for count in Counter(r for replicas in lists for r in replicas).values())
    # Consecutive partitions lead in alternating racks.
    assert all(racks[a[0]] != racks[b[0]] for a, b in pairwise(lists))


@pytest.mark.parametrize("seed", SEEDS)
def test_a_rack_whose_only_broker_is_fenced_still_gets_a_replica(seed):
    racks = {1: "a", 2: "b", 3: "c"}
    lists = place(brokers(fenced={3}, racks=racks), 4, 3, random.Random(seed))
    assert all(sorted(replicas) == [1, 2, 3] and replicas[0] != 3 for replicas in lists)


def test_errors_are_kafkas():
    with pytest.raises(KafkaError) as all_fenced:
        place(brokers(fenced={1, 2, 3}), 1, 1)
    assert (all_fenced.value.code, all_fenced.value.message) == (ErrorCode.invalid_replication_factor, ALL_FENCED)
    with pytest.raises(KafkaError) as too_few:
        place(brokers(fenced={3}), 1, 4)
    assert too_few.value.code == ErrorCode.invalid_replication_factor
    assert too_few.value.message == ("The target replication factor of 4 cannot be reached because only 3 "
                                     "broker(s) are registered or some brokers have all their log directories "
                                     "cordoned.")
    with pytest.raises(KafkaError) as for_topic:  # CreateTopics prefixes the placer's text
        place_topic(brokers(), 1, 4)
    assert for_topic.value.message.startswith("Unable to replicate the partition 4 time(s): The target replication")


def test_new_partitions_start_with_the_unfenced_replicas_as_isr():
    regs = new_partitions([[3, 1, 2], [2, 3, 1]], {1, 2}, first_partition=5)
    assert [(r.replicas, r.isr, r.leader, r.leader_epoch, r.partition_epoch) for r in regs] == [
        ((3, 1, 2), (1, 2), 1, 0, 0), ((2, 3, 1), (2, 1), 2, 0, 0)]
    with pytest.raises(KafkaError) as only_fenced:  # a manual assignment on fenced brokers only
        new_partitions([[1, 2], [3]], {1, 2}, first_partition=5)
    assert only_fenced.value.code == ErrorCode.invalid_replica_assignment
    assert only_fenced.value.message == ("All brokers specified in the manual partition assignment for partition 6 "
                                         "are fenced or in controlled shutdown.")
