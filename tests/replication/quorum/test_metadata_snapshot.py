"""Controller snapshots (KIP-630): the file format, writing and loading them, the log cut behind them, torn ones.

A real metadata log on disk (PartitionLog + PartitionRaftLog) holds what a QuorumController decided; a
snapshot of its image must rebuild the same image, a restart must start from the snapshot and replay only
what follows it, and a torn or corrupt snapshot must never be loaded.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import uuid

import pytest
from kbroker.protocol.records import batch_size_at
from kbroker.replication.quorum import raft_snapshot
from kbroker.replication.quorum.metadata_image import MetadataImage
from kbroker.replication.quorum.metadata_records import (
    AccessControlEntryRecord,
    ClientQuotaRecord,
    ConfigRecord,
    RemoveAccessControlEntryRecord,
    UserScramCredentialRecord,
    encode_record,
)
from kbroker.replication.quorum.metadata_snapshot import (
    SnapshotPolicy,
    SnapshotSettings,
    image_from_snapshot,
    image_records,
    load_image,
)
from kbroker.replication.quorum.quorum_controller import ControllerSettings, QuorumController
from kbroker.replication.quorum.raft_log import PartitionRaftLog
from kbroker.replication.quorum.raft_messages import SnapshotId
from kbroker.storage.log import PartitionLog
from kbroker.storage.log_config import LogConfig

TOPIC_RESOURCE = 2
EPOCH = 3


def open_log(directory: str, segment_bytes: int = 1 << 30) -> PartitionRaftLog:
    os.makedirs(directory, exist_ok=True)
    plog = PartitionLog(directory, "__cluster_metadata", 0, LogConfig(segment_bytes=segment_bytes))
    plog.load(clean_shutdown=False)
    return PartitionRaftLog(plog)


def controller_on(raft_log: PartitionRaftLog) -> QuorumController:
    settings = ControllerSettings(node_id=100, session_timeout_ms=2000, default_partitions=2,
                                  default_replication_factor=2, broker_default={"min.insync.replicas": "1"}.get)
    controller = QuorumController(raft_log.plog, settings, lambda payloads: raft_log.append(EPOCH, payloads))
    controller.activate(EPOCH, now_ms=0, image=load_image(raft_log, raft_log.end_offset))
    if not controller.image.cluster_id:
        controller.bootstrap("snapshot-cluster", [], now_ms=0)
    return controller


def busy_cluster(controller: QuorumController) -> None:
    """Brokers (one fenced), topics with partitions and configs, producer ids, cluster and broker configs."""
    for broker_id in (1, 2, 3):
        epoch = controller.register_broker(broker_id, f"inc-{broker_id}", "127.0.0.1", 9090 + broker_id,
                                           "r1" if broker_id < 3 else None, now_ms=0)
        if broker_id != 3:
            controller.heartbeat(broker_id, epoch, controller.image.offset, False, False, now_ms=0)
    for index in range(5):
        controller.create_topic(f"t{index}", 2, 2, {}, {"retention.ms": str(1000 + index)}, False, now_ms=0)
    controller.delete_topic("t4", now_ms=0)
    controller.set_configs(4, "", {"log.retention.ms": "5000"}, now_ms=0)
    controller.set_configs(4, "2", {"log.segment.bytes": "1048576"}, now_ms=0)
    controller.allocate_producer_ids(1, controller.image.brokers[1].broker_epoch, now_ms=0)
    kept, removed = uuid.UUID(int=1), uuid.UUID(int=2)
    controller.replay_and_commit([
        AccessControlEntryRecord(kept, 2, "orders", 3, "User:alice", "*", 3, 3),
        AccessControlEntryRecord(removed, 2, "pay", 4, "User:bob", "*", 2, 2),
        RemoveAccessControlEntryRecord(removed),
        UserScramCredentialRecord("alice", 1, "00ff", "aa", "bb", 4096),
        ClientQuotaRecord((("user", "alice"), ("client-id", None)), "producer_byte_rate", 1048576.0),
        ClientQuotaRecord((("user", None),), "consumer_byte_rate", 2048.0),
        ClientQuotaRecord((("user", None),), "consumer_byte_rate", 2048.0, remove=True),
    ], now_ms=0)


def same_image(a: MetadataImage, b: MetadataImage) -> None:
    assert a.cluster_id == b.cluster_id
    assert a.brokers == b.brokers
    assert {n: (t.topic_id, t.partitions, t.configs) for n, t in a.topics.items()} == \
        {n: (t.topic_id, t.partitions, t.configs) for n, t in b.topics.items()}
    assert set(a.topics_by_id) == set(b.topics_by_id)
    assert (a.cluster_configs, a.broker_configs, a.next_producer_id, a.features) == \
        (b.cluster_configs, b.broker_configs, b.next_producer_id, b.features)
    assert (a.acls, a.scram_credentials, a.client_quotas) == (b.acls, b.scram_credentials, b.client_quotas)


def test_a_snapshot_file_is_named_and_framed_as_kafkas(tmp_path) -> None:
    snapshot_id = SnapshotId(12345, 7)
    assert raft_snapshot.file_name(snapshot_id) == "00000000000000012345-0000000007.checkpoint"
    data = raft_snapshot.encode(snapshot_id, [b"a", b"b" * 700_000, b"c"], 1_700_000_000_000)
    assert raft_snapshot.decode(data) == [b"a", b"b" * 700_000, b"c"]
    path = raft_snapshot.write(str(tmp_path), snapshot_id, data)
    assert os.listdir(tmp_path) == ["00000000000000012345-0000000007.checkpoint"]
    assert raft_snapshot.snapshot_ids(str(tmp_path)) == [snapshot_id]
    with open(path, "rb") as fh:
        assert fh.read() == data


@pytest.mark.parametrize("damage", ["cut at the end", "no footer", "flipped byte"])
def test_a_torn_or_corrupt_snapshot_is_refused(damage: str) -> None:
    snapshot_id = SnapshotId(10, 1)
    whole = raft_snapshot.encode(snapshot_id, [b"x" * 100, b"y" * 100], 0)
    starts = [0]
    while starts[-1] < len(whole):
        starts.append(starts[-1] + batch_size_at(whole, starts[-1]))
    assert len(starts) == 4  # header, one batch of entries, footer
    damaged = {
        "cut at the end": whole[:-10],
        "no footer": whole[: starts[2]],
        "flipped byte": whole[:150] + bytes([whole[150] ^ 0xFF]) + whole[151:],
    }[damage]
    with pytest.raises(raft_snapshot.InvalidSnapshot):
        raft_snapshot.decode(damaged)


def test_the_image_survives_a_snapshot_round_trip(tmp_path) -> None:
    raft_log = open_log(str(tmp_path / "m"))
    controller = controller_on(raft_log)
    busy_cluster(controller)
    payloads = [encode_record(r) for r in image_records(controller.image)]
    rebuilt = image_from_snapshot(payloads, raft_log.end_offset)
    same_image(rebuilt, controller.image)
    assert rebuilt.brokers[3].fenced and not rebuilt.brokers[1].fenced
    assert set(rebuilt.topics) == {"t0", "t1", "t2", "t3"} and rebuilt.next_producer_id > 0
    assert rebuilt.cluster_configs["log.retention.ms"] == "5000" and rebuilt.broker_configs[2]
    assert rebuilt.offset == raft_log.end_offset - 1
    assert [acl.principal for acl in rebuilt.acls.values()] == ["User:alice"]
    assert rebuilt.scram_credentials[("alice", 1)].iterations == 4096
    assert rebuilt.client_quotas == {(("user", "alice"), ("client-id", None)): {"producer_byte_rate": 1048576.0}}


def test_snapshot_then_cut_then_restart_replays_only_the_log_after_it(tmp_path) -> None:
    directory = str(tmp_path / "m")
    raft_log = open_log(directory, segment_bytes=4096)
    controller = controller_on(raft_log)
    busy_cluster(controller)
    segments_before = len(raft_log.plog.segments)
    policy = SnapshotPolicy(SnapshotSettings(max_bytes_between_snapshots=1, max_interval_ms=0), now_ms=0)
    first = raft_log.end_offset
    policy.on_committed(raft_log, first, now_ms=0)  # loads, takes the entries in, snapshots
    assert raft_log.latest_snapshot_id == SnapshotId(first, EPOCH)
    assert raft_log.start_offset == 0  # the first snapshot cuts nothing: the log reaches back to the one before
    controller.create_topic("second", 1, 1, {}, {"retention.ms": "1"}, False, now_ms=0)
    committed = raft_log.end_offset
    policy.on_committed(raft_log, committed, now_ms=0)
    assert raft_log.latest_snapshot_id == SnapshotId(committed, EPOCH)
    assert sorted(n for n in os.listdir(directory) if n.endswith(".checkpoint")) == [
        f"{first:020d}-{EPOCH:010d}.checkpoint", f"{committed:020d}-{EPOCH:010d}.checkpoint"]
    # The log now starts at the older snapshot; segments wholly below it are gone.
    assert raft_log.start_offset == first and raft_log.earliest_snapshot_id == SnapshotId(first, EPOCH)
    assert segments_before > 1 and raft_log.plog.segments[0].base_offset <= first
    assert all(s.base_offset > first for s in raft_log.plog.segments[1:])
    # More decisions after the snapshot, then a restart: the latest snapshot and what follows it.
    controller.create_topic("after", 1, 1, {}, {}, False, now_ms=0)
    expected = controller.image
    raft_log.plog.close()
    reopened = open_log(directory, segment_bytes=4096)
    assert reopened.start_offset == first and reopened.latest_snapshot_id == SnapshotId(committed, EPOCH)
    assert reopened.last_epoch == EPOCH
    same_image(load_image(reopened, reopened.end_offset), expected)


def test_a_torn_latest_snapshot_is_ignored_with_a_log_line(tmp_path, caplog) -> None:
    directory = str(tmp_path / "m")
    raft_log = open_log(directory)
    controller = controller_on(raft_log)
    busy_cluster(controller)
    first = raft_log.create_snapshot(raft_log.end_offset, [encode_record(r) for r in image_records(controller.image)])
    controller.create_topic("later", 1, 1, {}, {}, False, now_ms=0)
    second = raft_log.create_snapshot(raft_log.end_offset, [encode_record(r) for r in image_records(controller.image)])
    expected = controller.image
    raft_log.plog.close()
    path = os.path.join(directory, raft_snapshot.file_name(second))
    with open(path, "r+b") as fh:  # a crash that left half of it (as if fsync had not held)
        fh.truncate(os.path.getsize(path) // 2)
    with caplog.at_level(logging.ERROR, "kbroker.replication.quorum.raft_log"):
        reopened = open_log(directory)
    assert any("is not valid" in r.getMessage() and raft_snapshot.file_name(second) in r.getMessage()
               for r in caplog.records)
    assert reopened.latest_snapshot_id == first
    same_image(load_image(reopened, reopened.end_offset), expected)  # the entries after `first` were kept


def test_a_follower_installs_its_leaders_snapshot_and_restarts_its_log_at_its_end(tmp_path) -> None:
    leader = open_log(str(tmp_path / "leader"))
    controller = controller_on(leader)
    busy_cluster(controller)
    leader.create_snapshot(3, [b"unused"])
    snapshot = leader.create_snapshot(leader.end_offset, [encode_record(r) for r in image_records(controller.image)])
    assert leader.delete_before_snapshot() == 3
    follower = open_log(str(tmp_path / "follower"))
    follower.append(1, [encode_record(ConfigRecord(TOPIC_RESOURCE, "stale", "x", "1"))])  # a stale, divergent tail
    size = leader.snapshot_size(snapshot)
    assert size is not None
    data = b"".join(leader.read_snapshot(snapshot, position, 1000) for position in range(0, size, 1000))
    with pytest.raises(raft_snapshot.InvalidSnapshot):
        follower.install_snapshot(snapshot, data[:-1])
    assert follower.end_offset == 1  # nothing changed
    follower.install_snapshot(snapshot, data)
    assert (follower.start_offset, follower.end_offset, follower.last_epoch) == (snapshot.end_offset,) * 2 + (EPOCH,)
    assert follower.end_offset_for_epoch(EPOCH) == (EPOCH, snapshot.end_offset)
    same_image(load_image(follower, follower.end_offset), controller.image)
    # A restart keeps it.
    follower.plog.close()
    again = open_log(str(tmp_path / "follower"))
    assert (again.start_offset, again.latest_snapshot_id) == (snapshot.end_offset, snapshot)


def test_register_broker_record_bytes_in_the_log_are_unchanged_and_the_epoch_travels_in_snapshots() -> None:
    from kbroker.replication.quorum.metadata_records import RegisterBrokerRecord, decode_record

    in_log = RegisterBrokerRecord(1, "i", "h", 9092, None)
    assert b"broker_epoch" not in encode_record(in_log)
    in_snapshot = dataclasses.replace(in_log, broker_epoch=42)
    assert decode_record(encode_record(in_snapshot)) == in_snapshot


def test_entries_are_read_across_batches_bigger_than_one_read(tmp_path) -> None:
    """A restart replays the log after the snapshot in 1 MiB reads; one of 400 KB batches ends cut off."""
    raft_log = open_log(str(tmp_path / "m"))
    record = encode_record(ConfigRecord(TOPIC_RESOURCE, "t", "retention.ms", "1" * 150))
    for _ in range(4):
        raft_log.append(EPOCH, [record] * 2000)
    entries = raft_log.entries(0, 10_000)
    assert [e.offset for e in entries] == list(range(8000))
