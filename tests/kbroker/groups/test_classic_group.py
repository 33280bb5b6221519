"""LeaveGroup entries naming static members (KIP-345), resolved as Kafka's group coordinator does."""

from __future__ import annotations

from kbroker.protocol.errors import ErrorCode

from kbroker.groups.classic_group import leaving_member

STATIC = {"instance-a": "member-1"}


def test_a_dynamic_member_leaves_by_its_member_id() -> None:
    assert leaving_member(STATIC, "member-7", None) == ("member-7", ErrorCode.none)


def test_a_static_member_leaves_by_its_instance_id_with_or_without_its_member_id() -> None:
    assert leaving_member(STATIC, "", "instance-a") == ("member-1", ErrorCode.none)
    assert leaving_member(STATIC, "member-1", "instance-a") == ("member-1", ErrorCode.none)


def test_an_old_member_id_for_an_instance_id_is_fenced_and_an_unknown_instance_id_is_unknown() -> None:
    assert leaving_member(STATIC, "member-0", "instance-a")[1] == ErrorCode.fenced_instance_id
    assert ErrorCode.fenced_instance_id.value == 82
    assert leaving_member(STATIC, "member-1", "instance-b")[1] == ErrorCode.unknown_member_id
    assert ErrorCode.unknown_member_id.value == 25
