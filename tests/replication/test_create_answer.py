"""A broker answers a forwarded CreateTopics once its metadata has the topic, not its logs.

Kafka's broker returns the controller's answer at commit, and its metadata cache takes a new
image before the replica manager makes the logs. kbroker's answer waits for the image only (so
Metadata from the answering broker lists the topic and its leaders at once, as a client asking
right after expects), not for this broker's thousand new logs to be written."""

from __future__ import annotations

import asyncio
import datetime
import uuid
from dataclasses import dataclass, field
from typing import Any

from kbroker.replication.forwarding_controller import ForwardingController
from kbroker.replication.quorum.metadata_image import MetadataImage
from kbroker.replication.quorum.metadata_records import PartitionRecord, TopicRecord
from kbroker.replication.quorum.partition_registration import PartitionRegistration
from kio.schema.create_topics.v7 import response as create_topics_v7
from kio.schema.types import TopicName
from kio.static.primitive import i16, i32, i32Timedelta

TOPIC_ID = uuid.UUID(int=11)
PARTITIONS = 1000


@dataclass
class Logs:
    def reconfigure(self, topic: str) -> None:
        pass

    def get(self, topic: str, index: int) -> None:
        return None


@dataclass
class SlowReplicas:
    """Replicas whose new logs are written only when the test says so."""

    log_manager: Logs = field(default_factory=Logs)
    partitions: dict[tuple[str, int], object] = field(default_factory=dict)
    applied: list[tuple[str, int]] = field(default_factory=list)
    logs_written: asyncio.Event = field(default_factory=asyncio.Event)

    async def create_logs(self, wanted: list[tuple[str, int, uuid.UUID, PartitionRegistration]]) -> None:
        await self.logs_written.wait()

    def apply_partition(self, topic: str, index: int, topic_id: uuid.UUID, reg: PartitionRegistration) -> None:
        self.applied.append((topic, index))

    def broker_registrations_changed(self, broker_ids: set[int]) -> None:
        pass


def test_create_topics_answers_when_the_image_has_the_topic_before_its_logs_exist() -> None:
    async def main() -> None:
        replicas = SlowReplicas()
        image = MetadataImage()
        catalogue: ForwardingController
        publishing: list[asyncio.Task[None]] = []

        async def controller(api_key: int, version: int, request: Any) -> Any:
            # The controller commits; the broker replays the records (publishing in the background).
            image.apply(0, TopicRecord("wide", TOPIC_ID))
            for index in range(PARTITIONS):
                image.apply(1 + index, PartitionRecord(TOPIC_ID, index, (1, 2, 3), (1, 2, 3), 1, 0, 0,
                                                       (), (), (), ()))
            publishing.append(asyncio.create_task(catalogue.sync_from_image(image, image.take_changes())))
            m = create_topics_v7
            return m.CreateTopicsResponse(throttle_time=i32Timedelta.parse(datetime.timedelta(0)),
                                          topics=(m.CreatableTopicResult(
                                              name=TopicName("wide"), topic_id=TOPIC_ID, error_code=i16(0),
                                              error_message=None, topic_config_error_code=i16(0),
                                              num_partitions=i32(PARTITIONS), replication_factor=i16(3),
                                              configs=()),))

        catalogue = ForwardingController(1, replicas, lambda key: [], 1, 3, send=controller)  # type: ignore[arg-type]
        image.take_changes()
        await catalogue.sync_from_image(image)  # the first publish (an empty cluster): changes are tracked from here
        info = await asyncio.wait_for(catalogue.create_topic("wide", PARTITIONS, 3, {}), 30)
        assert (info.name, info.partitions, info.topic_id) == ("wide", PARTITIONS, TOPIC_ID)
        assert replicas.applied == []  # answered while the logs are still being written
        registration = catalogue.partition_registration("wide", 999)
        assert registration is not None and registration.leader == 1  # Metadata here names the leader
        replicas.logs_written.set()
        await asyncio.wait_for(publishing[0], 30)  # the publish goes on to apply every registration
        assert len(replicas.applied) == PARTITIONS

    asyncio.run(main())
