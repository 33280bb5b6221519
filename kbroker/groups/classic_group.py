"""ClassicGroup: one classic-protocol group's members and state, as Kafka's ClassicGroup holds it.

Only data and the rules that read it (protocol selection, who has rejoined, subscribed topics);
the ClassicGroupCoordinator drives the state machine, timers and persistence.
"""

from __future__ import annotations

import asyncio
import enum
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from kbroker.protocol.errors import ErrorCode
from kbroker.protocol.internal_records import GroupMemberValue, GroupMetadataValue, Reader

CONSUMER_PROTOCOL_TYPE = "consumer"


class GroupState(enum.Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


@dataclass(slots=True)
class JoinResult:
    """What a JoinGroup request is answered with (error NONE unless ``error`` is set)."""

    error: ErrorCode = ErrorCode.none
    member_id: str = ""
    generation_id: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader: str = ""
    skip_assignment: bool = False
    members: list[tuple[str, str | None, bytes]] = field(default_factory=list)


@dataclass(slots=True)
class SyncResult:
    error: ErrorCode = ErrorCode.none
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignment: bytes = b""


@dataclass(slots=True, eq=False)
class Member:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]
    assignment: bytes = b""
    join_future: asyncio.Future[JoinResult] | None = None
    sync_future: asyncio.Future[SyncResult] | None = None
    session_timer: asyncio.TimerHandle | None = None
    is_new: bool = True

    def metadata(self, protocol: str | None) -> bytes:
        for name, data in self.protocols:
            if name == protocol:
                return data
        return b""

    @property
    def awaiting_join(self) -> bool:
        return self.join_future is not None and not self.join_future.done()

    @property
    def awaiting_sync(self) -> bool:
        return self.sync_future is not None and not self.sync_future.done()

    def matches(self, protocols: list[tuple[str, bytes]]) -> bool:
        return self.protocols == protocols

    def cancel_session(self) -> None:
        if self.session_timer is not None:
            self.session_timer.cancel()
            self.session_timer = None


def resolve(future: asyncio.Future[Any] | None, result: object) -> None:
    """Answer a parked JoinGroup/SyncGroup unless it is already answered or its request is gone."""
    if future is not None and not future.done():
        future.set_result(result)


class ClassicGroup:
    """A classic group: ``members`` by id, static members by instance id, the current generation."""

    def __init__(self, group_id: str, now_ms: int) -> None:
        self.group_id = group_id
        self.state = GroupState.EMPTY
        self.state_timestamp = now_ms
        self.generation_id = 0
        self.protocol_type: str | None = None
        self.protocol_name: str | None = None
        self.leader_id: str | None = None
        self.members: dict[str, Member] = {}
        self.static_members: dict[str, str] = {}
        self.pending_members: dict[str, asyncio.TimerHandle] = {}  # MEMBER_ID_REQUIRED, not joined yet
        self.pending_sync: set[str] = set()
        self.join_timer: asyncio.TimerHandle | None = None
        self.sync_timer: asyncio.TimerHandle | None = None
        self.initial_delay_left_ms = 0
        self.in_initial_delay = False

    def transition(self, state: GroupState, now_ms: int) -> None:
        self.state = state
        self.state_timestamp = now_ms

    def is_in(self, *states: GroupState) -> bool:
        return self.state in states

    def close(self, error: ErrorCode) -> None:
        """Stop the group's timers and answer its parked JoinGroup/SyncGroup requests with
        ``error``: the group is no longer coordinated here, or it became a consumer group."""
        for timer in (self.join_timer, self.sync_timer, *self.pending_members.values()):
            if timer is not None:
                timer.cancel()
        for member in self.members.values():
            member.cancel_session()
            resolve(member.join_future, JoinResult(error, member.member_id))
            resolve(member.sync_future, SyncResult(error))

    def supported_protocols(self) -> set[str]:
        """Protocol names every member supports."""
        names: set[str] | None = None
        for member in self.members.values():
            mine = {name for name, _ in member.protocols}
            names = mine if names is None else names & mine
        return names or set()

    def supports(self, protocol_type: str, protocols: list[tuple[str, bytes]]) -> bool:
        if not self.members:
            return bool(protocol_type) and bool(protocols)
        return protocol_type == self.protocol_type and bool(
            {name for name, _ in protocols} & self.supported_protocols())

    def select_protocol(self) -> str:
        """Each member votes for its most preferred protocol all members support; most votes win."""
        candidates = self.supported_protocols()
        votes: Counter[str] = Counter()
        for member in self.members.values():
            votes[next(name for name, _ in member.protocols if name in candidates)] += 1
        return votes.most_common(1)[0][0]

    def all_members_joined(self) -> bool:
        return not self.pending_members and all(m.awaiting_join for m in self.members.values())

    def max_rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def subscribed_topics(self) -> set[str] | None:
        """Topics the members' ConsumerProtocolSubscription names; None when not knowable."""
        if self.protocol_type != CONSUMER_PROTOCOL_TYPE or self.protocol_name is None:
            return None
        topics: set[str] = set()
        for member in self.members.values():
            # The start of a ConsumerProtocolSubscription, the same in every version: version, topics.
            r = Reader(member.metadata(self.protocol_name))
            try:
                r.int16()
                topics.update(r.string() or "" for _ in range(r.int32()))
            except ValueError:
                return None
        return topics

    def to_record(self) -> GroupMetadataValue:
        return GroupMetadataValue(
            self.protocol_type or "", self.generation_id, self.protocol_name, self.leader_id, self.state_timestamp,
            [GroupMemberValue(m.member_id, m.group_instance_id, m.client_id, m.client_host, m.rebalance_timeout_ms,
                              m.session_timeout_ms, m.metadata(self.protocol_name), m.assignment)
             for m in self.members.values()],
        )


def leaving_member(static_members: dict[str, str], member_id: str, instance_id: str | None) -> tuple[str, ErrorCode]:
    """The member one LeaveGroup entry names, and the entry's error (KIP-345): a static member is
    named by its instance id, and a member id given with it must be the one the instance id has
    now (else FENCED_INSTANCE_ID); an instance id the group does not know is UNKNOWN_MEMBER_ID."""
    if instance_id is None:
        return member_id, ErrorCode.none
    known = static_members.get(instance_id)
    if known is None:
        return member_id, ErrorCode.unknown_member_id
    if member_id and known != member_id:
        return member_id, ErrorCode.fenced_instance_id
    return known, ErrorCode.none
