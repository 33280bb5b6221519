"""DescribeQuorum (key 55), v0–2: the metadata quorum as ``kafka-metadata-quorum`` shows it.

From this voter's Raft state: the leader, its epoch and high watermark, the voters with the
log end offset each last fetched from and when (known on the leader; a follower reports only
itself), and the observers (brokers following the metadata log, as seen by the leader). v2
adds the voters' endpoints (none for a single node's voter, which listens only in process).
Anything but ``__cluster_metadata`` partition 0 is UNKNOWN_TOPIC_OR_PARTITION; Kafka asks the
leader, and so does kafka-metadata-quorum.
"""

from __future__ import annotations

from typing import Protocol

from kbroker.controller_handlers.services import HasControllerIdentity, HasQuorumController, HasRaftQuorum
from kbroker.network.context import RequestContext
from kbroker.protocol.codec import build, response_module
from kbroker.protocol.errors import ErrorCode
from kbroker.replication.quorum.metadata_image import METADATA_TOPIC

API_KEY = 55
MIN_VERSION = 0
MAX_VERSION = 2


class Services(HasQuorumController, HasRaftQuorum, HasControllerIdentity, Protocol): ...


async def handle(ctx: RequestContext[Services], request: object) -> object:
    services = ctx.services
    m = response_module(API_KEY, ctx.api_version)
    raft = services.raft
    end = raft.log.end_offset
    now_ms = services.controller.now_ms()

    def state(replica_id: int, offset: int, fetched_ms: int) -> object:
        return build(m.ReplicaState, replica_id=replica_id, replica_directory_id=None, log_end_offset=offset,
                     last_fetch_timestamp=fetched_ms, last_caught_up_timestamp=fetched_ms if offset >= end else -1)

    progress = raft.voter_progress()
    voters = [state(services.node_id, end, now_ms)]
    voters += [state(v, *progress[v]) if v in progress else state(v, -1, -1)
               for v in sorted(services.voters) if v != services.node_id]
    topics = []
    for topic in request.topics:
        partitions = []
        for p in topic.partitions:
            if topic.topic_name != METADATA_TOPIC or p.partition_index != 0:
                partitions.append(build(
                    m.PartitionData, partition_index=p.partition_index, error_code=ErrorCode.unknown_topic_or_partition,
                    error_message=None, leader_id=-1, leader_epoch=-1, high_watermark=-1, current_voters=(),
                    observers=()))
                continue
            observers = tuple(state(broker_id, offset, fetched_ms)
                              for broker_id, (offset, fetched_ms) in sorted(services.controller.observers.items()))
            partitions.append(build(
                m.PartitionData, partition_index=0, error_code=ErrorCode.none, error_message=None,
                leader_id=raft.leader_id if raft.leader_id is not None else -1, leader_epoch=raft.epoch,
                high_watermark=raft.high_watermark, current_voters=tuple(voters), observers=observers))
        topics.append(build(m.TopicData, topic_name=topic.topic_name, partitions=tuple(partitions)))
    nodes: tuple = ()
    if ctx.api_version >= 2:
        nodes = tuple(
            build(m.Node, node_id=voter, listeners=(build(m.Listener, name="CONTROLLER", host=host, port=port),))
            for voter, (host, port) in sorted(services.voters.items())
            if port)  # a single node's only voter has no controller listener: no endpoint to name
    return build(m.DescribeQuorumResponse, error_code=ErrorCode.none, error_message=None, topics=tuple(topics),
                 nodes=nodes)
