"""offsets.retention.minutes, driven with an explicit clock (``expire_offsets(now_ms)``).

Kafka's rules: an Empty classic group's offsets expire the retention after the group became
Empty; standalone commits (no protocol type) the retention after each commit; a Stable group
keeps the offsets of the topics it subscribes to (those of other topics expire by commit time,
KIP-496); a KIP-848 consumer group loses the offsets of topics it does not subscribe to by
commit time. An Empty group left without offsets is deleted. Everything goes through a real
OffsetStore over an in-memory ``__consumer_offsets`` log, and a second store replayed from
that log shows the tombstones.
"""

from __future__ import annotations

import asyncio
import struct
import uuid
from types import SimpleNamespace
from typing import Any

from kbroker.groups.classic_group import GroupState
from kbroker.groups.consumer_coordinator import ConsumerGroupCoordinator
from kbroker.groups.consumer_group import GroupState as ConsumerState
from kbroker.groups.consumer_heartbeat import HeartbeatRequest
from kbroker.groups.coordinator import GroupCoordinator
from kbroker.groups.group_settings import ClassicGroupSettings, ConsumerGroupSettings, GroupCoordinatorSettings
from kbroker.groups.offset_store import CONSUMER_OFFSETS_TOPIC, OffsetAndMetadata, OffsetStore

RETENTION_MS = 60_000
OFFSETS_PARTITIONS = 3
TOPICS = {"t": uuid.UUID(int=1), "u": uuid.UUID(int=2)}


class MemoryLog:
    def __init__(self) -> None:
        self.batches: list[bytes] = []

    def iter_batches(self) -> Any:
        return iter(self.batches)


class MemoryPartition:
    def __init__(self) -> None:
        self.log = MemoryLog()

    def append_as_leader(self, batch: memoryview, *_: object, **__: object) -> None:
        self.log.batches.append(bytes(batch))


class World:
    """A controller with topics t and u (2 partitions each) and an in-memory replica manager."""

    def __init__(self) -> None:
        self.topics: dict[str, Any] = {
            name: SimpleNamespace(topic_id=topic_id, partitions=2) for name, topic_id in TOPICS.items()}
        self.topics[CONSUMER_OFFSETS_TOPIC] = SimpleNamespace(topic_id=uuid.uuid4(), partitions=OFFSETS_PARTITIONS)
        self.partitions: dict[tuple[str, int], MemoryPartition] = {}


    def get_partition(self, topic: str, index: int) -> MemoryPartition:
        return self.partitions.setdefault((topic, index), MemoryPartition())

    def store(self) -> OffsetStore:
        return OffsetStore(self, self, OFFSETS_PARTITIONS)  # type: ignore[arg-type]

    def reloaded(self) -> OffsetStore:
        """A fresh store replayed from what was written (a broker restart)."""
        store = self.store()
        for index in range(OFFSETS_PARTITIONS):
            store.load_partition(index)
        return store


def coordinators(world: World) -> tuple[GroupCoordinator, ConsumerGroupCoordinator]:
    settings = GroupCoordinatorSettings(offsets_retention_ms=RETENTION_MS,
                                        classic=ClassicGroupSettings(initial_rebalance_delay_ms=0))
    store = world.store()
    classic = GroupCoordinator(store, settings)
    consumer = ConsumerGroupCoordinator(settings.consumer, world, classic, store)  # type: ignore[arg-type]
    classic.consumer = consumer
    return classic, consumer


def offset(value: int, committed_at: int) -> OffsetAndMetadata:
    return OffsetAndMetadata(value, -1, "", committed_at)


def subscription(*topics: str) -> bytes:
    """ConsumerProtocolSubscription v0 naming ``topics``."""
    out = struct.pack(">hi", 0, len(topics))
    for topic in topics:
        out += struct.pack(">h", len(topic)) + topic.encode()
    return out + struct.pack(">i", -1)


async def stable_classic_member(classic: GroupCoordinator, group_id: str, protocol_type: str = "consumer") -> str:
    """One member joined and synced: the group is Stable, subscribed to t."""
    joined = await classic.join(group_id, "", None, protocol_type, [("range", subscription("t"))], 10_000, 10_000,
                                "client", "host", False)
    synced = await classic.sync(group_id, joined.generation_id, joined.member_id, None, protocol_type, "range",
                                {joined.member_id: b"assignment"})
    assert synced.error == 0 and classic.groups[group_id].is_in(GroupState.STABLE)
    return joined.member_id


def test_empty_classic_group_expires_retention_after_it_became_empty_and_is_deleted() -> None:
    async def body() -> None:
        world = World()
        classic, consumer = coordinators(world)
        member = await stable_classic_member(classic, "g")
        classic.commit("g", {("t", 0): offset(5, 0), ("t", 1): offset(7, 0)})  # committed long ago
        classic.expire_offsets(10 * RETENTION_MS)
        assert set(classic.store.fetch("g")) == {("t", 0), ("t", 1)}  # Stable and subscribed to t: kept
        classic.leave("g", [(member, None)])
        group = classic.groups["g"]
        assert group.is_in(GroupState.EMPTY)
        empty_since = group.state_timestamp
        # counted from when it became Empty, not from the (old) commits
        classic.expire_offsets(empty_since + RETENTION_MS - 1)
        assert set(classic.store.fetch("g")) == {("t", 0), ("t", 1)} and "g" in classic.groups
        classic.expire_offsets(empty_since + RETENTION_MS)
        assert classic.store.fetch("g") == {}
        assert "g" not in classic.groups and group.is_in(GroupState.DEAD)
        reloaded = world.reloaded()
        assert "g" not in reloaded.committed or reloaded.committed["g"] == {}
        assert reloaded.loaded_groups["g"] is None  # the group metadata got its tombstone
        restarted = GroupCoordinator(reloaded, GroupCoordinatorSettings())
        restarted.classic.load()
        assert "g" not in restarted.groups  # not brought back by its offsets' tombstones
        classic.stop()
        consumer.stop()

    asyncio.run(body())


def test_stable_group_keeps_subscribed_offsets_and_loses_others_by_commit_time() -> None:
    async def body() -> None:
        world = World()
        classic, consumer = coordinators(world)
        await stable_classic_member(classic, "g")
        classic.commit("g", {("t", 0): offset(1, 0), ("u", 0): offset(2, 1_000), ("u", 1): offset(3, 5_000)})
        classic.expire_offsets(1_000 + RETENTION_MS - 1)
        assert set(classic.store.fetch("g")) == {("t", 0), ("u", 0), ("u", 1)}
        classic.expire_offsets(1_000 + RETENTION_MS)  # u is not subscribed: KIP-496
        assert set(classic.store.fetch("g")) == {("t", 0), ("u", 1)}
        classic.expire_offsets(100 * RETENTION_MS)
        assert set(classic.store.fetch("g")) == {("t", 0)} and classic.groups["g"].is_in(GroupState.STABLE)
        # a Stable group of another protocol type (Connect, say) never loses any offset
        await stable_classic_member(classic, "connect", protocol_type="connect")
        classic.commit("connect", {("u", 0): offset(4, 0)})
        classic.expire_offsets(100 * RETENTION_MS)
        assert set(classic.store.fetch("connect")) == {("u", 0)}
        assert set(world.reloaded().committed["g"]) == {("t", 0)}
        classic.stop()
        consumer.stop()

    asyncio.run(body())


def test_standalone_commits_expire_by_commit_time_and_pending_transactions_hold_them() -> None:
    async def body() -> None:
        world = World()
        classic, consumer = coordinators(world)
        classic.validate_commit("simple", -1, "", None, 9)  # a commit outside any group membership
        classic.commit("simple", {("t", 0): offset(10, 1_000), ("t", 1): offset(11, 5_000)})
        classic.store.commit_transactional("simple", 42, 0, {("u", 0): offset(12, 0)})
        classic.expire_offsets(1_000 + RETENTION_MS - 1)
        assert set(classic.store.fetch("simple")) == {("t", 0), ("t", 1)}
        classic.expire_offsets(1_000 + RETENTION_MS)
        assert set(classic.store.fetch("simple")) == {("t", 1)}
        classic.expire_offsets(5_000 + RETENTION_MS)
        # every offset expired, but a transaction still holds one: the group stays
        assert classic.store.fetch("simple") == {} and "simple" in classic.groups
        classic.store.complete_transaction(42, commit=True)
        assert set(classic.store.fetch("simple")) == {("u", 0)}
        classic.expire_offsets(5_000 + RETENTION_MS)  # committed at 0: expired already
        assert classic.store.fetch("simple") == {} and "simple" not in classic.groups
        reloaded = world.reloaded()
        assert reloaded.committed.get("simple", {}) == {} and reloaded.loaded_groups["simple"] is None
        classic.stop()
        consumer.stop()

    asyncio.run(body())


def test_empty_group_without_offsets_is_deleted_at_the_next_check() -> None:
    async def body() -> None:
        world = World()
        classic, consumer = coordinators(world)
        member = await stable_classic_member(classic, "g")
        classic.leave("g", [(member, None)])
        classic.expire_offsets(classic.groups["g"].state_timestamp)
        assert "g" not in classic.groups
        assert world.reloaded().loaded_groups["g"] is None
        classic.stop()
        consumer.stop()

    asyncio.run(body())


def test_consumer_group_loses_unsubscribed_offsets_then_is_deleted_when_empty() -> None:
    async def body() -> None:
        world = World()
        classic, consumer = coordinators(world)
        consumer.heartbeat(HeartbeatRequest("cg", "a", 0, rebalance_timeout_ms=30_000,
                                            subscribed_topic_names=["t"], owned={}))
        classic.validate_commit("cg", 2, "a", None, 9)
        classic.commit("cg", {("t", 0): offset(1, 0), ("u", 0): offset(2, 0), ("u", 1): offset(3, 30_000)})
        classic.expire_offsets(RETENTION_MS - 1)
        assert set(classic.store.fetch("cg")) == {("t", 0), ("u", 0), ("u", 1)}
        classic.expire_offsets(RETENTION_MS)
        assert set(classic.store.fetch("cg")) == {("t", 0), ("u", 1)}
        assert consumer.group("cg") is not None  # it has members and offsets
        group = consumer.groups["cg"]
        consumer.heartbeat(HeartbeatRequest("cg", "a", -1))  # the member leaves: Empty, subscribed to nothing
        assert group.state is ConsumerState.EMPTY
        classic.expire_offsets(30_000 + RETENTION_MS - 1)
        assert set(classic.store.fetch("cg")) == {("u", 1)} and consumer.group("cg") is not None
        classic.expire_offsets(30_000 + RETENTION_MS)
        assert classic.store.fetch("cg") == {}
        assert consumer.group("cg") is None and group.state is ConsumerState.DEAD
        reloaded = world.reloaded()
        assert reloaded.committed.get("cg", {}) == {}
        restored = ConsumerGroupCoordinator(ConsumerGroupSettings(), world, None)  # type: ignore[arg-type]
        restored.load(reloaded.consumer_group_records)
        assert "cg" not in restored.groups  # its records got tombstones
        assert CONSUMER_OFFSETS_TOPIC in world.topics
        classic.stop()
        consumer.stop()

    asyncio.run(body())
