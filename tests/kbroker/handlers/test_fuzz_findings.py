"""Requests the protocol fuzzer (``compat/fuzz``) found kbroker mishandling, each now answered
as Apache Kafka 4.3.1 answers it. The docstring of each test names the fuzz case it came from."""

from __future__ import annotations

import uuid

from kio.schema.metadata.v11 import request as metadata_v11
from kio.schema.metadata.v12 import request as metadata_v12

from tests.broker_process import BrokerProcess

from .wire import call

INVALID_REQUEST = 42


def test_metadata_topic_with_neither_name_nor_id(broker: BrokerProcess) -> None:
    """Seed 13, case 1657: Metadata v11 naming a topic by a null name and the zero id. The
    answer's topic name is not nullable before v12; kbroker put the null there, failed to
    encode the answer and never answered. Kafka: INVALID_REQUEST with an empty name."""
    zero = uuid.UUID(int=0)
    request = metadata_v11.MetadataRequest(
        topics=(metadata_v11.MetadataRequestTopic(topic_id=zero, name=None),),
        allow_auto_topic_creation=False, include_topic_authorized_operations=False,
    )
    [topic] = call(broker.bootstrap, request, 11).topics
    assert (topic.error_code, topic.name) == (INVALID_REQUEST, "")
    request = metadata_v12.MetadataRequest(
        topics=(metadata_v12.MetadataRequestTopic(topic_id=zero, name=None),),
        allow_auto_topic_creation=False, include_topic_authorized_operations=False,
    )
    [topic] = call(broker.bootstrap, request, 12).topics
    assert (topic.error_code, topic.name) == (INVALID_REQUEST, None)
