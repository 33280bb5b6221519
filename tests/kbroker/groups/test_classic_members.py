"""Classic members of consumer groups and the online upgrade/downgrade between the protocols
(classic_members.py), without sockets: a real OffsetStore over an in-memory log, the classic
and the consumer coordinator wired as in the broker.

Upgrade of a Stable classic group when a consumer-protocol member joins (and its refusal for
another protocol type or a policy that forbids it), classic members rejoining through
JoinGroup/SyncGroup/Heartbeat to disjoint assignments, their offset commits, the group's
classic metadata replayed after a restart, and the downgrade when the last consumer-protocol
member leaves.
"""

from __future__ import annotations

import asyncio
import struct
import uuid
from collections.abc import Awaitable, Callable, Iterator
from types import SimpleNamespace
from typing import Any

import pytest
from kbroker.protocol.errors import ErrorCode, KafkaError

from kbroker.groups import consumer_protocol
from kbroker.groups.classic_group import GroupState
from kbroker.groups.consumer_coordinator import ConsumerGroupCoordinator
from kbroker.groups.consumer_group import GroupState as ConsumerState
from kbroker.groups.consumer_heartbeat import HeartbeatRequest
from kbroker.groups.coordinator import GroupCoordinator
from kbroker.groups.group_settings import ClassicGroupSettings, ConsumerGroupSettings, GroupCoordinatorSettings
from kbroker.groups.offset_store import CONSUMER_OFFSETS_TOPIC, OffsetStore

T = uuid.UUID(int=1)
OFFSETS_PARTITIONS = 3


class Partition:
    """One in-memory ``__consumer_offsets`` partition: the batches appended to it."""

    def __init__(self) -> None:
        self.batches: list[bytes] = []
        self.log = self

    def iter_batches(self) -> Iterator[bytes]:
        return iter(self.batches)

    def append_as_leader(self, batch: memoryview, *_: object, **__: object) -> None:
        self.batches.append(bytes(batch))


class World:
    """Controller (topic t, 2 partitions) and replica manager for the OffsetStore, in memory."""

    def __init__(self) -> None:
        self.topics: dict[str, Any] = {"t": SimpleNamespace(topic_id=T, partitions=2),
                                       CONSUMER_OFFSETS_TOPIC: SimpleNamespace(topic_id=uuid.uuid4(),
                                                                               partitions=OFFSETS_PARTITIONS)}
        self.partitions: dict[tuple[str, int], Partition] = {}


    def get_partition(self, topic: str, index: int) -> Partition:
        return self.partitions.setdefault((topic, index), Partition())

    def store(self) -> OffsetStore:
        return OffsetStore(self, self, OFFSETS_PARTITIONS)  # type: ignore[arg-type]

    def reloaded(self) -> OffsetStore:
        store = self.store()
        for index in range(OFFSETS_PARTITIONS):
            store.load_partition(index)
        return store


def wire(world: World, migration_policy: str = "bidirectional") -> tuple[GroupCoordinator, ConsumerGroupCoordinator]:
    settings = GroupCoordinatorSettings(classic=ClassicGroupSettings(initial_rebalance_delay_ms=50),
                                        consumer=ConsumerGroupSettings(migration_policy=migration_policy))
    store = world.store()
    classic = GroupCoordinator(store, settings)
    consumer = ConsumerGroupCoordinator(settings.consumer, world, classic, store)  # type: ignore[arg-type]
    classic.consumer = consumer
    return classic, consumer


def subscription(version: int, topics: list[str], owned: dict[str, list[int]] | None = None) -> bytes:
    out = struct.pack(">hi", version, len(topics))
    for topic in topics:
        out += struct.pack(">h", len(topic)) + topic.encode()
    out += struct.pack(">i", -1)
    if version >= 1:
        owned = owned or {}
        out += struct.pack(">i", len(owned))
        for topic, ps in owned.items():
            out += struct.pack(">h", len(topic)) + topic.encode() + struct.pack(f">i{len(ps)}i", len(ps), *ps)
    return out


def run(body: Callable[[], Awaitable[None]]) -> None:
    asyncio.run(body())


async def stable_classic_group(classic: GroupCoordinator, protocol_type: str = "consumer") -> list[str]:
    """Two classic members of group g over t's two partitions, one each (generation 1)."""
    protocols = [("range", subscription(1, ["t"]))]
    a, b = await asyncio.gather(*(classic.join("g", "", None, protocol_type, protocols, 10_000, 10_000, "c", "h",
                                               False) for _ in range(2)))
    assert a.generation_id == b.generation_id == 1
    leader = a if a.member_id == a.leader else b
    assignments = {a.member_id: consumer_protocol.encode_assignment(1, {"t": {0}}),
                   b.member_id: consumer_protocol.encode_assignment(1, {"t": {1}})}
    synced = await asyncio.gather(*(classic.sync("g", 1, m.member_id, None, protocol_type, "range",
                                                 assignments if m is leader else {}) for m in (a, b)))
    assert [s.error for s in synced] == [ErrorCode.none, ErrorCode.none]
    return [a.member_id, b.member_id]


def consumer_join(consumer: ConsumerGroupCoordinator, member: str = "new") -> int:
    result = consumer.heartbeat(HeartbeatRequest("g", member, 0, rebalance_timeout_ms=10_000,
                                                 subscribed_topic_names=["t"], owned={}))
    return result.member_epoch


def test_consumer_protocol_codec() -> None:
    sub = consumer_protocol.decode_subscription(subscription(1, ["t", "u"], {"t": [0, 1]}))
    assert (sub.version, sub.topics, sub.owned) == (1, ["t", "u"], {"t": {0, 1}})
    assert consumer_protocol.decode_subscription(subscription(0, ["t"])).owned is None
    encoded = consumer_protocol.encode_assignment(3, {"t": {1, 0}, "u": {2}})
    assert consumer_protocol.decode_assignment(encoded) == {"t": {0, 1}, "u": {2}}
    with pytest.raises(ValueError):
        consumer_protocol.decode_subscription(b"\x00")


def test_upgrade_rejoin_and_disjoint_assignments() -> None:
    async def body() -> None:
        world = World()
        classic, consumer = wire(world)
        a, b = await stable_classic_group(classic)
        assert consumer_join(consumer) == 2  # the classic generation 1, bumped by the join
        group = consumer.group("g")
        assert group is not None and "g" not in classic.groups
        assert group.members[a].classic is not None and group.members[a].member_epoch == 1
        # the classic members must rejoin; their commits at generation 1 still count
        assert classic.heartbeat("g", 1, a, None) == ErrorCode.rebalance_in_progress
        classic.validate_commit("g", 1, a, None, 8)
        with pytest.raises(KafkaError):
            classic.validate_commit("g", 5, a, None, 8)
        owned: dict[str, set[int]] = {}
        for _ in range(4):  # rejoin / sync / heartbeat until every member is stable
            for member_id in (a, b):
                mine = [p for p, m in owned.items() if m == member_id]
                joined = await classic.join("g", member_id, None, "consumer",
                                            [("range", subscription(1, ["t"], {"t": mine}))], 10_000, 10_000,
                                            "c", "h", False)
                assert joined.error == ErrorCode.none and joined.leader == "" and not joined.members
                synced = await classic.sync("g", joined.generation_id, member_id, None, "consumer", "range", {})
                assert synced.error == ErrorCode.none
                for p in [p for p, m in owned.items() if m == member_id]:
                    del owned[p]
                for p in consumer_protocol.decode_assignment(synced.assignment).get("t", set()):
                    owned[p] = member_id
            consumer.heartbeat(HeartbeatRequest("g", "new", group.members["new"].member_epoch, owned={
                T: {p for p in range(2) if group.members["new"].assigned.get(T, set()) >= {p}}}))
            if group.state is ConsumerState.STABLE:
                break
        assert group.state is ConsumerState.STABLE
        held = [m.assigned.get(T, set()) for m in group.members.values()]
        assert sum(len(h) for h in held) == 2 and set().union(*held) == {0, 1}
        assert classic.heartbeat("g", group.members[a].member_epoch, a, None) == ErrorCode.none
        assert classic.heartbeat("g", 0, a, None) == ErrorCode.illegal_generation
        assert classic.heartbeat("g", 2, "nobody", None) == ErrorCode.unknown_member_id

        # a restart replays the classic members' metadata
        _, reloaded = wire(world)
        reloaded.store = None
        reloaded.load(world.reloaded().consumer_group_records)
        again = reloaded.group("g")
        assert again is not None and again.members[a].classic == group.members[a].classic
        assert again.members["new"].classic is None
        for m in [*again.members.values(), *group.members.values()]:
            m.cancel_timers()
        classic.stop()
    run(body)


def test_last_consumer_member_leaving_downgrades() -> None:
    async def body() -> None:
        classic, consumer = wire(World())
        a, b = await stable_classic_group(classic)
        consumer_join(consumer)
        group = consumer.group("g")
        assert group is not None
        target = {m: set(group.target[m].get(T, set())) for m in (a, b)}
        consumer.heartbeat(HeartbeatRequest("g", "new", group.members["new"].member_epoch, owned={}))
        consumer.heartbeat(HeartbeatRequest("g", "new", -1))
        assert consumer.group("g") is None and group.dead
        back = classic.groups["g"]
        assert back.is_in(GroupState.PREPARING_REBALANCE) and set(back.members) == {a, b}
        assert back.protocol_type == "consumer" and back.protocol_name == "range"
        for m in (a, b):  # each keeps its target from the consumer group
            assert consumer_protocol.decode_assignment(back.members[m].assignment).get("t", set()) == target[m]
        classic.stop()
    run(body)


@pytest.mark.parametrize("policy", ["disabled", "downgrade"])
def test_upgrade_refused_by_policy(policy: str) -> None:
    async def body() -> None:
        classic, consumer = wire(World(), migration_policy=policy)
        await stable_classic_group(classic)
        with pytest.raises(KafkaError) as info:
            consumer_join(consumer)
        assert info.value.code == ErrorCode.group_id_not_found and "g" in classic.groups
        classic.stop()
    run(body)


def test_upgrade_refused_for_another_protocol_type() -> None:
    async def body() -> None:
        classic, consumer = wire(World())
        await stable_classic_group(classic, protocol_type="connect")
        with pytest.raises(KafkaError) as info:
            consumer_join(consumer)
        assert info.value.code == ErrorCode.group_id_not_found
        classic.stop()
    run(body)


def test_no_downgrade_under_upgrade_policy_and_wrong_protocol_refused() -> None:
    async def body() -> None:
        classic, consumer = wire(World(), migration_policy="upgrade")
        a, _ = await stable_classic_group(classic)
        consumer_join(consumer)
        joined = await classic.join("g", "", None, "connect", [("x", b"")], 10_000, 10_000, "c", "h", False)
        assert joined.error == ErrorCode.inconsistent_group_protocol
        consumer.heartbeat(HeartbeatRequest("g", "new", -1))
        group = consumer.group("g")
        assert group is not None and len(group.members) == 2 and a in group.members and "new" not in group.members
        assert all(m.classic is not None for m in group.members.values())
        for m in group.members.values():
            m.cancel_timers()
        classic.stop()
    run(body)


def test_a_classic_group_that_cannot_be_read_is_refused_without_flooding_the_log(caplog) -> None:
    """Each consumer-protocol heartbeat retries the upgrade; a group whose ConsumerProtocol
    subscription is malformed refuses every one (GROUP_ID_NOT_FOUND) and logs why at most a
    handful of times a minute (issue 13: nothing a client repeats may flood the log)."""
    async def body() -> None:
        classic, consumer = wire(World())
        protocols = [("range", b"\x00")]  # not a ConsumerProtocolSubscription
        joined = await classic.join("g", "", None, "consumer", protocols, 10_000, 10_000, "c", "h", False)
        synced = await classic.sync("g", joined.generation_id, joined.member_id, None, "consumer", "range", {})
        assert synced.error == ErrorCode.none
        caplog.set_level("INFO", logger="kbroker.groups.consumer_coordinator")
        for attempt in range(50):
            with pytest.raises(KafkaError) as info:
                consumer_join(consumer, member=f"new-{attempt}")
            assert info.value.code == ErrorCode.group_id_not_found
        logged = [r for r in caplog.records if "cannot upgrade classic group" in r.getMessage()]
        assert 1 <= len(logged) <= 5
        classic.stop()
    run(body)
