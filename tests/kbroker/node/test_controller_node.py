"""What a combined node's broker reads from its own voter's metadata log."""

from __future__ import annotations

from pathlib import Path

from kbroker.protocol.records import split_batches
from kbroker.replication.quorum.raft_log import PartitionRaftLog

from kbroker.config.kafka_config import KafkaConfig
from kbroker.node.controller_node import ControllerNode


def test_the_batch_holding_the_high_watermark_is_read_whole(tmp_path: Path) -> None:
    """A follower voter batches the entries of each fetch, so the quorum's high watermark can fall
    inside one of its batches; the broker must still get that batch (it applies what lies below
    the high watermark) — a read cut at the high watermark returned nothing, and the three
    combined nodes' brokers stopped replaying."""
    config = KafkaConfig.load(overrides=[f"log.dirs={tmp_path}", "process.roles=broker,controller"])
    node = ControllerNode(config, "cluster")
    node.metadata_log.load(clean_shutdown=False)
    PartitionRaftLog(node.metadata_log).append(1, [b"entry-%d" % i for i in range(10)])

    read = node.metadata_batches(5)

    (_position, header), = list(split_batches(memoryview(read)))
    assert (header.base_offset, header.last_offset) == (0, 9)
