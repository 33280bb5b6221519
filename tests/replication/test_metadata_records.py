"""Typed metadata records encode to the exact bytes the dict-based records did, and decode back.

The literal JSON below was captured from kbroker at 85a66e5 (records were plain dicts then) by
running a controller through registration, topic creation, config changes, a producer id
block, session expiry and topic deletion: existing metadata logs must replay unchanged.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from kbroker.protocol.records import iter_records
from kbroker.replication.quorum import quorum_controller
from kbroker.replication.quorum.metadata_image import BROKER_RESOURCE, MetadataImage, decode_batch
from kbroker.replication.quorum.metadata_records import (
    ClusterIdRecord,
    ConfigRecord,
    FeatureLevelRecord,
    FenceBrokerRecord,
    LeaderChangeRecord,
    MetadataRecord,
    PartitionRecord,
    ProducerIdsRecord,
    RegisterBrokerRecord,
    RemoveTopicRecord,
    TopicRecord,
    UnfenceBrokerRecord,
    UnknownMetadataRecord,
    UnregisterBrokerRecord,
    decode_record,
    encode_record,
)
from kbroker.replication.quorum.partition_registration import PartitionRegistration
from kbroker.replication.quorum.quorum_controller import ControllerSettings, QuorumController
from kbroker.replication.quorum.raft import LEADER_CHANGE_PAYLOAD
from kbroker.replication.quorum.raft_log import PartitionRaftLog
from kbroker.storage.log import PartitionLog
from kbroker.storage.log_config import LogConfig

TOPIC = uuid.UUID("11111111-2222-3333-4444-555555555555")

# Every record type kbroker writes, with the value the dict-based code wrote for it.
CAPTURED: list[tuple[MetadataRecord, str]] = [
    (ClusterIdRecord("test-cluster"), '{"cluster_id":"test-cluster","type":"ClusterIdRecord"}'),
    (ConfigRecord(4, "", "min.insync.replicas", "1"),
     '{"name":"min.insync.replicas","resource_name":"","resource_type":4,"type":"ConfigRecord","value":"1"}'),
    (RegisterBrokerRecord(1, "inc-1", "127.0.0.1", 9091, "r1"),
     '{"broker_id":1,"host":"127.0.0.1","incarnation_id":"inc-1","port":9091,"rack":"r1",'
     '"type":"RegisterBrokerRecord"}'),
    (RegisterBrokerRecord(2, "inc-2", "127.0.0.1", 9092, None),
     '{"broker_id":2,"host":"127.0.0.1","incarnation_id":"inc-2","port":9092,"rack":null,'
     '"type":"RegisterBrokerRecord"}'),
    (UnfenceBrokerRecord(1, 2), '{"broker_id":1,"epoch":2,"type":"UnfenceBrokerRecord"}'),
    (TopicRecord("t", TOPIC), '{"name":"t","topic_id":"11111111-2222-3333-4444-555555555555","type":"TopicRecord"}'),
    (ConfigRecord(2, "t", "cleanup.policy", "compact"),
     '{"name":"cleanup.policy","resource_name":"t","resource_type":2,"type":"ConfigRecord","value":"compact"}'),
    (ConfigRecord(2, "t", "segment.ms", None),
     '{"name":"segment.ms","resource_name":"t","resource_type":2,"type":"ConfigRecord","value":null}'),
    (PartitionRecord(TOPIC, 0, (1, 2, 3), (1, 2, 3), 1, 0, 0, (), (), (), ()),
     '{"adding":[],"elr":[],"isr":[1,2,3],"last_known_elr":[],"leader":1,"leader_epoch":0,"partition":0,'
     '"partition_epoch":0,"removing":[],"replicas":[1,2,3],"topic_id":"11111111-2222-3333-4444-555555555555",'
     '"type":"PartitionRecord"}'),
    (PartitionRecord(uuid.UUID(int=7), 3, (1, 2, 3, 4), (1, 2), 1, 5, 9, (3,), (4,), (4,), (3,)),
     '{"adding":[4],"elr":[3],"isr":[1,2],"last_known_elr":[4],"leader":1,"leader_epoch":5,"partition":3,'
     '"partition_epoch":9,"removing":[3],"replicas":[1,2,3,4],"topic_id":"00000000-0000-0000-0000-000000000007",'
     '"type":"PartitionRecord"}'),
    (ProducerIdsRecord(1, 2, 1000),
     '{"broker_epoch":2,"broker_id":1,"next_producer_id":1000,"type":"ProducerIdsRecord"}'),
    (FenceBrokerRecord(1, 2), '{"broker_id":1,"epoch":2,"type":"FenceBrokerRecord"}'),
    (RemoveTopicRecord(TOPIC), '{"topic_id":"11111111-2222-3333-4444-555555555555","type":"RemoveTopicRecord"}'),
    # written since the dict-based code, in the same JSON form
    (FeatureLevelRecord("metadata.version", 30),
     '{"feature_level":30,"name":"metadata.version","type":"FeatureLevelRecord"}'),
    (UnregisterBrokerRecord(3, 7), '{"broker_epoch":7,"broker_id":3,"type":"UnregisterBrokerRecord"}'),
]

# The whole metadata log the dict-based controller wrote for the scenario of ``run_scenario``.
CAPTURED_LOG = [
    '{"cluster_id":"test-cluster","type":"ClusterIdRecord"}',
    '{"name":"min.insync.replicas","resource_name":"","resource_type":4,"type":"ConfigRecord","value":"1"}',
    '{"broker_id":1,"host":"127.0.0.1","incarnation_id":"inc-1","port":9091,"rack":"r1","type":"RegisterBrokerRecord"}',
    '{"broker_id":1,"epoch":2,"type":"UnfenceBrokerRecord"}',
    '{"broker_id":2,"host":"127.0.0.1","incarnation_id":"inc-2","port":9092,"rack":null,"type":"RegisterBrokerRecord"}',
    '{"broker_id":2,"epoch":4,"type":"UnfenceBrokerRecord"}',
    '{"broker_id":3,"host":"127.0.0.1","incarnation_id":"inc-3","port":9093,"rack":null,"type":"RegisterBrokerRecord"}',
    '{"broker_id":3,"epoch":6,"type":"UnfenceBrokerRecord"}',
    '{"name":"t","topic_id":"11111111-2222-3333-4444-555555555555","type":"TopicRecord"}',
    '{"name":"cleanup.policy","resource_name":"t","resource_type":2,"type":"ConfigRecord","value":"compact"}',
    '{"adding":[],"elr":[],"isr":[1,2,3],"last_known_elr":[],"leader":1,"leader_epoch":0,"partition":0,'
    '"partition_epoch":0,"removing":[],"replicas":[1,2,3],"topic_id":"11111111-2222-3333-4444-555555555555",'
    '"type":"PartitionRecord"}',
    '{"name":"retention.ms","resource_name":"t","resource_type":2,"type":"ConfigRecord","value":"1000"}',
    '{"name":"segment.ms","resource_name":"t","resource_type":2,"type":"ConfigRecord","value":null}',
    '{"name":"log.retention.ms","resource_name":"2","resource_type":4,"type":"ConfigRecord","value":"5"}',
    '{"broker_epoch":2,"broker_id":1,"next_producer_id":1000,"type":"ProducerIdsRecord"}',
    '{"adding":[],"elr":[],"isr":[2,3],"last_known_elr":[],"leader":2,"leader_epoch":1,"partition":0,'
    '"partition_epoch":1,"removing":[],"replicas":[1,2,3],"topic_id":"11111111-2222-3333-4444-555555555555",'
    '"type":"PartitionRecord"}',
    '{"broker_id":1,"epoch":2,"type":"FenceBrokerRecord"}',
    '{"adding":[],"elr":[],"isr":[3],"last_known_elr":[],"leader":3,"leader_epoch":2,"partition":0,'
    '"partition_epoch":2,"removing":[],"replicas":[1,2,3],"topic_id":"11111111-2222-3333-4444-555555555555",'
    '"type":"PartitionRecord"}',
    '{"broker_id":2,"epoch":4,"type":"FenceBrokerRecord"}',
    '{"adding":[],"elr":[3],"isr":[],"last_known_elr":[3],"leader":-1,"leader_epoch":3,"partition":0,'
    '"partition_epoch":3,"removing":[],"replicas":[1,2,3],"topic_id":"11111111-2222-3333-4444-555555555555",'
    '"type":"PartitionRecord"}',
    '{"broker_id":3,"epoch":6,"type":"FenceBrokerRecord"}',
    '{"topic_id":"11111111-2222-3333-4444-555555555555","type":"RemoveTopicRecord"}',
]


@pytest.mark.parametrize(("record", "captured"), CAPTURED, ids=lambda v: type(v).__name__)
def test_encoding_is_the_dict_based_bytes_and_decodes_back(record: MetadataRecord, captured: str) -> None:
    assert encode_record(record) == captured.encode()
    assert decode_record(captured.encode()) == record


def test_partition_record_carries_a_registration_both_ways() -> None:
    reg = PartitionRegistration((1, 2, 3), (1, 2), 1, 4, 7, (3,), (3,), (), ())
    record = PartitionRecord.of(TOPIC, 5, reg)
    assert (record.topic_id, record.partition) == (TOPIC, 5)
    assert record.registration() == reg


def test_records_older_kbroker_wrote_still_decode() -> None:
    # before ELR and reassignment fields existed; before racks were written; the controller's
    # own LeaderChangeRecord, written until the Raft layer took that over
    old_partition = (b'{"isr":[1],"leader":1,"leader_epoch":0,"partition":0,"partition_epoch":0,"replicas":[1],'
                     b'"topic_id":"11111111-2222-3333-4444-555555555555","type":"PartitionRecord"}')
    assert decode_record(old_partition) == PartitionRecord(TOPIC, 0, (1,), (1,), 1, 0, 0, (), (), (), ())
    old_register = b'{"broker_id":1,"host":"h","incarnation_id":"i","port":9092,"type":"RegisterBrokerRecord"}'
    assert decode_record(old_register) == RegisterBrokerRecord(1, "i", "h", 9092, None)
    assert decode_record(b'{"epoch":3,"leader_id":100,"type":"LeaderChangeRecord"}') == LeaderChangeRecord(100, 3)


@pytest.mark.parametrize("value", [
    b'{"broker_id":1,"type":"BrokerRegistrationChangeRecord"}', b'{"broker_id":1}', b'[1]',
])
def test_an_unknown_record_type_is_an_error(value: bytes) -> None:
    # Replay stopped at such a record before too (no handler for its type); now it says why.
    with pytest.raises(UnknownMetadataRecord, match="unknown metadata record type"):
        decode_record(value)


def make_controller(tmp_path: Path) -> tuple[QuorumController, PartitionLog]:
    (tmp_path / "__cluster_metadata-0").mkdir()
    plog = PartitionLog(str(tmp_path / "__cluster_metadata-0"), "__cluster_metadata", 0, LogConfig())
    plog.load(clean_shutdown=False)
    raft_log = PartitionRaftLog(plog)
    settings = ControllerSettings(node_id=100, session_timeout_ms=2000, default_partitions=1,
                                  default_replication_factor=3, broker_default={"min.insync.replicas": "2"}.get)
    controller = QuorumController(plog, settings, lambda payloads: raft_log.append(1, payloads))
    controller.activate(1, now_ms=0)
    return controller, plog


def log_values(plog: PartitionLog) -> list[str]:
    return [bytes(r.value).decode() for batch in plog.iter_batches() for r in iter_records(batch)
            if r.value is not None]


def test_the_controller_writes_the_log_the_dict_based_code_wrote(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(quorum_controller.uuid, "uuid4", lambda: TOPIC)
    # The dict-based code finalized no features (they came later, as FeatureLevelRecords).
    monkeypatch.setattr(quorum_controller, "bootstrap_records", lambda: [])
    controller, plog = make_controller(tmp_path)
    controller.bootstrap("test-cluster", [ConfigRecord(BROKER_RESOURCE, "", "min.insync.replicas", "1")], 0)
    epochs = {}
    for b in (1, 2, 3):
        epochs[b] = controller.register_broker(b, f"inc-{b}", "127.0.0.1", 9090 + b, "r1" if b == 1 else None, 0)
        controller.heartbeat(b, epochs[b], controller.image.offset, False, False, 0)
    controller.create_topic("t", -1, 3, {0: [1, 2, 3]}, {"cleanup.policy": "compact"}, False, 0)
    controller.set_configs(2, "t", {"retention.ms": "1000", "segment.ms": None}, 0)
    controller.set_configs(4, "2", {"log.retention.ms": "5"}, 0)
    controller.allocate_producer_ids(1, epochs[1], 0)
    controller.fence_expired_sessions(5000)
    controller.delete_topic("t", 0)

    assert log_values(plog) == CAPTURED_LOG


def test_a_log_the_dict_based_code_wrote_replays(tmp_path: Path) -> None:
    (tmp_path / "__cluster_metadata-0").mkdir()
    plog = PartitionLog(str(tmp_path / "__cluster_metadata-0"), "__cluster_metadata", 0, LogConfig())
    plog.load(clean_shutdown=False)
    # stop before the topic's deletion so the image still shows it
    payloads = [LEADER_CHANGE_PAYLOAD, *(v.encode() for v in CAPTURED_LOG[:-1])]
    PartitionRaftLog(plog).append(1, payloads)

    image = MetadataImage()
    for batch in plog.iter_batches():
        for offset, record in decode_batch(batch):
            image.apply(offset, record)

    assert image.offset == len(payloads) - 1
    assert image.cluster_id == "test-cluster"
    assert image.cluster_configs == {"min.insync.replicas": "1"}
    assert image.broker_configs == {2: {"log.retention.ms": "5"}}
    assert {b.broker_id: (b.broker_epoch, b.rack, b.fenced) for b in image.brokers.values()} == {
        1: (3, "r1", True), 2: (5, None, True), 3: (7, None, True)}
    topic = image.topics["t"]
    assert topic.topic_id == TOPIC
    assert topic.configs == {"cleanup.policy": "compact", "retention.ms": "1000"}
    assert topic.partitions == {0: PartitionRegistration((1, 2, 3), (), -1, 3, 3, (3,), (3,))}
    assert image.next_producer_id == 1000
