"""The classic group APIs as bare requests against a real broker: the join/sync round trips,
their error codes, offsets commit checks, and the group admin APIs (ListGroups, DescribeGroups,
DeleteGroups, OffsetDelete), as Kafka 4.3 answers them."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient
from kio.schema.delete_groups.v2 import request as delete_groups
from kio.schema.describe_groups.v5 import request as describe_groups_v5
from kio.schema.describe_groups.v6 import request as describe_groups_v6
from kio.schema.join_group.v3 import request as join_v3
from kio.schema.list_groups.v5 import request as list_groups
from kio.schema.offset_delete.v0 import request as offset_delete
from kio.schema.offset_fetch.v8 import request as offset_fetch_v8
from kio.schema.txn_offset_commit.v5 import request as txn_offset_commit
from kio.static.primitive import i16, i32, i64

from tests.broker_process import BrokerProcess

from .clients import create, producer_id
from .groups_wire import SESSION, commit, fetch, heartbeat, join, join_known, leave, subscription, sync
from .wire import call, wait_for_coordinators

NONE, UNKNOWN_TOPIC, META_TOO_LARGE, ILLEGAL_GENERATION, INCONSISTENT_PROTOCOL = 0, 3, 12, 22, 23
UNKNOWN_MEMBER, REBALANCE_IN_PROGRESS, INVALID_SESSION_TIMEOUT, NON_EMPTY, NOT_FOUND = 25, 27, 26, 68, 69
MEMBER_ID_REQUIRED, GROUP_FULL, FENCED, SUBSCRIBED, UNSTABLE = 79, 81, 82, 86, 88


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    proc = BrokerProcess(str(tmp_path_factory.mktemp("groups") / "data"), {
        "group.initial.rebalance.delay.ms": "0", "offsets.topic.num.partitions": "3",
        "transaction.state.log.num.partitions": "3", "group.max.size": "2"})
    proc.start()
    yield proc
    proc.close()


@pytest.fixture(scope="module")
def cadmin(broker: BrokerProcess) -> AdminClient:
    return AdminClient({"bootstrap.servers": broker.bootstrap})


def _group() -> str:
    return f"g-{uuid.uuid4().hex[:8]}"


def _describe(bootstrap: str, group: str, version: int = 6) -> object:
    module = describe_groups_v6 if version == 6 else describe_groups_v5
    return call(bootstrap, module.DescribeGroupsRequest(groups=(group,), include_authorized_operations=True),
                version).groups[0]


def test_member_id_required_then_a_stable_single_member_generation(broker: BrokerProcess) -> None:
    group = _group()
    first = join(broker.bootstrap, group)
    assert (first.error_code, first.generation_id) == (MEMBER_ID_REQUIRED, -1) and first.member_id.startswith(
        "kbroker-tests-")
    joined = join(broker.bootstrap, group, first.member_id)
    assert (joined.error_code, joined.generation_id, joined.leader, joined.member_id) == (
        NONE, 1, first.member_id, first.member_id)
    assert (joined.protocol_type, joined.protocol_name) == ("consumer", "range")
    assert [(m.member_id, m.metadata) for m in joined.members] == [(first.member_id, b"m")]
    synced = sync(broker.bootstrap, group, 1, first.member_id, {first.member_id: b"assigned"})
    assert (synced.error_code, synced.assignment, synced.protocol_name) == (NONE, b"assigned", "range")
    assert heartbeat(broker.bootstrap, group, 1, first.member_id) == NONE
    assert heartbeat(broker.bootstrap, group, 2, first.member_id) == ILLEGAL_GENERATION
    assert heartbeat(broker.bootstrap, group, 1, "nobody") == UNKNOWN_MEMBER
    described = _describe(broker.bootstrap, group)
    assert (described.error_code, described.group_state, described.protocol_type, described.protocol_data) == (
        NONE, "Stable", "consumer", "range")
    assert [(m.member_id, m.member_assignment, m.client_host) for m in described.members] == [
        (first.member_id, b"assigned", "/127.0.0.1")]
    # A pre-v4 client joins at once; the existing member is rebalanced with it.
    old = join_v3.JoinGroupRequest(group_id=_group(), session_timeout=SESSION, rebalance_timeout=SESSION,
                                   member_id="", protocol_type="consumer",
                                   protocols=(join_v3.JoinGroupRequestProtocol(name="range", metadata=b""),))
    assert call(broker.bootstrap, old, 3, timeout=20).error_code == NONE
    assert join(broker.bootstrap, group, session=SESSION * 1000).error_code == INVALID_SESSION_TIMEOUT


def test_group_max_size_counts_members_still_to_come_back_with_their_id(broker: BrokerProcess) -> None:
    group = _group()
    assert [join(broker.bootstrap, group).error_code for _ in range(3)] == [MEMBER_ID_REQUIRED, MEMBER_ID_REQUIRED,
                                                                             GROUP_FULL]


def test_rebalance_selects_a_common_protocol_and_distributes_the_leaders_assignment(broker: BrokerProcess) -> None:
    group = _group()
    both = (("range", b"a"), ("roundrobin", b"a"))
    a = join_known(broker.bootstrap, group, protocols=both)
    assert sync(broker.bootstrap, group, 1, a.member_id, {a.member_id: b"all"}).assignment == b"all"
    assert join(broker.bootstrap, group, protocols=(("sticky", b""),)).error_code == INCONSISTENT_PROTOCOL
    assert join(broker.bootstrap, group, protocol_type="connect", protocols=both).error_code == INCONSISTENT_PROTOCOL
    with ThreadPoolExecutor(2) as pool:
        b_join = pool.submit(join_known, broker.bootstrap, group, protocols=(("roundrobin", b"b"),))
        # B's join parks the group in PreparingRebalance until A rejoins.
        for _ in range(200):
            if heartbeat(broker.bootstrap, group, 1, a.member_id) == REBALANCE_IN_PROGRESS:
                break
        else:
            raise AssertionError("no rebalance started")
        assert sync(broker.bootstrap, group, 1, a.member_id).error_code == REBALANCE_IN_PROGRESS
        a2 = join(broker.bootstrap, group, a.member_id, protocols=both)
        b = b_join.result(20)
        assert (a2.generation_id, b.generation_id, a2.protocol_name, b.protocol_name) == (2, 2, "roundrobin",
                                                                                          "roundrobin")
        assert a2.leader == b.leader == a.member_id and b.members == ()
        assert sorted(m.metadata for m in a2.members) == [b"a", b"b"]
        assert sync(broker.bootstrap, group, 1, b.member_id, protocol_name="roundrobin").error_code == (
            ILLEGAL_GENERATION)
        assert sync(broker.bootstrap, group, 2, b.member_id, protocol_name="range").error_code == (
            INCONSISTENT_PROTOCOL)
        follower = pool.submit(sync, broker.bootstrap, group, 2, b.member_id, protocol_name="roundrobin")
        leader = sync(broker.bootstrap, group, 2, a.member_id, {a.member_id: b"p0", b.member_id: b"p1"},
                      protocol_name="roundrobin")
        assert (leader.assignment, follower.result(20).assignment) == (b"p0", b"p1")
    assert [(r.member_id, r.error_code) for r in leave(broker.bootstrap, group, [(b.member_id, None),
                                                                                 ("ghost", None)]).members] == [
        (b.member_id, NONE), ("ghost", UNKNOWN_MEMBER)]
    assert heartbeat(broker.bootstrap, group, 2, a.member_id) == REBALANCE_IN_PROGRESS


def test_static_member_rejoins_without_rebalance_and_fences_its_old_id(broker: BrokerProcess,
                                                                      cadmin: AdminClient) -> None:
    topic, group = create(cadmin, 1), _group()
    first = join(broker.bootstrap, group, instance="i-1")  # static members skip MEMBER_ID_REQUIRED
    assert (first.error_code, first.generation_id) == (NONE, 1)
    assert sync(broker.bootstrap, group, 1, first.member_id, {first.member_id: b"mine"},
                instance="i-1").assignment == b"mine"
    again = join(broker.bootstrap, group, instance="i-1")
    assert (again.error_code, again.generation_id, again.skip_assignment) == (NONE, 1, True)
    assert again.member_id != first.member_id and again.leader == again.member_id
    assert sync(broker.bootstrap, group, 1, again.member_id, instance="i-1").assignment == b"mine"
    assert heartbeat(broker.bootstrap, group, 1, first.member_id, "i-1") == FENCED
    assert heartbeat(broker.bootstrap, group, 1, again.member_id, "i-1") == NONE
    assert commit(broker.bootstrap, group, {(topic, 0): 1}, generation=1, member_id=first.member_id,
                  instance="i-1") == [FENCED]
    result = leave(broker.bootstrap, group, [(first.member_id, "i-1"), ("", "i-2"), ("", "i-1")])
    assert [m.error_code for m in result.members] == [FENCED, UNKNOWN_MEMBER, NONE]
    assert _describe(broker.bootstrap, group).group_state == "Empty"


def test_offset_commit_checks_generation_member_and_partitions(broker: BrokerProcess, cadmin: AdminClient) -> None:
    topic = create(cadmin, 2)
    simple = _group()
    assert commit(broker.bootstrap, simple, {(topic, 0): 5, (topic, 1): 7}) == [NONE, NONE]
    assert fetch(broker.bootstrap, simple, [(topic, 0), (topic, 1), ("nope", 0)]) == {
        (topic, 0): (5, "meta", NONE), (topic, 1): (7, "meta", NONE), ("nope", 0): (-1, "", NONE)}
    assert fetch(broker.bootstrap, simple, None) == {(topic, 0): (5, "meta", NONE), (topic, 1): (7, "meta", NONE)}
    assert commit(broker.bootstrap, simple, {("no-such-topic", 0): 1, (topic, 0): 6}) == [UNKNOWN_TOPIC, NONE]
    assert commit(broker.bootstrap, simple, {(topic, 0): 1}, metadata="x" * 5000) == [META_TOO_LARGE]
    unknown = _group()
    assert commit(broker.bootstrap, unknown, {(topic, 0): 1}, generation=3, member_id="m", version=8) == [
        ILLEGAL_GENERATION]
    assert commit(broker.bootstrap, unknown, {(topic, 0): 1}, generation=3, member_id="m") == [NOT_FOUND]
    # Unknown partitions are answered before the group is looked at; with nothing else in the
    # request the group coordinator is not asked at all (Kafka's KafkaApis does the same).
    assert commit(broker.bootstrap, unknown, {("no-such-topic", 0): 1, (topic, 2): 1}, generation=3,
                  member_id="m") == [UNKNOWN_TOPIC, UNKNOWN_TOPIC]
    # Generation -1 to a group that does not exist: a simple group, whatever member id is named
    # (librdkafka's group.protocol=consumer consumers that assign() send their own id).
    assigning = _group()
    assert commit(broker.bootstrap, assigning, {(topic, 0): 4, (topic, 2): 1}, member_id="client-made-id") == [
        NONE, UNKNOWN_TOPIC]
    assert fetch(broker.bootstrap, assigning, [(topic, 0)]) == {(topic, 0): (4, "meta", NONE)}
    assert commit(broker.bootstrap, assigning, {(topic, 0): 5}, member_id="another-id") == [NONE]
    assert commit(broker.bootstrap, "", {(topic, 1): 2}) == [NONE]  # "" is a group id like any other
    assert fetch(broker.bootstrap, "", [(topic, 1)]) == {(topic, 1): (2, "meta", NONE)}
    group = _group()
    member = join_known(broker.bootstrap, group)
    sync(broker.bootstrap, group, 1, member.member_id, {member.member_id: b""})
    assert commit(broker.bootstrap, group, {(topic, 0): 1}) == [UNKNOWN_MEMBER]  # admin commit, live group
    assert commit(broker.bootstrap, group, {(topic, 0): 1}, generation=2, member_id=member.member_id) == [
        ILLEGAL_GENERATION]
    assert commit(broker.bootstrap, group, {(topic, 0): 1}, generation=1, member_id="other") == [UNKNOWN_MEMBER]
    assert commit(broker.bootstrap, group, {(topic, 0): 11}, generation=1, member_id=member.member_id) == [NONE]
    batched = call(broker.bootstrap, offset_fetch_v8.OffsetFetchRequest(groups=(
        offset_fetch_v8.OffsetFetchRequestGroup(group_id=group, topics=(
            offset_fetch_v8.OffsetFetchRequestTopics(name=topic, partition_indexes=(i32(0),)),)),
        offset_fetch_v8.OffsetFetchRequestGroup(group_id=simple, topics=None)), require_stable=False), 8)
    assert [(g.group_id, [(t.name, p.partition_index, p.committed_offset) for t in g.topics for p in t.partitions])
            for g in batched.groups] == [(group, [(topic, 0, 11)]), (simple, [(topic, 0, 6), (topic, 1, 7)])]


def test_require_stable_reports_offsets_pending_in_a_transaction(broker: BrokerProcess, cadmin: AdminClient) -> None:
    topic, group = create(cadmin, 1), _group()
    producer = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": f"tx-{group}"})
    producer.init_transactions(10)
    producer.begin_transaction()
    producer.produce(topic, b"v")
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group})  # only for its group metadata
    producer.send_offsets_to_transaction([TopicPartition(topic, 0, 42)], consumer.consumer_group_metadata(), 10)
    consumer.close()
    assert fetch(broker.bootstrap, group, [(topic, 0)], require_stable=True) == {(topic, 0): (-1, "", UNSTABLE)}
    assert fetch(broker.bootstrap, group, [(topic, 0)]) == {(topic, 0): (-1, "", NONE)}
    producer.commit_transaction(10)
    assert fetch(broker.bootstrap, group, [(topic, 0)], require_stable=True) == {(topic, 0): (42, "", NONE)}


def test_list_describe_delete_groups_and_offset_delete(broker: BrokerProcess, cadmin: AdminClient) -> None:
    subscribed, other = create(cadmin, 1), create(cadmin, 1)
    live = _group()
    member = join_known(broker.bootstrap, live, protocols=(("range", subscription(subscribed)),))
    sync(broker.bootstrap, live, 1, member.member_id, {member.member_id: b""})
    assert commit(broker.bootstrap, live, {(subscribed, 0): 3, (other, 0): 4}, generation=1,
                  member_id=member.member_id) == [NONE, NONE]
    simple = _group()
    assert commit(broker.bootstrap, simple, {(other, 0): 9}) == [NONE]

    def listed(states: tuple[str, ...] = (), types: tuple[str, ...] = ()) -> dict[str, tuple[str, str, str]]:
        response = call(broker.bootstrap, list_groups.ListGroupsRequest(states_filter=states, types_filter=types), 5)
        return {g.group_id: (g.protocol_type, g.group_state, g.group_type) for g in response.groups}

    assert listed()[live] == ("consumer", "Stable", "classic") and listed()[simple] == ("", "Empty", "classic")
    assert live in listed(("stable",)) and simple not in listed(("Stable",)) and simple in listed(("EMPTY",))
    assert listed(types=("consumer",)) == {} and live in listed(types=("Classic",))

    missing = _describe(broker.bootstrap, "no-such-group")
    assert (missing.error_code, missing.group_state, missing.error_message) == (
        NOT_FOUND, "Dead", "Group no-such-group not found.")
    old = _describe(broker.bootstrap, "no-such-group", version=5)
    assert (old.error_code, old.group_state) == (NONE, "Dead")

    def offset_delete_errors(group: str, topic: str) -> tuple[int, list[int]]:
        response = call(broker.bootstrap, offset_delete.OffsetDeleteRequest(group_id=group, topics=(
            offset_delete.OffsetDeleteRequestTopic(name=topic, partitions=(
                offset_delete.OffsetDeleteRequestPartition(partition_index=i32(0)),)),)), 0)
        return response.error_code, [p.error_code for t in response.topics for p in t.partitions]

    assert offset_delete_errors(live, subscribed) == (NONE, [SUBSCRIBED])
    assert offset_delete_errors(live, other) == (NONE, [NONE])
    assert offset_delete_errors("no-such-group", other) == (NOT_FOUND, [])
    assert fetch(broker.bootstrap, live, None) == {(subscribed, 0): (3, "meta", NONE)}

    def delete(*groups: str) -> list[int]:
        response = call(broker.bootstrap, delete_groups.DeleteGroupsRequest(groups_names=groups), 2)
        return [r.error_code for r in response.results]

    assert delete(live, simple, "no-such-group") == [NON_EMPTY, NONE, NOT_FOUND]
    assert fetch(broker.bootstrap, simple, None) == {} and simple not in listed()
    leave(broker.bootstrap, live, [(member.member_id, None)])
    assert delete(live) == [NONE]


def test_txn_offset_commit_checks_the_members_generation(broker: BrokerProcess, cadmin: AdminClient) -> None:
    topic, group = create(cadmin, 1), _group()
    member = join_known(broker.bootstrap, group)
    sync(broker.bootstrap, group, 1, member.member_id, {member.member_id: b""})
    error, pid, epoch = producer_id(broker.bootstrap, f"txn-{group}")
    assert error == 0

    def txn_commit(generation: int, member_id: str) -> int:
        request = txn_offset_commit.TxnOffsetCommitRequest(
            transactional_id=f"txn-{group}", group_id=group, producer_id=i64(pid), producer_epoch=i16(epoch),
            generation_id=i32(generation), member_id=member_id, group_instance_id=None,
            topics=(txn_offset_commit.TxnOffsetCommitRequestTopic(name=topic, partitions=(
                txn_offset_commit.TxnOffsetCommitRequestPartition(
                    partition_index=i32(0), committed_offset=i64(5), committed_leader_epoch=i32(-1),
                    committed_metadata=""),)),))
        return call(broker.bootstrap, request, 5).topics[0].partitions[0].error_code

    assert txn_commit(2, member.member_id) == ILLEGAL_GENERATION
    assert txn_commit(1, "someone-else") == UNKNOWN_MEMBER
    assert txn_commit(1, member.member_id) == NONE
    assert txn_commit(-1, "") == NONE  # no member named: any group takes it, as Kafka's
    assert fetch(broker.bootstrap, group, [(topic, 0)], require_stable=True) == {(topic, 0): (-1, "", UNSTABLE)}


def test_initial_rebalance_delay_gathers_the_first_members_into_one_generation(tmp_path) -> None:
    slow = BrokerProcess(str(tmp_path / "data"), {"group.initial.rebalance.delay.ms": "1000",
                                                  "offsets.topic.num.partitions": "1"})
    slow.start()
    wait_for_coordinators(slow.bootstrap)
    try:
        group = _group()
        with ThreadPoolExecutor(2) as pool:
            started = time.monotonic()
            first = pool.submit(join, slow.bootstrap, group, instance="a")
            # The second member arrives during the delay: both are in generation 1 and nobody
            # learns of the group before the delay is over.
            second = join(slow.bootstrap, group, instance="b")
            assert (second.generation_id, first.result(20).generation_id) == (1, 1)
            assert time.monotonic() - started >= 0.9
        assert sorted(m.group_instance_id for m in (first.result().members or second.members)) == ["a", "b"]
    finally:
        slow.close()


def test_a_stable_generation_is_loaded_back_after_kill_9(tmp_path) -> None:
    crashing = BrokerProcess(str(tmp_path / "data"), {"group.initial.rebalance.delay.ms": "0",
                                                      "offsets.topic.num.partitions": "2"})
    crashing.start()
    wait_for_coordinators(crashing.bootstrap)
    try:
        group = _group()
        member = join_known(crashing.bootstrap, group, instance=None)
        assert sync(crashing.bootstrap, group, 1, member.member_id, {member.member_id: b"p0-5"}).error_code == NONE
        crashing.kill()
        crashing.start()
        wait_for_coordinators(crashing.bootstrap)
        described = _describe(crashing.bootstrap, group)
        assert (described.group_state, described.protocol_data) == ("Stable", "range")
        assert [(m.member_id, m.member_assignment) for m in described.members] == [(member.member_id, b"p0-5")]
        assert heartbeat(crashing.bootstrap, group, 1, member.member_id) == NONE  # same generation, same member
        assert sync(crashing.bootstrap, group, 1, member.member_id).assignment == b"p0-5"
    finally:
        crashing.close()
