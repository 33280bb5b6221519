"""Finalized features and UnregisterBroker in the QuorumController, decided into a real metadata log.

Kafka 4.3.1's answers are the spec (checked with ``kafka-features`` and ``kafka-cluster`` against
a real cluster; tests/end_to_end/test_cluster_tools.py runs both side by side): a new cluster
finalizes every supported feature at its highest level, an update outside the supported range,
in the wrong direction for its upgrade type, or a metadata.version downgrade is refused with
INVALID_UPDATE_VERSION and Kafka's message and writes nothing, ``validate_only`` writes nothing,
and UnregisterBroker removes a registration (BROKER_ID_NOT_REGISTERED for an unknown id). The
log is the truth: each test replays it into a fresh image and compares.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from kbroker.protocol.errors import ErrorCode, KafkaError
from kbroker.replication.quorum.feature_control import (
    SAFE_DOWNGRADE,
    UNSAFE_DOWNGRADE,
    UPGRADE,
    FeatureUpdate,
)
from kbroker.replication.quorum.metadata_image import MetadataImage, decode_batch
from kbroker.replication.quorum.metadata_records import ClusterIdRecord, encode_record
from kbroker.replication.quorum.quorum_controller import ControllerSettings, QuorumController
from kbroker.replication.quorum.raft_log import PartitionRaftLog
from kbroker.storage.log import PartitionLog
from kbroker.storage.log_config import LogConfig

DEFAULTS = {"eligible.leader.replicas.version": 1, "group.version": 1, "metadata.version": 30,
            "transaction.version": 2}


def open_controller(tmp_path: Path, raw_first_records: list[bytes] | None = None) -> QuorumController:
    """An active controller over the metadata log in ``tmp_path`` (one voter: a proposal commits
    at once); a new log is bootstrapped as the controller node does."""
    (tmp_path / "__cluster_metadata-0").mkdir(exist_ok=True)
    plog = PartitionLog(str(tmp_path / "__cluster_metadata-0"), "__cluster_metadata", 0, LogConfig())
    plog.load(clean_shutdown=False)
    raft_log = PartitionRaftLog(plog)
    if raw_first_records:
        raft_log.append(1, raw_first_records)
    settings = ControllerSettings(node_id=100, session_timeout_ms=2000, default_partitions=1,
                                  default_replication_factor=3, broker_default={"min.insync.replicas": "2"}.get)
    controller = QuorumController(plog, settings, lambda payloads: raft_log.append(1, payloads))
    controller.activate(1, now_ms=0)
    if not controller.image.cluster_id:
        controller.bootstrap("test-cluster", [], now_ms=0)
    return controller


def replayed(controller: QuorumController) -> MetadataImage:
    image = MetadataImage()
    for batch in controller.log.iter_batches():
        for offset, record in decode_batch(batch):
            image.apply(offset, record)
    assert image.features == controller.image.features
    assert sorted(image.brokers) == sorted(controller.image.brokers)
    return image


def refusal(controller: QuorumController, *updates: FeatureUpdate) -> str | None:
    offset = controller.image.offset
    with pytest.raises(KafkaError) as caught:
        controller.update_features(list(updates), False, 0)
    assert caught.value.code == ErrorCode.invalid_update_version
    assert controller.image.offset == offset  # all or nothing: nothing written
    return caught.value.message


def test_a_new_cluster_finalizes_every_supported_feature_at_its_highest_level(tmp_path: Path) -> None:
    controller = open_controller(tmp_path)
    assert replayed(controller).features == DEFAULTS


def test_a_log_without_feature_records_gets_them_when_a_controller_takes_over(tmp_path: Path) -> None:
    # what kbroker wrote before finalized features were metadata records
    controller = open_controller(tmp_path, [encode_record(ClusterIdRecord("older-cluster"))])
    assert replayed(controller).features == DEFAULTS


def test_upgrades_and_safe_downgrades_are_written_and_replayed(tmp_path: Path) -> None:
    controller = open_controller(tmp_path)
    controller.update_features([FeatureUpdate("transaction.version", 1, SAFE_DOWNGRADE)], False, 0)
    assert replayed(controller).features["transaction.version"] == 1
    controller.update_features([FeatureUpdate("group.version", 0, SAFE_DOWNGRADE)], False, 0)  # disable
    assert "group.version" not in replayed(controller).features
    controller.update_features([FeatureUpdate("transaction.version", 2, UPGRADE),
                                FeatureUpdate("group.version", 1, UPGRADE),
                                FeatureUpdate("metadata.version", 30, UPGRADE)], False, 0)
    assert replayed(controller).features == DEFAULTS


def test_validate_only_checks_and_writes_nothing(tmp_path: Path) -> None:
    controller = open_controller(tmp_path)
    offset = controller.image.offset
    controller.update_features([FeatureUpdate("transaction.version", 0, SAFE_DOWNGRADE)], True, 0)
    assert controller.image.offset == offset
    assert replayed(controller).features == DEFAULTS


def test_refusals_carry_kafkas_messages(tmp_path: Path) -> None:
    controller = open_controller(tmp_path)
    assert refusal(controller, FeatureUpdate("transaction.version", 7, UPGRADE)) == (
        "Invalid update version 7 for feature transaction.version. Local controller 100 only supports versions 0-2")
    assert refusal(controller, FeatureUpdate("no.such.feature", 1, UPGRADE)) == (
        "Invalid update version 1 for feature no.such.feature. Local controller 100 does not support this feature.")
    assert refusal(controller, FeatureUpdate("share.version", 1, UPGRADE)) == (
        "Invalid update version 1 for feature share.version. Local controller 100 only supports versions 0-0")
    assert refusal(controller, FeatureUpdate("kraft.version", 1, UPGRADE)) == (
        "Invalid update version 1 for feature kraft.version. Local controller 100 only supports versions 0-0")
    assert refusal(controller, FeatureUpdate("transaction.version", 1, UPGRADE)) == (
        "Invalid update version 1 for feature transaction.version. Can't downgrade the version of this feature "
        "without setting the upgrade type to either safe or unsafe downgrade.")
    controller.update_features([FeatureUpdate("transaction.version", 1, SAFE_DOWNGRADE)], False, 0)
    assert refusal(controller, FeatureUpdate("transaction.version", 2, SAFE_DOWNGRADE)) == (
        "Invalid update version 2 for feature transaction.version. Can't downgrade to a newer version.")
    assert refusal(controller, FeatureUpdate("metadata.version", 21, SAFE_DOWNGRADE)) == (
        "Unsupported metadata.version downgrade from 30 to 21. Refusing to perform the requested downgrade "
        "because it might delete metadata information.")
    assert refusal(controller, FeatureUpdate("metadata.version", 29, UNSAFE_DOWNGRADE)) == (
        "Unsupported metadata.version downgrade from 30 to 29. Unsafe metadata downgrade is not supported in "
        "this version.")
    assert refusal(controller, FeatureUpdate("metadata.version", 31, UPGRADE)) == (
        "Invalid update version 31 for feature metadata.version. Local controller 100 only supports versions 7-30")
    assert refusal(controller, FeatureUpdate("group.version", 0, 9)) == (
        "Invalid update version 0 for feature group.version. The controller does not support the given upgrade type.")


def test_one_refused_update_fails_the_whole_request(tmp_path: Path) -> None:
    controller = open_controller(tmp_path)
    refusal(controller, FeatureUpdate("transaction.version", 1, SAFE_DOWNGRADE),
            FeatureUpdate("transaction.version", 9, UPGRADE))
    assert replayed(controller).features == DEFAULTS


def test_unregister_removes_a_registration_once(tmp_path: Path) -> None:
    controller = open_controller(tmp_path)
    epochs = {}
    for broker_id in (1, 2, 3):
        epochs[broker_id] = controller.register_broker(broker_id, f"i-{broker_id}", "127.0.0.1", 9090 + broker_id,
                                                       None, 0)
        controller.heartbeat(broker_id, epochs[broker_id], controller.image.offset, False, False, 0)
    controller.create_topic("t", 1, 3, {}, {}, False, 0)
    with pytest.raises(KafkaError) as caught:
        controller.unregister_broker(99, 0)
    assert (caught.value.code, caught.value.message) == (
        ErrorCode.broker_id_not_registered, "Broker ID 99 is not currently registered")

    leader = controller.image.topics["t"].partitions[0].leader
    controller.unregister_broker(leader, 0)  # a live broker: out of the ISR and leadership first
    image = replayed(controller)
    assert leader not in image.brokers
    partition = image.topics["t"].partitions[0]
    assert leader in partition.replicas and leader not in partition.isr and partition.leader not in (leader, -1)
    with pytest.raises(KafkaError) as caught:
        controller.unregister_broker(leader, 0)
    assert caught.value.code == ErrorCode.broker_id_not_registered
    # its heartbeat is refused as stale, so the broker registers again
    with pytest.raises(KafkaError) as caught:
        controller.heartbeat(leader, epochs[leader], controller.image.offset, False, False, 0)
    assert caught.value.code == ErrorCode.stale_broker_epoch
