"""The KIP-848 server-side assignors: complete, disjoint, balanced, sticky (uniform), ranges (range)."""

from __future__ import annotations

import uuid

import pytest

from kbroker.groups.assignors import (
    MemberSubscription,
    assign,
    canonical_name,
    range_assign,
    uniform_assign,
)

T1, T2, T3 = (uuid.UUID(int=i) for i in (1, 2, 3))


def flatten(result: dict[str, dict[uuid.UUID, set[int]]]) -> dict[tuple[uuid.UUID, int], str]:
    owners: dict[tuple[uuid.UUID, int], str] = {}
    for member, assignment in result.items():
        for topic, partitions in assignment.items():
            for p in partitions:
                assert (topic, p) not in owners, "a partition assigned twice"
                owners[(topic, p)] = member
    return owners


def sizes(result: dict[str, dict[uuid.UUID, set[int]]]) -> dict[str, int]:
    return {m: sum(len(ps) for ps in a.values()) for m, a in result.items()}


@pytest.mark.parametrize("assignor", ["uniform", "range"])
def test_three_members_six_partitions_complete_and_disjoint(assignor: str) -> None:
    members = {m: MemberSubscription({T1}) for m in ("a", "b", "c")}
    result = assign(assignor, members, {T1: 6})
    owners = flatten(result)
    assert set(owners) == {(T1, p) for p in range(6)}
    assert sizes(result) == {"a": 2, "b": 2, "c": 2}


def test_range_gives_contiguous_ranges_extra_to_the_first_members() -> None:
    members = {m: MemberSubscription({T1, T2}) for m in ("m2", "m1", "m3")}
    result = range_assign(members, {T1: 7, T2: 3})
    assert result["m1"] == {T1: {0, 1, 2}, T2: {0}}
    assert result["m2"] == {T1: {3, 4}, T2: {1}}
    assert result["m3"] == {T1: {5, 6}, T2: {2}}


def test_uniform_is_sticky_when_a_member_joins() -> None:
    before = uniform_assign({m: MemberSubscription({T1}) for m in ("a", "b")}, {T1: 6})
    assert sizes(before) == {"a": 3, "b": 3}
    members = {m: MemberSubscription({T1}, before.get(m, {})) for m in ("a", "b", "c")}
    after = uniform_assign(members, {T1: 6})
    assert sizes(after) == {"a": 2, "b": 2, "c": 2}
    # a and b only give partitions away: nothing moves between them
    assert after["a"][T1] <= before["a"][T1] and after["b"][T1] <= before["b"][T1]


def test_uniform_reassigns_only_the_leaving_members_partitions() -> None:
    before = uniform_assign({m: MemberSubscription({T1}) for m in ("a", "b", "c")}, {T1: 6})
    members = {m: MemberSubscription({T1}, before[m]) for m in ("a", "b")}
    after = uniform_assign(members, {T1: 6})
    assert sizes(after) == {"a": 3, "b": 3}
    assert before["a"][T1] <= after["a"][T1] and before["b"][T1] <= after["b"][T1]


def test_uniform_heterogeneous_subscriptions_are_balanced_where_possible() -> None:
    members = {"a": MemberSubscription({T1}), "b": MemberSubscription({T1, T2}), "c": MemberSubscription({T2, T3})}
    result = uniform_assign(members, {T1: 4, T2: 4, T3: 4})
    owners = flatten(result)
    assert len(owners) == 12
    for (topic, _p), member in owners.items():
        assert topic in members[member].topics
    assert max(sizes(result).values()) - min(sizes(result).values()) <= 1


def test_unsubscribed_topics_and_vanished_partitions_are_dropped() -> None:
    members = {"a": MemberSubscription({T1}, {T1: {0, 1, 5}, T2: {0}})}
    result = uniform_assign(members, {T1: 3, T2: 2})
    assert result == {"a": {T1: {0, 1, 2}}}


def test_members_without_subscriptions_get_nothing() -> None:
    result = uniform_assign({"a": MemberSubscription(set()), "b": MemberSubscription({T1})}, {T1: 2})
    assert result == {"a": {}, "b": {T1: {0, 1}}}


def test_kafka_class_names_are_aliases() -> None:
    assert canonical_name("org.apache.kafka.coordinator.group.assignor.UniformAssignor") == "uniform"
    assert canonical_name(" range") == "range"
    assert canonical_name("sticky") is None
