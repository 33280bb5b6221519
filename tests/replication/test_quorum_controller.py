"""QuorumController: Kafka's election, fencing and ISR rules, decided into a real metadata log.

Every test replays the controller's metadata log into a fresh MetadataImage at the end and
checks it matches the controller's own image: decisions live in the log, nowhere else. The
controller proposes straight into the on-disk Raft log (a one-voter quorum commits at once);
the quorum itself is tested in test_raft*.py and, over the network, in the cluster tests.
"""

from __future__ import annotations

import uuid

import pytest
from kbroker.protocol.errors import ErrorCode, KafkaError
from kbroker.replication.quorum.metadata_image import MetadataImage, decode_batch
from kbroker.replication.quorum.partition_registration import NO_LEADER
from kbroker.replication.quorum.quorum_controller import ControllerSettings, QuorumController
from kbroker.replication.quorum.raft_log import PartitionRaftLog
from kbroker.storage.log import PartitionLog
from kbroker.storage.log_config import LogConfig

SESSION_MS = 2000


def make_controller(tmp_path, epoch: int = 1, **defaults: str) -> QuorumController:
    (tmp_path / "__cluster_metadata-0").mkdir(exist_ok=True)
    plog = PartitionLog(str(tmp_path / "__cluster_metadata-0"), "__cluster_metadata", 0, LogConfig())
    plog.load(clean_shutdown=False)
    raft_log = PartitionRaftLog(plog)
    settings = ControllerSettings(
        node_id=100, session_timeout_ms=SESSION_MS, default_partitions=1,
        default_replication_factor=3, broker_default={"min.insync.replicas": "2", **defaults}.get,
    )
    controller = QuorumController(plog, settings, lambda payloads: raft_log.append(epoch, payloads))
    controller.activate(epoch, now_ms=0)
    if not controller.image.cluster_id:  # a new cluster: its first records, as the controller node writes them
        controller.bootstrap("test-cluster", [], now_ms=0)
    return controller


def start_brokers(controller: QuorumController, ids=(1, 2, 3), now_ms: int = 0, rack=None) -> dict[int, int]:
    epochs = {}
    for broker_id in ids:
        epochs[broker_id] = controller.register_broker(
            broker_id, f"incarnation-{broker_id}", f"127.0.0.1{broker_id}", 9092,
            rack(broker_id) if rack else None, now_ms)
        controller.heartbeat(broker_id, epochs[broker_id], controller.image.offset, False, False, now_ms)
    return epochs


def replayed(controller: QuorumController) -> MetadataImage:
    image = MetadataImage()
    for batch in controller.log.iter_batches():
        for offset, record in decode_batch(batch):
            image.apply(offset, record)
    return image


def assert_log_is_the_truth(controller: QuorumController) -> None:
    image = replayed(controller)
    assert image.offset == controller.image.offset
    assert {n: t.partitions for n, t in image.topics.items()} == {
        n: t.partitions for n, t in controller.image.topics.items()}
    assert {b: (r.broker_epoch, r.fenced) for b, r in image.brokers.items()} == {
        b: (r.broker_epoch, r.fenced) for b, r in controller.image.brokers.items()}


def test_registration_unfences_and_epochs_increase(tmp_path):
    controller = make_controller(tmp_path)
    first = controller.register_broker(1, "a", "h", 1, None, 0)
    assert controller.image.brokers[1].fenced
    caught_up, fenced, _ = controller.heartbeat(1, first, controller.image.offset, False, False, 10)
    assert caught_up and not fenced
    # A live broker's id cannot be taken by another incarnation within its session...
    with pytest.raises(KafkaError) as refused:
        controller.register_broker(1, "b", "h", 1, None, 20)
    assert refused.value.code == ErrorCode.duplicate_broker_registration
    # ...but after its session expired the new incarnation registers with a higher epoch (KIP-903).
    second = controller.register_broker(1, "b", "h", 1, None, 10 + SESSION_MS)
    assert second > first
    with pytest.raises(KafkaError) as stale:
        controller.heartbeat(1, first, controller.image.offset, False, False, 10 + SESSION_MS)
    assert stale.value.code == ErrorCode.stale_broker_epoch
    assert_log_is_the_truth(controller)


def test_topic_placement_spreads_leaders_and_alternates_racks(tmp_path):
    controller = make_controller(tmp_path)
    start_brokers(controller, ids=(1, 2, 3, 4), rack=lambda b: "a" if b <= 2 else "b")
    topic = controller.create_topic("t", 8, 2, {}, {}, False, 0)
    leaders = [reg.leader for reg in topic.partitions.values()]
    assert sorted(leaders.count(b) for b in (1, 2, 3, 4)) == [2, 2, 2, 2]
    racks = {1: "a", 2: "a", 3: "b", 4: "b"}
    for reg in topic.partitions.values():
        assert reg.isr == reg.replicas and reg.leader == reg.replicas[0] and reg.leader_epoch == 0
        assert len({racks[r] for r in reg.replicas}) == 2, reg  # one replica per rack
    with pytest.raises(KafkaError) as too_many:
        controller.create_topic("u", 1, 5, {}, {}, False, 0)
    assert too_many.value.code == ErrorCode.invalid_replication_factor
    assert_log_is_the_truth(controller)


def test_a_fenced_broker_still_gets_replicas_of_new_partitions_outside_the_isr(tmp_path):
    """Kafka 4 places on every registered broker: with broker 3 fenced (its session expired),
    RF 3 topics and new partitions are still created, led by 1 or 2, with 3 outside the ISR;
    once 3 is back, its leader's AlterPartition brings it into the ISR."""
    controller = make_controller(tmp_path)
    epochs = start_brokers(controller)
    for broker_id in (1, 2):
        controller.heartbeat(broker_id, epochs[broker_id], controller.image.offset, False, False, SESSION_MS - 1)
    controller.fence_expired_sessions(SESSION_MS)
    assert controller.image.brokers[3].fenced
    topic = controller.create_topic("t", 4, 3, {}, {}, False, SESSION_MS)
    controller.create_partitions("t", 6, (), False, SESSION_MS)
    regs = controller.image.topics["t"].partitions
    assert len(regs) == 6
    for reg in regs.values():
        assert sorted(reg.replicas) == [1, 2, 3] and reg.leader in (1, 2), reg
        assert reg.isr == tuple(r for r in reg.replicas if r != 3) and reg.isr[0] == reg.leader, reg
    with pytest.raises(KafkaError) as only_fenced:
        controller.create_topic("manual", -1, -1, {0: [3]}, {}, False, SESSION_MS)
    assert only_fenced.value.code == ErrorCode.invalid_replica_assignment
    with pytest.raises(KafkaError) as too_many:
        controller.create_topic("u", 1, 4, {}, {}, False, SESSION_MS)
    assert too_many.value.message == (
        "Unable to replicate the partition 4 time(s): The target replication factor of 4 cannot be reached "
        "because only 3 broker(s) are registered or some brokers have all their log directories cordoned.")
    # Broker 3 restarts (a new incarnation) and catches up; its leader adds it to the ISR.
    epochs[3] = controller.register_broker(3, "incarnation-3b", "127.0.0.13", 9092, None, SESSION_MS + 1)
    controller.heartbeat(3, epochs[3], controller.image.offset, False, False, SESSION_MS + 1)
    reg = regs[0]
    grown = controller.alter_partition(reg.leader, epochs[reg.leader], topic.topic_id, 0, reg.leader_epoch,
                                       reg.partition_epoch, [*reg.isr, 3], SESSION_MS + 2)
    assert sorted(grown.isr) == [1, 2, 3]
    assert_log_is_the_truth(controller)


def test_session_expiry_moves_leadership_to_an_isr_member_with_a_new_epoch(tmp_path):
    controller = make_controller(tmp_path)
    epochs = start_brokers(controller)
    topic = controller.create_topic("t", 1, 3, {0: [1, 2, 3]}, {}, False, 0)
    assert topic.partitions[0].leader == 1
    for broker_id in (2, 3):
        controller.heartbeat(broker_id, epochs[broker_id], controller.image.offset, False, False, SESSION_MS - 1)
    controller.fence_expired_sessions(SESSION_MS)
    reg = controller.image.topics["t"].partitions[0]
    assert (reg.leader, reg.leader_epoch, reg.isr) == (2, 1, (2, 3))
    assert reg.partition_epoch == 1
    assert_log_is_the_truth(controller)


def test_last_isr_member_is_kept_and_an_elr_member_is_elected_clean(tmp_path):
    """KIP-966: ISR {1,2,3}, min ISR 2: 3 leaves (ISR {1,2}), then 2 leaves while the ISR is at the
    minimum, so 2 joins the ELR; the leader 1 dies: no ISR member is live, and 2 — which holds
    every committed record — is elected rather than losing data or waiting for 1."""
    controller = make_controller(tmp_path)
    epochs = start_brokers(controller)
    controller.create_topic("t", 1, 3, {0: [1, 2, 3]}, {}, False, 0)
    topic_id = controller.image.topics["t"].topic_id
    reg = controller.alter_partition(1, epochs[1], topic_id, 0, 0, 0, [1, 2], 1)
    assert reg.isr == (1, 2) and reg.elr == ()
    reg = controller.alter_partition(1, epochs[1], topic_id, 0, 0, reg.partition_epoch, [1], 2)
    assert reg.isr == (1,) and reg.elr == (2,)
    controller.heartbeat(2, epochs[2], controller.image.offset, False, False, SESSION_MS - 1)
    controller.fence_expired_sessions(SESSION_MS)  # 1 and 3 expire; 2 is live
    reg = controller.image.topics["t"].partitions[0]
    assert reg.leader == 2 and reg.isr == (2,) and reg.leader_epoch == 1
    assert_log_is_the_truth(controller)


def test_no_live_isr_member_means_no_leader_unless_unclean_election_is_enabled(tmp_path):
    for unclean, expected_leader in (("false", NO_LEADER), ("true", 3)):
        directory = tmp_path / unclean
        directory.mkdir()
        controller = make_controller(directory, **{"unclean.leader.election.enable": unclean})
        epochs = start_brokers(controller)
        controller.create_topic("t", 1, 3, {0: [1, 2, 3]}, {"min.insync.replicas": "1"}, False, 0)
        topic_id = controller.image.topics["t"].topic_id
        # The ISR shrinks to the leader alone (followers lag); with min ISR 1 nobody joins the ELR.
        reg = controller.alter_partition(1, epochs[1], topic_id, 0, 0, 0, [1], 1)
        assert reg.elr == ()
        controller.heartbeat(3, epochs[3], controller.image.offset, False, False, SESSION_MS - 1)
        controller.fence_expired_sessions(SESSION_MS)  # 1 and 2 expire
        reg = controller.image.topics["t"].partitions[0]
        assert reg.leader == expected_leader, unclean
        if expected_leader == NO_LEADER:
            # KIP-966: the ISR may be empty; its last member keeps its claims (ELR, last known).
            assert (reg.isr, reg.elr, reg.last_known_elr) == ((), (1,), (1,))
            # It comes back after a crash: no longer an ELR member, but as the last known leader
            # it is the replica that can hold every committed record, so it leads again.
            epoch = controller.register_broker(1, "incarnation-1b", "h", 9092, None, SESSION_MS + 1)
            assert controller.image.topics["t"].partitions[0].elr == ()
            controller.heartbeat(1, epoch, controller.image.offset, False, False, SESSION_MS + 2)
            reg = controller.image.topics["t"].partitions[0]
            assert (reg.leader, reg.isr, reg.last_known_elr) == (1, (1,), ()) and reg.leader_epoch >= 1
        else:
            assert reg.isr == (3,)  # the unclean leader alone
        assert_log_is_the_truth(controller)


def test_alter_partition_checks_epochs_and_liveness(tmp_path):
    controller = make_controller(tmp_path)
    epochs = start_brokers(controller)
    controller.create_topic("t", 1, 3, {0: [1, 2, 3]}, {}, False, 0)
    topic_id = controller.image.topics["t"].topic_id

    def code(*args) -> ErrorCode:
        with pytest.raises(KafkaError) as exc:
            controller.alter_partition(*args)
        return exc.value.code

    assert code(2, epochs[2], topic_id, 0, 0, 0, [2, 3], 1) == ErrorCode.not_leader_or_follower
    assert code(1, epochs[1] - 1, topic_id, 0, 0, 0, [1, 2], 1) == ErrorCode.stale_broker_epoch
    assert code(1, epochs[1], uuid.uuid4(), 0, 0, 0, [1, 2], 1) == ErrorCode.unknown_topic_or_partition
    reg = controller.alter_partition(1, epochs[1], topic_id, 0, 0, 0, [1, 2], 1)
    # A change computed from the old partition epoch is refused (AlterPartition's fencing).
    assert code(1, epochs[1], topic_id, 0, 0, 0, [1], 2) == ErrorCode.invalid_update_version
    # A fenced broker cannot be added back to the ISR.
    controller.heartbeat(1, epochs[1], controller.image.offset, False, False, SESSION_MS - 1)
    controller.heartbeat(2, epochs[2], controller.image.offset, False, False, SESSION_MS - 1)
    controller.fence_expired_sessions(SESSION_MS)  # 3 expires
    assert code(1, epochs[1], topic_id, 0, 0, reg.partition_epoch, [1, 2, 3], SESSION_MS) \
        == ErrorCode.ineligible_replica
    assert_log_is_the_truth(controller)


def test_controlled_shutdown_moves_leadership_before_the_broker_is_fenced(tmp_path):
    controller = make_controller(tmp_path)
    epochs = start_brokers(controller)
    controller.create_topic("t", 3, 3, {}, {}, False, 0)
    led_by_1 = [i for i, reg in controller.image.topics["t"].partitions.items() if reg.leader == 1]
    assert led_by_1
    _caught_up, fenced, shut_down = controller.heartbeat(1, epochs[1], controller.image.offset, False, True, 5)
    assert fenced and shut_down
    for reg in controller.image.topics["t"].partitions.values():
        assert reg.leader in (2, 3) and 1 not in reg.isr
    assert_log_is_the_truth(controller)


def test_a_restarted_controller_rebuilds_everything_from_its_log(tmp_path):
    controller = make_controller(tmp_path)
    epochs = start_brokers(controller)
    controller.create_topic("t", 2, 3, {}, {"retention.ms": "1000"}, False, 0)
    start, length = controller.allocate_producer_ids(1, epochs[1], 0)
    controller.delete_topic("t", 1)
    controller.create_topic("u", 1, 3, {}, {}, False, 2)
    controller.log.close()
    again = make_controller(tmp_path, epoch=2)
    assert set(again.image.topics) == {"u"}
    assert again.epoch == controller.epoch + 1
    assert again.image.cluster_id == "test-cluster"
    # Producer id blocks are never handed out twice, across controller restarts too.
    assert again.allocate_producer_ids(2, epochs[2], 3) == (start + length, length)
    assert_log_is_the_truth(again)


def test_preferred_election_and_auto_rebalance_return_leadership_to_the_first_replica(tmp_path):
    controller = make_controller(tmp_path)
    epochs = start_brokers(controller)
    controller.create_topic("t", 3, 3, {0: [1, 2, 3], 1: [2, 3, 1], 2: [3, 1, 2]}, {}, False, 0)
    assert controller.elect_leaders(0, [("t", 0)], 1) == {("t", 0): (ErrorCode.election_not_needed, None)}
    for broker_id in (2, 3):
        controller.heartbeat(broker_id, epochs[broker_id], controller.image.offset, False, False, SESSION_MS - 1)
    controller.fence_expired_sessions(SESSION_MS)  # 1 dies: partition 0 moves to 2
    assert controller.image.topics["t"].partitions[0].leader == 2
    error, _message = controller.elect_leaders(0, [("t", 0)], SESSION_MS)[("t", 0)]
    assert error == ErrorCode.preferred_leader_not_available
    epoch = controller.register_broker(1, "incarnation-1b", "h", 9092, None, SESSION_MS + 1)
    controller.heartbeat(1, epoch, controller.image.offset, False, False, SESSION_MS + 1)
    reg = controller.image.topics["t"].partitions[0]
    controller.alter_partition(2, epochs[2], controller.image.topics["t"].topic_id, 0, reg.leader_epoch,
                               reg.partition_epoch, [1, 2, 3], SESSION_MS + 2)  # 1 caught up again
    # Broker 1 leads none of the partitions it prefers: 100 % > 10 %, so the rebalance moves it back.
    assert controller.rebalance_leaders(10, SESSION_MS + 3) == 1
    reg = controller.image.topics["t"].partitions[0]
    assert reg.leader == 1 and reg.leader_epoch == 2
    assert controller.rebalance_leaders(10, SESSION_MS + 4) == 0
    assert_log_is_the_truth(controller)


def test_reassignment_adds_then_removes_replicas_once_the_targets_are_in_sync(tmp_path):
    controller = make_controller(tmp_path)
    epochs = start_brokers(controller, ids=(1, 2, 3, 4))
    controller.create_topic("t", 1, 2, {0: [1, 2]}, {}, False, 0)
    topic_id = controller.image.topics["t"].topic_id
    assert controller.alter_reassignments([("t", 0, [3, 4])], True, 1) == {("t", 0): (ErrorCode.none, None)}
    reg = controller.image.topics["t"].partitions[0]
    # Both sets replicate meanwhile; the ISR and the leader have not moved yet.
    assert (reg.replicas, reg.adding, reg.removing, reg.isr, reg.leader) == ((3, 4, 1, 2), (3, 4), (1, 2), (1, 2), 1)
    assert set(controller.ongoing_reassignments(None)) == {("t", 0)}
    reg = controller.alter_partition(1, epochs[1], topic_id, 0, reg.leader_epoch, reg.partition_epoch, [1, 2, 3], 2)
    assert reg.adding == (3, 4)  # 4 is not in sync yet
    reg = controller.alter_partition(1, epochs[1], topic_id, 0, reg.leader_epoch, reg.partition_epoch,
                                     [1, 2, 3, 4], 3)
    # Done: the targets alone, and leadership handed to the first in-sync target (new epoch).
    assert (reg.replicas, reg.isr, reg.adding, reg.removing, reg.leader, reg.leader_epoch) == (
        (3, 4), (3, 4), (), (), 3, 1)
    assert controller.ongoing_reassignments(None) == {}

    def error(target, allow_rf_change=True) -> ErrorCode:
        return controller.alter_reassignments([("t", 0, target)], allow_rf_change, 4)[("t", 0)][0]

    assert error(None) == ErrorCode.no_reassignment_in_progress
    assert error([3, 9]) == ErrorCode.invalid_replica_assignment
    assert error([3], allow_rf_change=False) == ErrorCode.invalid_replication_factor
    # A cancelled reassignment goes back to the original replicas.
    controller.alter_reassignments([("t", 0, [1, 2])], True, 5)
    controller.alter_reassignments([("t", 0, None)], True, 6)
    reg = controller.image.topics["t"].partitions[0]
    assert (reg.replicas, reg.adding, reg.removing, reg.leader) == ((3, 4), (), (), 3)
    assert_log_is_the_truth(controller)
