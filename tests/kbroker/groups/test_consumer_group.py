"""KIP-848 reconciliation and the ConsumerGroupHeartbeat state machine, without sockets.

Members join, get disjoint partitions, revoke before others receive, are fenced on stale or
future epochs, leave, time out; static members; the checks OffsetCommit makes; the group's
records written to ``__consumer_offsets`` replay into the same group.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import pytest
from kbroker.protocol.errors import ErrorCode, KafkaError

from kbroker.groups.consumer_coordinator import ConsumerGroupCoordinator
from kbroker.groups.consumer_group import GroupState, MemberState
from kbroker.groups.consumer_heartbeat import HeartbeatRequest
from kbroker.groups.group_settings import ConsumerGroupSettings

T = uuid.UUID(int=7)


def make(topics: dict[str, int] | None = None, store: Any = None,
         **settings: Any) -> tuple[ConsumerGroupCoordinator, Any]:
    controller = SimpleNamespace(topics={
        name: SimpleNamespace(topic_id=uuid.UUID(int=7 + i), partitions=n)
        for i, (name, n) in enumerate((topics or {"t": 6}).items())})
    return ConsumerGroupCoordinator(ConsumerGroupSettings(**settings), controller, None, store), controller


def join(c: ConsumerGroupCoordinator, member: str, topics: tuple[str, ...] = ("t",), **kw: Any) -> Any:
    return c.heartbeat(HeartbeatRequest("g", member, 0, rebalance_timeout_ms=kw.pop("rebalance_ms", 30000),
                                        subscribed_topic_names=list(topics), owned={}, **kw))


def beat(c: ConsumerGroupCoordinator, member: str, epoch: int, owned: dict[uuid.UUID, set[int]] | None,
         **kw: Any) -> Any:
    return c.heartbeat(HeartbeatRequest("g", member, epoch, owned=owned, **kw))


def run(test: Callable[[], None]) -> None:
    async def body() -> None:
        test()
    asyncio.run(body())


def error_of(call: Callable[[], object]) -> ErrorCode:
    with pytest.raises(KafkaError) as info:
        call()
    return info.value.code


def test_single_member_gets_everything_at_epoch_two() -> None:
    def t() -> None:
        c, _ = make()
        r = join(c, "a")
        assert (r.member_epoch, r.assignment) == (2, {T: set(range(6))})
        assert c.groups["g"].state is GroupState.STABLE
        assert beat(c, "a", 2, None).assignment is None  # nothing changed: no assignment sent
    run(t)


def test_revocation_before_assignment() -> None:
    def t() -> None:
        c, _ = make()
        join(c, "a")
        r = join(c, "b")
        # b's partitions are still a's: b moves to epoch 2 with nothing, waiting for the release
        assert (r.member_epoch, r.assignment) == (3, {})
        group = c.groups["g"]
        assert group.members["b"].state is MemberState.UNRELEASED_PARTITIONS
        assert group.state is GroupState.RECONCILING
        # a is asked to revoke three partitions and keeps epoch 1 until it has
        r = beat(c, "a", 2, {T: set(range(6))})
        kept = r.assignment[T]
        assert r.member_epoch == 2 and len(kept) == 3
        assert group.members["a"].state is MemberState.UNREVOKED_PARTITIONS
        assert beat(c, "b", 3, {}).assignment is None  # still held by a
        # a confirms: it owns only what it kept, and moves to epoch 2
        r = beat(c, "a", 2, {T: kept})
        assert (r.member_epoch, r.assignment) == (3, {T: kept})
        r = beat(c, "b", 3, {})
        assert r.assignment == {T: set(range(6)) - kept}
        assert group.state is GroupState.STABLE
    run(t)


def test_three_members_converge_disjoint_and_complete() -> None:
    def t() -> None:
        c, _ = make()
        owned: dict[str, set[int]] = {}
        epochs: dict[str, int] = {}
        for m in "abc":
            r = join(c, m)
            epochs[m], owned[m] = r.member_epoch, set(r.assignment.get(T, set()))
        for _ in range(5):
            for m in "abc":
                r = beat(c, m, epochs[m], {T: owned[m]} if owned[m] else {})
                epochs[m] = r.member_epoch
                if r.assignment is not None:
                    owned[m] = set(r.assignment.get(T, set()))
        assert sorted(len(p) for p in owned.values()) == [2, 2, 2]
        assert set().union(*owned.values()) == set(range(6))
        assert c.groups["g"].state is GroupState.STABLE and set(epochs.values()) == {4}
    run(t)


def test_member_epoch_fencing_and_lost_response() -> None:
    def t() -> None:
        c, _ = make()
        join(c, "a")
        assert error_of(lambda: beat(c, "a", 6, None)) == ErrorCode.fenced_member_epoch
        assert error_of(lambda: beat(c, "zz", 2, None)) == ErrorCode.unknown_member_id
        join(c, "b")
        r = beat(c, "a", 2, {T: set(range(6))})
        kept = r.assignment[T]
        r = beat(c, "a", 2, {T: kept})
        assert r.member_epoch == 3
        # the response with epoch 2 was lost: epoch 1 with a subset of the assignment is accepted
        assert beat(c, "a", 2, {T: kept}).member_epoch == 3
        assert error_of(lambda: beat(c, "a", 2, {T: set(range(6))})) == ErrorCode.fenced_member_epoch
        assert error_of(lambda: beat(c, "a", 0, None)) == ErrorCode.invalid_request  # join needs a subscription
    run(t)


def test_leave_reassigns_and_session_and_rebalance_timeouts_fence() -> None:
    async def body() -> None:
        c, _ = make(session_timeout_ms=200)
        join(c, "a")
        join(c, "b", rebalance_ms=100)
        r = beat(c, "a", 2, {T: set(range(6))})
        kept = r.assignment[T]
        beat(c, "a", 2, {T: kept})
        r = beat(c, "b", 3, {})
        b_parts = r.assignment[T]
        assert beat(c, "b", 3, {T: b_parts}).member_epoch == 3
        r = c.heartbeat(HeartbeatRequest("g", "b", -1))
        assert r.member_epoch == -1
        group = c.groups["g"]
        assert group.group_epoch == 4 and set(group.members) == {"a"}
        r = beat(c, "a", 3, {T: kept})
        assert (r.member_epoch, r.assignment) == (4, {T: set(range(6))})
        # a stops heartbeating: removed after its session timeout, the group becomes Empty
        deadline = asyncio.get_running_loop().time() + 5
        while group.members and asyncio.get_running_loop().time() < deadline:
            await asyncio.sleep(0.05)
        assert group.state is GroupState.EMPTY and group.group_epoch == 5

    asyncio.run(body())


def test_member_that_does_not_revoke_is_fenced_after_rebalance_timeout() -> None:
    async def body() -> None:
        c, _ = make()
        join(c, "a", rebalance_ms=100)
        join(c, "b")
        beat(c, "a", 2, {T: set(range(6))})  # asked to revoke; never confirms
        group = c.groups["g"]
        deadline = asyncio.get_running_loop().time() + 5
        while "a" in group.members and asyncio.get_running_loop().time() < deadline:
            await asyncio.sleep(0.02)
        assert set(group.members) == {"b"}
        assert beat(c, "b", 3, {}).assignment == {T: set(range(6))}

    asyncio.run(body())


def test_validation_errors() -> None:
    def t() -> None:
        c, _ = make(max_size=1)
        req = HeartbeatRequest("", "a", 0, rebalance_timeout_ms=1, subscribed_topic_names=[], owned={})
        assert error_of(lambda: c.heartbeat(req)) == ErrorCode.invalid_request
        assert error_of(lambda: c.heartbeat(HeartbeatRequest("g", "", 0, rebalance_timeout_ms=1,
                                                             subscribed_topic_names=[], owned={}))) \
            == ErrorCode.invalid_request
        assert error_of(lambda: join(c, "a", server_assignor="sticky")) == ErrorCode.unsupported_assignor
        assert error_of(lambda: c.heartbeat(HeartbeatRequest("g", "a", 0, rebalance_timeout_ms=1, owned={},
                                                             subscribed_topic_regex="(?=x)t"))) \
            == ErrorCode.invalid_regular_expression
        join(c, "a", server_assignor="range")
        assert c.groups["g"].assignor_name == "range"
        assert error_of(lambda: join(c, "b")) == ErrorCode.group_max_size_reached
    run(t)


def test_regex_subscription_picks_up_a_new_topic() -> None:
    def t() -> None:
        c, controller = make({"orders-1": 2, "other": 2})
        r = c.heartbeat(HeartbeatRequest("g", "a", 0, rebalance_timeout_ms=1000, subscribed_topic_regex="orders-.*",
                                         owned={}))
        first = uuid.UUID(int=7)
        assert r.assignment == {first: {0, 1}}
        new = uuid.UUID(int=99)
        controller.topics["orders-2"] = SimpleNamespace(topic_id=new, partitions=3)
        r = beat(c, "a", 2, {first: {0, 1}})
        assert (r.member_epoch, r.assignment) == (3, {first: {0, 1}, new: {0, 1, 2}})
    run(t)


def test_static_member_leaves_temporarily_and_is_replaced() -> None:
    def t() -> None:
        c, _ = make()
        r = join(c, "a", instance_id="i1")
        assert error_of(lambda: join(c, "a2", instance_id="i1")) == ErrorCode.unreleased_instance_id
        r = c.heartbeat(HeartbeatRequest("g", "a", -2, instance_id="i1"))
        assert r.member_epoch == -2
        r = join(c, "a2", instance_id="i1")
        # the new member id takes over the assignment without a rebalance
        assert (r.member_epoch, r.assignment) == (2, {T: set(range(6))})
        assert c.groups["g"].group_epoch == 2
        assert error_of(lambda: beat(c, "a", 2, None, instance_id="i1")) == ErrorCode.unknown_member_id
    run(t)


def test_offset_commit_checks_the_member_epoch() -> None:
    def t() -> None:
        c, _ = make()
        join(c, "a")
        group = c.groups["g"]
        assert c.validate_commit(group, "a", 2, 9) is None  # the current epoch: nothing more to check
        assert error_of(lambda: c.validate_commit(group, "a", 3, 9)) == ErrorCode.stale_member_epoch
        older = c.validate_commit(group, "a", 0, 9)  # older: checked per partition
        assert older is not None and error_of(lambda: older(T, 0)) == ErrorCode.stale_member_epoch
        assert error_of(lambda: c.validate_commit(group, "x", 2, 9)) == ErrorCode.unknown_member_id
        assert error_of(lambda: c.validate_commit(group, "a", 2, 8)) == ErrorCode.unsupported_version
        assert error_of(lambda: c.validate_commit(group, "", -1, 9)) == ErrorCode.unknown_member_id
        c.validate_fetch("g", None, -1)
        assert error_of(lambda: c.validate_fetch("g", "a", 7)) == ErrorCode.stale_member_epoch
        assert c.delete_group("g") == ErrorCode.non_empty_group
        c.heartbeat(HeartbeatRequest("g", "a", -1))
        c.validate_commit(group, "", -1, 9)  # no members: a simple commit
        assert c.delete_group("g") == ErrorCode.none
    run(t)


def test_offset_commit_at_an_older_epoch_checks_each_partitions_assignment_epoch() -> None:
    """Kafka 4.3: a commit at an older member epoch is accepted for partitions the member has held
    since that epoch or earlier, refused (the whole commit) for any other."""
    def t() -> None:
        c, _ = make()
        join(c, "a")  # epoch 2, all six partitions
        join(c, "b")  # group epoch 3
        kept = beat(c, "a", 2, {T: set(range(6))}).assignment[T]
        assert beat(c, "a", 2, {T: kept}).member_epoch == 3
        given_up = set(range(6)) - kept
        group = c.groups["g"]
        at_two = c.validate_commit(group, "a", 2, 9)
        assert at_two is not None
        for p in kept:
            at_two(T, p)  # held since epoch 2
        assert error_of(lambda: at_two(T, min(given_up))) == ErrorCode.stale_member_epoch
        at_one = c.validate_commit(group, "a", 1, 9)
        assert at_one is not None and error_of(lambda: at_one(T, min(kept))) == ErrorCode.stale_member_epoch
        got = beat(c, "b", 3, {}).assignment[T]
        assert got == given_up
        at_two_b = c.validate_commit(group, "b", 2, 9)  # b's partitions are its own since epoch 3
        assert at_two_b is not None and error_of(lambda: at_two_b(T, min(got))) == ErrorCode.stale_member_epoch
    run(t)


class FakeStore:
    """Collects what the coordinator appends to ``__consumer_offsets``."""

    def __init__(self) -> None:
        self.log: list[tuple[bytes, bytes | None]] = []

    def write_records(self, group: str, batch: list[tuple[bytes, bytes | None]]) -> None:
        self.log.extend(batch)


def test_records_replay_into_the_same_group() -> None:
    async def body() -> None:
        store = FakeStore()
        c, controller = make(store=store)
        join(c, "a", instance_id="i1")
        join(c, "b", server_assignor="range")
        r = beat(c, "a", 2, {T: set(range(6))})
        kept = r.assignment[T]
        written_before = len(store.log)
        assert beat(c, "a", 2, {T: set(range(6))}).member_epoch == 2  # nothing changed: nothing written
        assert len(store.log) == written_before
        beat(c, "a", 2, {T: kept})
        join(c, "x")
        c.heartbeat(HeartbeatRequest("g", "x", -1))  # leaves: its records get tombstones
        before = c.groups["g"]
        c.stop()

        restored = ConsumerGroupCoordinator(ConsumerGroupSettings(), controller, None)
        restored.load(store.log)
        group = restored.groups["g"]
        assert (group.group_epoch, group.assignment_epoch, group.assignor_name) == (
            before.group_epoch, before.assignment_epoch, "range")
        assert set(group.members) == {"a", "b"} and group.static_members == {"i1": "a"}
        for mid in ("a", "b"):
            old, new = before.members[mid], group.members[mid]
            assert (new.member_epoch, new.previous_member_epoch, new.state, new.assigned,
                    new.pending_revocation, new.subscribed_topic_names, new.rebalance_timeout_ms) == (
                old.member_epoch, old.previous_member_epoch, old.state, old.assigned, old.pending_revocation,
                old.subscribed_topic_names, old.rebalance_timeout_ms)
        assert group.target == before.target and group.partition_owner_epoch == before.partition_owner_epoch
        # the restored member carries on at its epoch, without rejoining
        r = restored.heartbeat(HeartbeatRequest("g", "b", group.members["b"].member_epoch, owned={}))
        assert r.assignment == {T: set(range(6)) - kept}
        restored.stop()

    asyncio.run(body())


class FullDiskStore(FakeStore):
    """A ``__consumer_offsets`` partition whose appends fail while ``full`` is set."""

    def __init__(self) -> None:
        super().__init__()
        self.full = False

    def write_records(self, group: str, batch: list[tuple[bytes, bytes | None]]) -> None:
        if self.full:
            raise OSError(28, "No space left on device")
        super().write_records(group, batch)


def test_a_change_that_cannot_be_written_is_not_kept_and_fails_with_not_coordinator() -> None:
    async def body() -> None:
        store = FullDiskStore()
        c, _ = make(store=store)
        join(c, "a")
        join(c, "b")
        before = c.groups["g"]
        epochs = (before.group_epoch, {m: before.members[m].member_epoch for m in before.members})
        store.full = True
        assert error_of(lambda: join(c, "c")) == ErrorCode.not_coordinator
        assert error_of(lambda: c.heartbeat(HeartbeatRequest("g", "b", -1))) == ErrorCode.not_coordinator
        group = c.groups["g"]  # as the log has it: a and b, at the epochs last written
        assert set(group.members) == {"a", "b"}
        assert (group.group_epoch, {m: group.members[m].member_epoch for m in group.members}) == epochs
        store.full = False
        assert join(c, "c").member_epoch == epochs[0] + 1
        assert set(c.groups["g"].members) == {"a", "b", "c"}
        c.stop()

    asyncio.run(body())
