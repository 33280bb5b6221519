"""The fuzzer's own well-formed requests: setting up the world's topics, probing, cleaning up.

``BrokerLink`` is one connection that sends a kio request entity and decodes its answer (the
API key and version come from the entity's class). On top of it: creating the world's topics
and waiting until each partition has a leader (Kafka creates logs after the controller commits
the topic), writing the known records, reading topic ids, deleting topics, and the liveness
probe the runner makes after every batch — Metadata for the world's topics on a new connection,
answered within a deadline. Versions used here are ones Kafka 4.3.1 and kbroker both serve.
"""

from __future__ import annotations

import asyncio
import datetime
import struct
import time
import uuid
from collections.abc import Iterable
from typing import Any

from kbroker.protocol.codec import decode_response, encode_request
from kbroker.protocol.record_builder import build_batch
from kio.schema.create_topics.v7 import request as create_topics_v7
from kio.schema.delete_topics.v6 import request as delete_topics_v6
from kio.schema.metadata.v12 import request as metadata_v12
from kio.schema.produce.v9 import request as produce_v9

from compat.fuzz import world

CALL_TIMEOUT_S = 30.0
LEADER_WAIT_S = 60.0
POLL_S = 0.1
NOT_LEADER_YET = {3, 5, 6}  # UNKNOWN_TOPIC_OR_PARTITION, LEADER_NOT_AVAILABLE, NOT_LEADER_OR_FOLLOWER


class ControlError(RuntimeError):
    """A set-up or clean-up request failed."""


async def read_frame(reader: asyncio.StreamReader) -> bytes:
    """One size-prefixed frame (without the prefix); IncompleteReadError at end of stream."""
    (size,) = struct.unpack(">i", await reader.readexactly(4))
    return await reader.readexactly(size)


class BrokerLink:
    """One connection for well-formed requests, answered one at a time."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        self.correlation_id = 0

    @classmethod
    async def open(cls, host: str, port: int, timeout: float = CALL_TIMEOUT_S) -> BrokerLink:
        reader, writer = await asyncio.wait_for(asyncio.open_connection(host, port), timeout)
        return cls(reader, writer)

    async def call(self, body: Any, timeout: float = CALL_TIMEOUT_S) -> Any:
        """Send ``body`` (a kio request entity) and return the decoded response entity."""
        self.correlation_id += 1
        api_key, api_version = int(body.__api_key__), int(body.__version__)
        self.writer.write(encode_request(api_key, api_version, self.correlation_id, world.CLIENT_ID, body))
        frame = await asyncio.wait_for(read_frame(self.reader), timeout)
        correlation_id, response = decode_response(api_key, api_version, frame)
        if correlation_id != self.correlation_id:
            raise ControlError(f"answer to correlation id {correlation_id}, expected {self.correlation_id}")
        return response

    def close(self) -> None:
        self.writer.close()


def metadata_request(names: Iterable[str] | None) -> metadata_v12.MetadataRequest:
    topics = None if names is None else tuple(metadata_v12.MetadataRequestTopic(topic_id=None, name=n) for n in names)
    return metadata_v12.MetadataRequest(
        topics=topics, allow_auto_topic_creation=False, include_topic_authorized_operations=False
    )


async def describe(link: BrokerLink, names: Iterable[str] | None) -> dict[str, tuple[uuid.UUID, dict[int, int]]]:
    """{topic: (topic id, {partition: leader})} for the topics that exist (all of them for None)."""
    response = await link.call(metadata_request(names))
    return {
        t.name: (t.topic_id, {p.partition_index: p.leader_id for p in t.partitions})
        for t in response.topics
        if t.error_code == 0 and t.name is not None
    }


async def topic_ids(link: BrokerLink, names: Iterable[str]) -> dict[str, uuid.UUID]:
    return {name: tid for name, (tid, _leaders) in (await describe(link, names)).items()}


async def create_topics(link: BrokerLink, specs: Iterable[world.TopicSpec]) -> dict[str, int]:
    """CreateTopics for ``specs``: {topic: error code}."""
    request = create_topics_v7.CreateTopicsRequest(
        topics=tuple(
            create_topics_v7.CreatableTopic(
                name=s.name, num_partitions=s.partitions, replication_factor=1, assignments=(),
                configs=tuple(create_topics_v7.CreatableTopicConfig(name=k, value=v) for k, v in s.configs.items()),
            )
            for s in specs
        ),
        timeout=datetime.timedelta(seconds=30), validate_only=False,
    )  # fmt: skip
    response = await link.call(request)
    return {t.name: int(t.error_code) for t in response.topics}


async def delete_topics(link: BrokerLink, names: Iterable[str]) -> dict[str, int]:
    """DeleteTopics by name: {topic: error code}."""
    request = delete_topics_v6.DeleteTopicsRequest(
        topics=tuple(delete_topics_v6.DeleteTopicState(name=n, topic_id=uuid.UUID(int=0)) for n in names),
        timeout=datetime.timedelta(seconds=30),
    )
    response = await link.call(request)
    return {r.name: int(r.error_code) for r in response.responses if r.name is not None}


async def wait_for_leaders(link: BrokerLink, specs: Iterable[world.TopicSpec], timeout: float = LEADER_WAIT_S) -> None:
    """Return once every partition of ``specs`` has a leader in Metadata."""
    wanted = {s.name: s.partitions for s in specs}
    deadline = time.monotonic() + timeout
    while True:
        found = await describe(link, wanted)
        if all(
            name in found and len(found[name][1]) >= count and all(leader >= 0 for leader in found[name][1].values())
            for name, count in wanted.items()
        ):
            return
        if time.monotonic() > deadline:
            raise ControlError(f"no leaders for {sorted(wanted)} after {timeout:.0f} s: {found}")
        await asyncio.sleep(POLL_S)


async def produce_known_records(link: BrokerLink, spec: world.TopicSpec, timeout: float = LEADER_WAIT_S) -> None:
    """Write ``world.KNOWN_RECORDS`` to every partition of ``spec`` (acks=all). Kafka's broker
    becomes leader a moment after Metadata names it: NOT_LEADER_OR_FOLLOWER is waited out."""
    batch = build_batch(world.KNOWN_RECORDS, base_timestamp=int(time.time() * 1000))
    pending = list(range(spec.partitions))
    deadline = time.monotonic() + timeout
    while pending:
        request = produce_v9.ProduceRequest(
            transactional_id=None, acks=-1, timeout=datetime.timedelta(seconds=30),
            topic_data=(produce_v9.TopicProduceData(name=spec.name, partition_data=tuple(
                produce_v9.PartitionProduceData(index=p, records=batch) for p in pending
            )),),
        )  # fmt: skip
        response = await link.call(request)
        codes = {int(p.index): int(p.error_code) for t in response.responses for p in t.partition_responses}
        pending = [p for p in pending if codes.get(p) != 0]
        failed = {p: codes.get(p) for p in pending if codes.get(p) not in NOT_LEADER_YET}
        if failed or (pending and time.monotonic() > deadline):
            raise ControlError(f"producing the known records to {spec.name} failed: {failed or pending}")
        if pending:
            await asyncio.sleep(POLL_S)


async def set_up_world(link: BrokerLink, specs: Iterable[world.TopicSpec] = world.TOPICS) -> dict[str, uuid.UUID]:
    """Create ``specs`` (those that do not exist yet) with their known records; their topic ids."""
    specs = list(specs)
    existing = await describe(link, [s.name for s in specs])
    missing = [s for s in specs if s.name not in existing]
    if missing:
        errors = await create_topics(link, missing)
        failed = {name: code for name, code in errors.items() if code != 0}
        if failed:
            raise ControlError(f"CreateTopics failed: {failed}")
        await wait_for_leaders(link, missing)
        for spec in missing:
            await produce_known_records(link, spec)
    return await topic_ids(link, [s.name for s in specs])


async def liveness(host: str, port: int, deadline_s: float) -> float | None:
    """Seconds a new connection took to get Metadata for the world's topics; None past the deadline."""
    started = time.monotonic()
    link = None
    try:
        async with asyncio.timeout(deadline_s):
            link = await BrokerLink.open(host, port)
            await link.call(metadata_request([s.name for s in world.TOPICS]))
    except (TimeoutError, OSError, asyncio.IncompleteReadError, ControlError):
        return None
    finally:
        if link is not None:
            link.close()
    return time.monotonic() - started
