"""ISR shrinks/expands are counted as the controller accepts each, elections as each
PartitionRecord is replayed, so a change that reverts before the next scrape still counts."""

from __future__ import annotations

import uuid

from kbroker.replication.quorum.metadata_image import MetadataImage
from kbroker.replication.quorum.metadata_records import PartitionRecord, TopicRecord
from kbroker.replication.quorum.partition_registration import PartitionRegistration

from kbroker.metrics.partition_changes import Elections, IsrChanges

TOPIC_ID = uuid.uuid4()


def image_with(listener: object) -> MetadataImage:
    image = MetadataImage()
    image.on_partition = listener  # type: ignore[assignment]
    image.apply(0, TopicRecord("t", TOPIC_ID))
    return image


def replay(image: MetadataImage, *registrations: PartitionRegistration) -> None:
    for registration in registrations:
        image.apply(image.offset + 1, PartitionRecord.of(TOPIC_ID, 0, registration))


def test_an_isr_shrink_undone_before_a_scrape_counts_once_each_way() -> None:
    changes = IsrChanges()
    changes.committed((1, 2, 3), (1, 2))  # the leader took 3 out
    changes.committed((1, 2), (1, 2, 3))  # and back in
    assert (changes.shrinks, changes.expands) == (1, 1)


def test_elections_clean_and_unclean() -> None:
    elections = Elections()
    image = image_with(elections.replayed)
    replay(image,
           PartitionRegistration((1, 2, 3), (1, 2, 3), 1, 0, 0),
           PartitionRegistration((1, 2, 3), (1, 2), 1, 0, 1),  # an ISR change: no election
           PartitionRegistration((1, 2, 3), (2,), 2, 1, 2),  # 1 dies: 2 from the ISR
           PartitionRegistration((1, 2, 3), (2,), -1, 2, 3),  # 2 dies: offline
           PartitionRegistration((1, 2, 3), (3,), 3, 3, 4),  # 3 was not in the ISR: unclean
           PartitionRegistration((1, 2, 3), (3,), 3, 4, 5))  # same leader, new epoch: no election
    assert (elections.elections, elections.unclean) == (2, 1)


def test_an_elr_member_is_a_clean_election() -> None:
    elections = Elections()
    image = image_with(elections.replayed)
    replay(image, PartitionRegistration((1, 2, 3), (1,), 1, 0, 0, elr=(2,)),
           PartitionRegistration((1, 2, 3), (2,), 2, 1, 1))
    assert (elections.elections, elections.unclean) == (1, 0)
