"""Consumer groups: subscribe/consume/commit/resume (classic and KIP-848), assignments of two
members, the group admin API (list, describe, offsets, OffsetDelete, DeleteGroups) and the
coordinator's error answers to commits from strangers.

Outcomes hold only what is deterministic on both brokers: records as (partition, offset,
value), assignments as sizes and their union, never member ids, client hosts or which member
got which partitions. ``drive`` polls the members round-robin with a bounded deadline.
"""

from __future__ import annotations

import datetime
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from kio.schema.consumer_group_describe.v1 import request as describe
from kio.schema.consumer_group_heartbeat.v1 import request as heartbeat
from kio.schema.find_coordinator.v4 import request as find_coordinator
from kio.static.primitive import i8, i32, i32Timedelta

from compat.clients.base import GroupMember, Rec
from compat.harness import wait_until
from compat.scenarios import Run, scenario
from compat.scenarios.protocol import RawConnection

G = {"group"}
ADMIN = {"group", "group.admin"}
DRIVE_TIMEOUT_S = 30.0


class GroupTimeout(AssertionError):
    """The members did not reach the wanted state within the deadline."""


def group_id(run: Run, suffix: str = "") -> str:
    """A group id unique to (scenario, client), identical on both targets."""
    return "g-" + run.name(suffix)


def fill(run: Run, topic: str, partitions: int, per_partition: int, first: int = 0) -> None:
    """``per_partition`` records on each partition, values p<partition>-<i> (i from ``first``)."""
    run.harness.put(topic, [Rec(f"p{p}-{i}".encode(), f"k{i}".encode(), (), p, None)
                            for p in range(partitions) for i in range(first, first + per_partition)])  # fmt: skip


def short(records: list[Any]) -> list[list[Any]]:
    """Records as sorted [partition, offset, value] (the order across partitions is not defined)."""
    return sorted([r["partition"], r["offset"], r["value"]] for r in records)


def drive(members: list[GroupMember], partitions: int, until: dict[int, int] | None,
          timeout_s: float = DRIVE_TIMEOUT_S) -> list[Any]:  # fmt: skip
    """Poll the members (each in its own thread when their client allows it, else in turn)
    until their assignments are non-empty, disjoint and cover
    all ``partitions`` and (with ``until``) every member's position on each of its partitions
    reached ``until[p]``. Returns every record polled."""
    got: list[Any] = []
    deadline = time.monotonic() + timeout_s
    threads = len(members) > 1 and all(m.POLL_IN_THREADS for m in members)
    pool = ThreadPoolExecutor(len(members), thread_name_prefix="member") if threads else None
    try:
        while True:
            if pool is not None:  # each member polls on its own, as separate applications would
                for batch in pool.map(lambda m: m.poll(100), members):
                    got.extend(batch)
            else:
                for m in members:
                    got.extend(m.poll(100))
            owned = [m.assignment() for m in members]
            flat = [p for ps in owned for p in ps]
            if all(owned) and sorted(flat) == list(range(partitions)):
                if until is None or all(pos >= until[p] for m in members for p, pos in m.positions().items()):
                    return got
            if time.monotonic() >= deadline:
                raise GroupTimeout(f"members did not settle: assignments {owned}")
    finally:
        if pool is not None:
            pool.shutdown()


def consume_commit(run: Run, topic: str, group: str, partitions: int, until: dict[int, int],
                   commit: dict[int, tuple[int, str]] | None, protocol: str = "classic") -> dict[str, Any]:  # fmt: skip
    """One member consumes to ``until``, commits ``commit`` (if any), reads it back and leaves."""
    member = run.client.group_member(topic, group, protocol)
    try:
        records = drive([member], partitions, until)
        out: dict[str, Any] = {"assignment": member.assignment(), "records": short(records)}
        if commit is not None:
            out["commit"] = member.commit(commit)
            out["committed"] = member.committed(list(range(partitions)))
        return out
    finally:
        member.close()


def resume(run: Run, protocol: str) -> dict[str, Any]:
    """Member A reads all of a 3-partition topic and commits offset 3 (metadata m<p>) on each
    partition; member B of the same group, started after more records arrived, reads exactly
    from the commit to the end: no gap, no duplicate."""
    t = run.topic(partitions=3)
    group = group_id(run)
    fill(run, t, 3, 5)
    first = consume_commit(run, t, group, 3, {p: 5 for p in range(3)},
                           {p: (3, f"m{p}") for p in range(3)}, protocol)  # fmt: skip
    fill(run, t, 3, 2, first=5)
    second = consume_commit(run, t, group, 3, {p: 7 for p in range(3)}, None, protocol)
    return {"first": first, "second": second}


@scenario("groups/commit-resume", needs=G)
def commit_resume(run: Run) -> Any:
    """Classic group: consume, commit with metadata (round-trips), a new member resumes exactly
    after the commit."""
    return resume(run, "classic")


@scenario("groups/consumer-protocol-resume", needs=G | {"group.consumer_protocol"})
def consumer_protocol_resume(run: Run) -> Any:
    """KIP-848 (group.protocol=consumer): the same consume/commit/resume, and the group
    described afterwards as a consumer-type group."""
    out = resume(run, "consumer")
    if run.supports("group.admin"):
        out["describe"] = run.client.describe_group(group_id(run))
    return out


def two_members(run: Run, protocol: str) -> Any:
    """Two members of one group over a 4-partition topic: assignment sizes and union once
    settled, and the group as described while both are in it."""
    t = run.topic(partitions=4)
    group = group_id(run)
    fill(run, t, 4, 2)
    members = [run.client.group_member(t, group, protocol) for _ in range(2)]
    try:
        drive(members, 4, None)
        owned = [m.assignment() for m in members]
        out: dict[str, Any] = {"sizes": sorted(len(ps) for ps in owned),
                               "union": sorted(p for ps in owned for p in ps)}  # fmt: skip
        if run.supports("group.admin"):
            out["describe"] = run.client.describe_group(group)
        return out
    finally:
        for m in members:
            m.close()


@scenario("groups/two-members", needs=G)
def two_members_classic(run: Run) -> Any:
    """Two classic members over 4 partitions: 2 each, disjoint, complete; described Stable with 2 members."""
    return two_members(run, "classic")


@scenario("groups/two-members-consumer-protocol", needs=G | {"group.consumer_protocol"})
def two_members_consumer(run: Run) -> Any:
    """Two KIP-848 members over 4 partitions: the server-side assignor splits them 2/2."""
    return two_members(run, "consumer")


@scenario("groups/admin-lifecycle", needs=ADMIN)
def admin_lifecycle(run: Run) -> Any:
    """After a member committed and left: list (state Empty), describe, group offsets, alter
    offsets, DeleteGroups, then describe/offsets of the deleted group."""
    t = run.topic(partitions=2)
    group = group_id(run)
    fill(run, t, 2, 3)
    consume_commit(run, t, group, 2, {0: 3, 1: 3}, {0: (3, "a"), 1: (2, "b")})
    c = run.client
    out: dict[str, Any] = {
        "listed": [g for g in c.list_groups() if g[0] == group],
        "describe": c.describe_group(group),
        "offsets": c.group_offsets(group, t, [0, 1]),
        "alter": c.alter_group_offsets(group, t, {0: 1}),
        "offsets-after-alter": c.group_offsets(group, t, [0, 1]),
        "delete": c.delete_group(group),
    }
    out["describe-deleted"] = c.describe_group(group)
    out["offsets-deleted"] = c.group_offsets(group, t, [0, 1])
    out["delete-again"] = c.delete_group(group)
    return out


@scenario("groups/admin-active-group", needs=ADMIN)
def admin_active_group(run: Run) -> Any:
    """While a member is subscribed: DeleteGroups answers NON_EMPTY_GROUP, OffsetDelete on the
    subscribed topic GROUP_SUBSCRIBED_TO_TOPIC; after it left, OffsetDelete removes the offset."""
    t = run.topic(partitions=1)
    group = group_id(run)
    fill(run, t, 1, 2)
    c = run.client
    member = c.group_member(t, group)
    out: dict[str, Any] = {}
    try:
        drive([member], 1, {0: 2})
        out["commit"] = member.commit({0: (2, "x")})
        out["listed"] = [g for g in c.list_groups() if g[0] == group]
        if run.supports("group.list_state"):
            out["listed-stable"] = [g for g in c.list_groups("Stable") if g[0] == group]
            out["listed-empty"] = [g for g in c.list_groups("Empty") if g[0] == group]
        out["delete"] = c.delete_group(group)
        if run.supports("group.delete_offsets"):
            out["delete-offsets"] = c.delete_group_offsets(group, t, [0])
    finally:
        member.close()
    if run.supports("group.delete_offsets"):
        out["delete-offsets-after-leave"] = c.delete_group_offsets(group, t, [0])
    out["offsets"] = c.group_offsets(group, t, [0])
    return out


@scenario("groups/commit-errors", needs=ADMIN | {"group.raw"})
def commit_errors(run: Run) -> Any:
    """OffsetCommit with a made-up generation/member: to a group that does not exist, to an
    empty group (after its member left), to a group with an active member, and to a KIP-848
    consumer group (active, then empty); OffsetFetch of an unknown group answers no offset
    and no error."""
    t = run.topic(partitions=1)
    group, ghost = group_id(run), group_id(run, "ghost")
    fill(run, t, 1, 2)
    c = run.client
    out: dict[str, Any] = {
        "unknown-group-gen5": c.raw_offset_commit(ghost, 5, "stranger", t, 1),
        "unknown-group-admin": c.raw_offset_commit(group_id(run, "admin"), -1, "", t, 1),
        "fetch-unknown-group": c.group_offsets(group_id(run, "nobody"), t, [0]),
    }
    member = c.group_member(t, group)
    try:
        drive([member], 1, {0: 2})
        out["active-stranger"] = c.raw_offset_commit(group, 1, "stranger", t, 1)
        out["active-admin"] = c.raw_offset_commit(group, -1, "", t, 1)
    finally:
        member.close()
    out["empty-stranger"] = c.raw_offset_commit(group, 1, "stranger", t, 1)
    out["empty-admin"] = c.raw_offset_commit(group, -1, "", t, 1)
    out["offsets"] = c.group_offsets(group, t, [0])
    # A KIP-848 consumer group (its member is the harness's librdkafka consumer).
    modern = group_id(run, "consumer")
    member = run.harness.group_member(t, modern, "consumer")
    try:
        drive([member], 1, {0: 2})
        out["consumer-group-stranger"] = c.raw_offset_commit(modern, 1, "stranger", t, 1)
        out["consumer-group-admin"] = c.raw_offset_commit(modern, -1, "", t, 1)
    finally:
        member.close()
    out["consumer-group-empty-admin"] = c.raw_offset_commit(modern, -1, "", t, 1)
    out["consumer-group-offsets"] = c.group_offsets(modern, t, [0])
    return out


@scenario("groups/consumer-groups-tool", needs={"group.cli"})
def consumer_groups_tool(run: Run) -> Any:
    """kafka-consumer-groups on a group the harness (confluent) committed to and left: --list
    (with --state), --describe (offsets, lag; --state; --members), --reset-offsets (dry run,
    --to-offset, --to-earliest, --shift-by, --to-latest), --delete-offsets, --delete."""
    t = run.topic(partitions=2)
    group = group_id(run)
    fill(run, t, 2, 4)
    member = run.harness.group_member(t, group)
    try:
        drive([member], 2, {0: 4, 1: 4})
        member.commit({0: (3, "a"), 1: (1, "b")})
    finally:
        member.close()
    cli: Any = run.client
    g = ("--group", group)
    return {
        "list": cli.consumer_groups("--list", only=group),
        "list-state": cli.consumer_groups("--list", "--state", only=group),
        "describe": cli.consumer_groups("--describe", *g),
        "describe-state": cli.consumer_groups("--describe", *g, "--state"),
        "describe-members": cli.consumer_groups("--describe", *g, "--members"),
        "reset-dry-run": cli.consumer_groups("--reset-offsets", *g, "--topic", t, "--to-earliest", "--dry-run"),
        "reset-to-offset": cli.consumer_groups("--reset-offsets", *g, "--topic", f"{t}:1", "--to-offset", "2",
                                               "--execute"),
        "reset-shift": cli.consumer_groups("--reset-offsets", *g, "--topic", t, "--shift-by", "-1", "--execute"),
        "reset-latest": cli.consumer_groups("--reset-offsets", *g, "--topic", f"{t}:0", "--to-latest", "--execute"),
        "describe-after-reset": cli.consumer_groups("--describe", *g),
        "delete-offsets": cli.consumer_groups("--delete-offsets", *g, "--topic", f"{t}:0"),
        "delete": cli.consumer_groups("--delete", *g),
        "describe-deleted": cli.consumer_groups("--describe", *g),
    }


def assign_commit(run: Run, protocol: str) -> dict[str, Any]:
    """A consumer with a group id that assigns its two partitions reads to the end and commits;
    a second such consumer of the group resumes exactly after the commit."""
    t = run.topic(partitions=2)
    group = group_id(run)
    fill(run, t, 2, 4)
    # The consumer reads its start from the group's coordinator: on a fresh broker that waits
    # for __consumer_offsets, which librdkafka retries slowly, so the harness waits for it first.
    ready, got = wait_until(lambda: run.harness.group_offsets(group, t, [0]), lambda o: "error" not in o,
                            DRIVE_TIMEOUT_S)
    if not ready:
        raise GroupTimeout(f"the coordinator of {group} kept answering {got}")
    first = run.client.assigned_member(t, group, protocol, [0, 1])
    try:
        out: dict[str, Any] = {"records": short(drive([first], 2, {0: 4, 1: 4}))}
        out["commit"] = first.commit({0: (3, "a"), 1: (1, "b")})
        out["committed"] = first.committed([0, 1])
    finally:
        first.close()
    fill(run, t, 2, 1, first=4)
    second = run.client.assigned_member(t, group, protocol, [0, 1])
    try:
        out["resumed"] = short(drive([second], 2, {0: 5, 1: 5}))
        out["committed-second"] = second.committed([0, 1])
    finally:
        second.close()
    if run.supports("group.admin"):
        out["describe"] = run.client.describe_group(group)
    return out


@scenario("groups/assign-commit", needs=G | {"group.assign"})
def assign_commit_classic(run: Run) -> Any:
    """assign() (no subscription) and commit with the classic protocol: the commit creates a
    simple group (Empty, no members) and a new consumer resumes from it."""
    return assign_commit(run, "classic")


@scenario("groups/assign-commit-consumer-protocol", needs=G | {"group.assign", "group.consumer_protocol"})
def assign_commit_consumer(run: Run) -> Any:
    """assign() and commit with group.protocol=consumer: librdkafka sends OffsetCommit v9 with its
    own member id and epoch -1; Kafka creates a simple group and accepts it (kbroker answered
    GROUP_ID_NOT_FOUND, so such consumers never kept a commit)."""
    return assign_commit(run, "consumer")


class RawGroupClient:
    """KIP-848 requests built with kio over one socket (no client library shows member epochs):
    FindCoordinator until the group's coordinator is ready, ConsumerGroupHeartbeat v1 and
    ConsumerGroupDescribe v1, answers reduced to what both brokers share."""

    def __init__(self, run: Run, group: str, topic: str) -> None:
        self.group, self.topic = group, topic
        self.conn = RawConnection(run.target.bootstrap)

    def find_coordinator(self) -> None:
        """A client finds the coordinator first (which makes __consumer_offsets on a fresh broker)."""
        found, answer = wait_until(lambda: self.conn.request(10, 4, find_coordinator.FindCoordinatorRequest(
            key_type=i8(0), coordinator_keys=(self.group,))).coordinators[0].error_code.value,
                                   lambda code: code == 0, DRIVE_TIMEOUT_S)  # fmt: skip
        if not found:
            raise GroupTimeout(f"FindCoordinator for {self.group} kept answering error {answer}")

    def beat(self, member: str, epoch: int, join: bool = False) -> list[Any]:
        """[error, member epoch, assigned partitions or None]; ``join`` subscribes to the topic
        (owning nothing), otherwise nothing changed since the last heartbeat."""
        fields: dict[str, Any] = {"topic_partitions": None}
        if join:
            fields = {"rebalance_timeout": i32Timedelta.parse(datetime.timedelta(seconds=30)),
                      "subscribed_topic_names": (self.topic,), "topic_partitions": ()}
        r = self.conn.request(68, 1, heartbeat.ConsumerGroupHeartbeatRequest(
            group_id=self.group, member_id=member, member_epoch=i32(epoch), **fields))
        parts = None if r.assignment is None else sorted(p for tp in r.assignment.topic_partitions
                                                         for p in tp.partitions)
        return [r.error_code.name.upper(), r.member_epoch, parts]

    def describe(self) -> list[Any]:
        g = self.conn.request(69, 1, describe.ConsumerGroupDescribeRequest(
            group_ids=(self.group,), include_authorized_operations=False)).groups[0]
        return [g.group_state, g.group_epoch, g.assignment_epoch, sorted(m.member_epoch for m in g.members)]

    def close(self) -> None:
        self.conn.close()


@scenario("groups/consumer-protocol-first-epochs", needs={"produce"}, clients=("confluent",))
def consumer_protocol_first_epochs(run: Run) -> Any:
    """Raw ConsumerGroupHeartbeat v1 for a new group, one member subscribing to a 2-partition
    topic: the member epoch of the first answer (Kafka 4.3 starts a group at epoch 1, so the join
    bumps it to 2), the next heartbeat, the epochs ConsumerGroupDescribe reports, and the group
    epoch once the member left (the assignment epoch stays: an empty group computes no target)."""
    t = run.topic(partitions=2)
    member = "m-" + run.name()
    raw = RawGroupClient(run, group_id(run), t)
    try:
        raw.find_coordinator()
        first = raw.beat(member, 0, join=True)
        out: dict[str, Any] = {"join": first, "next": raw.beat(member, first[1]), "describe": raw.describe()}
        out["leave"] = raw.beat(member, -1)
        out["describe-after-leave"] = raw.describe()
        return out
    finally:
        raw.close()

