"""The replication timeline of a partition: leader epochs, ISR and ELR changes, elections.

Its source is the metadata log itself, where every decision the controller took about a
partition is a PartitionRecord (a whole registration) with the batch's timestamp, and broker
fencing is a FenceBrokerRecord / UnfenceBrokerRecord. A broker-only node reads the log from the
active controller over the Kafka protocol (Fetch of ``__cluster_metadata`` as an observer with
replica id -1, which the controller answers at once with committed batches and does not count
as one of its observers); a combined node reads its own voter's log. Each read goes on from
where the last one stopped, so the timeline costs what is new. Entries older than the
controller's latest snapshot are not in the log any more: the timeline then starts at the
snapshot (``history_starts_at``).

An election is unclean when the new leader was neither in the ISR nor in the ELR of the
registration before it (Kafka's unclean.leader.election.enable; the rule /metrics counts
elections by, kbroker.metrics.partition_changes.leader_change). Records the old leader held
past the new leader's log end were truncated; where this broker holds a replica, its
leader-epoch checkpoint gives the offset the new epoch started at, which is that truncation
point (``truncated_from``).
"""

from __future__ import annotations

import asyncio
import datetime
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kio.schema.fetch.v12 import request as fetch_v12

from kbroker.metrics.partition_changes import UNCLEAN_ELECTION, leader_change
from kbroker.protocol.codec import build
from kbroker.protocol.errors import ErrorCode
from kbroker.protocol.records import batch_size_at, iter_records, read_header
from kbroker.replication.inter_broker_client import InterBrokerClient
from kbroker.replication.quorum.metadata_image import METADATA_TOPIC
from kbroker.replication.quorum.metadata_records import (
    FenceBrokerRecord,
    PartitionRecord,
    TopicRecord,
    UnfenceBrokerRecord,
    decode_record,
)
from kbroker.replication.quorum.partition_registration import PartitionRegistration
from kbroker.replication.quorum.raft import LEADER_CHANGE_PAYLOAD

if TYPE_CHECKING:
    import uuid

    from kbroker.node.broker import Broker

JSON = dict[str, Any]
READ_BYTES = 4 * 1024 * 1024
FETCH_TIMEOUT_S = 10.0


@dataclass(slots=True)
class _PartitionHistory:
    events: list[JSON] = field(default_factory=list)
    last: PartitionRegistration | None = None


def _describe_change(before: PartitionRegistration | None, after: PartitionRegistration) -> JSON:
    """What one PartitionRecord changed, in the timeline's words."""
    if before is None:
        return {"kind": "created", "leader": after.leader, "leader_epoch": after.leader_epoch}
    change: JSON = {}
    kind = leader_change(before, after)
    if kind is not None:
        change.update(kind=kind, previous_leader=before.leader, leader=after.leader,
                      previous_leader_epoch=before.leader_epoch, leader_epoch=after.leader_epoch)
    else:
        change["kind"] = "isr_change"
    shrunk = sorted(set(before.isr) - set(after.isr))
    expanded = sorted(set(after.isr) - set(before.isr))
    if shrunk:
        change["isr_shrink"] = shrunk
    if expanded:
        change["isr_expand"] = expanded
    if after.elr != before.elr:
        change["elr"] = list(after.elr)
    if after.replicas != before.replicas:
        change["replicas_changed"] = True
    return change


class ReplicationTimeline:
    """Follows the metadata log on demand and keeps, per partition, the events it implied."""

    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.next_offset = 0
        self.history_starts_at = 0
        self.topic_names: dict[uuid.UUID, str] = {}
        self.partitions: dict[tuple[str, int], _PartitionHistory] = {}
        self.broker_events: list[JSON] = []  # fence / unfence, for every partition the broker replicates
        self._reading = asyncio.Lock()  # two pages asking at once must not apply the same records twice

    async def catch_up(self) -> None:
        """Apply what the metadata log holds past ``next_offset``."""
        local = self.broker.local_controller
        if local is not None:
            raft_log = local.raft.log if local.raft is not None else None
            if raft_log is not None and self.next_offset < raft_log.start_offset:
                self.next_offset = self.history_starts_at = raft_log.start_offset
            while self.next_offset < local.high_watermark:
                data = local.metadata_batches(self.next_offset)
                if not self._apply(data, local.high_watermark):
                    break
            return
        await self._catch_up_remote()

    async def _catch_up_remote(self) -> None:
        lifecycle = self.broker.lifecycle
        if lifecycle is None:
            return
        host, port = lifecycle.voters[lifecycle.controller_id]
        client = InterBrokerClient(host, port, lifecycle.source, f"broker-{self.broker.node_id}-console",
                                   lifecycle.settings.controller_security)
        m = fetch_v12
        try:
            while True:
                request = build(
                    m.FetchRequest, cluster_id=None, replica_id=-1, max_wait=datetime.timedelta(0), min_bytes=0,
                    max_bytes=READ_BYTES, isolation_level=0, session_id=0, session_epoch=-1,
                    forgotten_topics_data=(), rack_id="",
                    topics=(build(m.FetchTopic, topic=METADATA_TOPIC, partitions=(build(
                        m.FetchPartition, partition=0, current_leader_epoch=-1, fetch_offset=self.next_offset,
                        last_fetched_epoch=-1, log_start_offset=-1, partition_max_bytes=READ_BYTES),)),))
                response = await client.request(1, 12, request, timeout_s=FETCH_TIMEOUT_S)
                data = response.responses[0].partitions[0]
                if data.error_code == ErrorCode.offset_out_of_range or data.snapshot_id.end_offset >= 0:
                    # Below the log start: what came before lives only in the snapshot.
                    start = max(data.log_start_offset, data.snapshot_id.end_offset)
                    if start <= self.next_offset:
                        return
                    self.next_offset = self.history_starts_at = start
                    continue
                if data.error_code != ErrorCode.none or not data.records:
                    return
                if not self._apply(bytes(data.records), data.high_watermark):
                    return
        finally:
            client.close()

    def _apply(self, data: bytes, committed: int) -> bool:
        """Apply the whole batches of ``data`` below ``committed``; False when nothing moved."""
        position, moved = 0, False
        while (size := batch_size_at(data, position)) is not None and position + size <= len(data):
            header = read_header(data, position)
            batch = data[position:position + size]
            position += size
            for record in iter_records(batch):
                if record.offset < self.next_offset or record.offset >= committed:
                    continue
                if record.value is not None and record.value != LEADER_CHANGE_PAYLOAD:
                    self._on_record(record.offset, record.timestamp, decode_record(record.value))
            end = min(header.last_offset + 1, committed)
            if end > self.next_offset:
                self.next_offset, moved = end, True
        return moved

    def _on_record(self, offset: int, timestamp: int, record: object) -> None:
        match record:
            case TopicRecord():
                self.topic_names[record.topic_id] = record.name
            case PartitionRecord():
                name = self.topic_names.get(record.topic_id)
                if name is None:
                    return
                history = self.partitions.setdefault((name, record.partition), _PartitionHistory())
                after = record.registration()
                event = _describe_change(history.last, after)
                event.update(metadata_offset=offset, timestamp=timestamp, isr=list(after.isr),
                             replicas=list(after.replicas), partition_epoch=after.partition_epoch)
                history.events.append(event)
                history.last = after
            case FenceBrokerRecord() | UnfenceBrokerRecord():
                self.broker_events.append({
                    "kind": "broker_fenced" if isinstance(record, FenceBrokerRecord) else "broker_unfenced",
                    "broker": record.broker_id, "metadata_offset": offset, "timestamp": timestamp})

    def _epoch_start(self, topic: str, index: int, epoch: int) -> int | None:
        """The offset ``epoch`` started at in this broker's replica (its leader-epoch checkpoint)."""
        partition = self.broker.replica_manager.partitions.get((topic, index))
        if partition is None:
            return None
        if partition.is_leader and partition.leader_epoch == epoch:  # its log end when it took the lead
            return partition.leader_epoch_start_offset
        cache = partition.log.leader_epoch_cache
        for known, start in zip(cache.epochs, cache.start_offsets, strict=True):
            if known >= epoch:
                return start
        return None

    async def of_partition(self, topic: str, index: int) -> JSON:
        async with self._reading:
            await self.catch_up()
        history = self.partitions.get((topic, index), _PartitionHistory())
        replicas = set(history.last.replicas) if history.last is not None else set()
        events = [dict(event) for event in history.events]
        for event in events:
            if event["kind"] == UNCLEAN_ELECTION:
                event["truncated_from"] = self._epoch_start(topic, index, event["leader_epoch"])
        since = events[0]["metadata_offset"] if events else self.next_offset
        events += [dict(event) for event in self.broker_events
                   if event["broker"] in replicas and event["metadata_offset"] > since]
        events.sort(key=lambda event: event["metadata_offset"])
        return {"topic": topic, "partition": index, "events": events,
                "history_starts_at": self.history_starts_at, "metadata_offset": self.next_offset}
