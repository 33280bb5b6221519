"""StandardAuthorizer's rules, each on its own (Kafka's StandardAuthorizerData and
Authorizer.authorizeByResourceType are the spec), with ACLs replayed into a MetadataImage as a
broker replays them."""

from __future__ import annotations

import uuid

import pytest
from kbroker.protocol.acl import (
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)
from kbroker.replication.quorum.metadata_image import MetadataImage
from kbroker.replication.quorum.metadata_records import AccessControlEntryRecord, RemoveAccessControlEntryRecord

from kbroker.security.authorizer import StandardAuthorizer, configured_authorizer
from kbroker.security.principal import KafkaPrincipal

ALICE = KafkaPrincipal("User", "alice")
BOB = KafkaPrincipal("User", "bob")
HOST = "127.0.0.1"
Op, Rt, Pt = AclOperation, ResourceType, PatternType
ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY


class Acls:
    """A metadata image the test adds ACLs to, and an authorizer following it."""

    def __init__(self, allow_if_no_acl: bool = False, super_users: tuple[str, ...] = ()) -> None:
        self.image = MetadataImage()
        self.authorizer = StandardAuthorizer(lambda: self.image, super_users, allow_if_no_acl)

    def add(self, operation: int, permission: int = ALLOW, name: str = "orders", resource_type: int = Rt.TOPIC,
            pattern: int = Pt.LITERAL, principal: str = "User:alice", host: str = "*") -> uuid.UUID:
        acl_id = uuid.uuid4()
        self.image.apply(self.image.offset + 1, AccessControlEntryRecord(
            acl_id, resource_type, name, pattern, principal, host, operation, permission))
        return acl_id

    def remove(self, acl_id: uuid.UUID) -> None:
        self.image.apply(self.image.offset + 1, RemoveAccessControlEntryRecord(acl_id))

    def may(self, operation: int, name: str = "orders", resource_type: int = Rt.TOPIC,
            principal: KafkaPrincipal = ALICE, host: str = HOST) -> bool:
        return self.authorizer.authorize(principal, host, operation, resource_type, name)


def test_no_acl_on_the_resource_follows_allow_everyone_if_no_acl_found():
    assert not Acls().may(Op.READ)
    assert Acls(allow_if_no_acl=True).may(Op.READ)


def test_the_no_acl_rule_is_per_resource_and_any_acl_on_it_counts():
    acls = Acls(allow_if_no_acl=True)
    acls.add(Op.WRITE, principal="User:bob")
    assert not acls.may(Op.READ)  # an ACL exists on orders (for bob): alice is denied
    assert acls.may(Op.READ, name="payments")  # no ACL on payments at all


def test_super_users_may_do_anything_even_against_a_deny():
    acls = Acls(super_users=("User:alice",))
    acls.add(Op.ALL, DENY)
    assert acls.may(Op.WRITE)
    assert not acls.may(Op.WRITE, principal=BOB)


def test_deny_wins_over_allow():
    acls = Acls()
    acls.add(Op.READ)
    assert acls.may(Op.READ)
    acls.add(Op.READ, DENY)
    assert not acls.may(Op.READ)


def test_an_allow_of_read_write_delete_or_alter_implies_describe():
    for operation in (Op.READ, Op.WRITE, Op.DELETE, Op.ALTER, Op.DESCRIBE):
        acls = Acls()
        acls.add(operation)
        assert acls.may(Op.DESCRIBE), operation
    acls = Acls()
    acls.add(Op.CREATE)
    assert not acls.may(Op.DESCRIBE)


def test_an_allow_of_alter_configs_implies_describe_configs_only():
    acls = Acls()
    acls.add(Op.ALTER_CONFIGS)
    assert acls.may(Op.DESCRIBE_CONFIGS)
    assert not acls.may(Op.DESCRIBE)
    assert not acls.may(Op.ALTER)


def test_a_deny_does_not_imply():
    acls = Acls()
    acls.add(Op.ALL)
    acls.add(Op.READ, DENY)
    assert not acls.may(Op.READ)
    assert acls.may(Op.DESCRIBE)  # a DENY of READ does not deny DESCRIBE


def test_all_allows_and_denies_every_operation():
    acls = Acls()
    acls.add(Op.ALL)
    assert all(acls.may(op) for op in (Op.READ, Op.WRITE, Op.CREATE, Op.DELETE, Op.ALTER_CONFIGS))
    acls.add(Op.ALL, DENY, principal="User:bob")
    assert not acls.may(Op.DESCRIBE, principal=BOB)


def test_literal_patterns_match_the_name_exactly():
    acls = Acls()
    acls.add(Op.READ, name="orders")
    assert acls.may(Op.READ, name="orders")
    assert not acls.may(Op.READ, name="orders-eu")
    assert not acls.may(Op.READ, name="order")


def test_prefixed_patterns_match_every_name_starting_with_them():
    acls = Acls()
    acls.add(Op.WRITE, name="ord", pattern=Pt.PREFIXED)
    assert acls.may(Op.WRITE, name="ord")
    assert acls.may(Op.WRITE, name="orders-eu")
    assert not acls.may(Op.WRITE, name="or")
    assert not acls.may(Op.WRITE, name="payments")
    acls.add(Op.WRITE, DENY, name="orders-", pattern=Pt.PREFIXED)
    assert not acls.may(Op.WRITE, name="orders-eu")
    assert acls.may(Op.WRITE, name="orders")


def test_the_wildcard_resource_matches_every_name_of_its_type():
    acls = Acls()
    acls.add(Op.READ, name="*")
    assert acls.may(Op.READ, name="anything")
    assert not acls.may(Op.READ, name="anything", resource_type=Rt.GROUP)


def test_the_wildcard_principal_and_host():
    acls = Acls()
    acls.add(Op.READ, principal="User:*")
    assert acls.may(Op.READ, principal=BOB)
    acls = Acls()
    acls.add(Op.READ, host="10.0.0.1")
    assert not acls.may(Op.READ, host=HOST)
    assert acls.may(Op.READ, host="10.0.0.1")


def test_resource_types_are_apart():
    acls = Acls()
    acls.add(Op.READ, name="shared", resource_type=Rt.GROUP)
    assert acls.may(Op.READ, name="shared", resource_type=Rt.GROUP)
    assert not acls.may(Op.READ, name="shared", resource_type=Rt.TOPIC)
    acls.add(Op.WRITE, name="tx-1", resource_type=Rt.TRANSACTIONAL_ID)
    assert acls.may(Op.DESCRIBE, name="tx-1", resource_type=Rt.TRANSACTIONAL_ID)
    acls.add(Op.CREATE, name="kafka-cluster", resource_type=Rt.CLUSTER)
    assert acls.may(Op.CREATE, name="kafka-cluster", resource_type=Rt.CLUSTER)


def test_the_index_follows_removals_and_the_cached_decision_is_dropped():
    acls = Acls()
    acl_id = acls.add(Op.READ, name="ord", pattern=Pt.PREFIXED)
    assert acls.may(Op.READ)
    acls.remove(acl_id)
    assert not acls.may(Op.READ)
    deny = acls.add(Op.READ, DENY)
    acls.add(Op.READ, name="*")
    assert not acls.may(Op.READ)
    acls.remove(deny)
    assert acls.may(Op.READ)


def test_a_replaced_image_is_followed():
    acls = Acls()
    acls.add(Op.READ)
    assert acls.may(Op.READ)
    acls.image = MetadataImage()  # a snapshot loaded in its place
    assert not acls.may(Op.READ)


def test_authorize_any_needs_an_allow_no_deny_covers():
    acls = Acls()
    assert not acls.authorizer.authorize_any(ALICE, HOST, Op.WRITE, Rt.TOPIC)
    acls.add(Op.WRITE, name="orders")
    assert acls.authorizer.authorize_any(ALICE, HOST, Op.WRITE, Rt.TOPIC)
    deny = acls.add(Op.WRITE, DENY, name="ord", pattern=Pt.PREFIXED)
    assert not acls.authorizer.authorize_any(ALICE, HOST, Op.WRITE, Rt.TOPIC)
    acls.remove(deny)
    acls.add(Op.WRITE, DENY, name="*")
    assert not acls.authorizer.authorize_any(ALICE, HOST, Op.WRITE, Rt.TOPIC)


def test_authorize_any_with_no_acls_follows_allow_everyone_and_super_users():
    assert Acls(allow_if_no_acl=True).authorizer.authorize_any(ALICE, HOST, Op.WRITE, Rt.TOPIC)
    assert Acls(super_users=("User:alice",)).authorizer.authorize_any(ALICE, HOST, Op.WRITE, Rt.TOPIC)


def test_authorized_operations_lists_the_allowed_supported_operations():
    acls = Acls()
    acls.add(Op.READ)
    bits = acls.authorizer.authorized_operations(ALICE, HOST, Rt.TOPIC, "orders")
    assert bits == (1 << Op.READ) | (1 << Op.DESCRIBE)


def test_describe_filters():
    acls = Acls()
    acls.add(Op.READ, name="orders")
    acls.add(Op.WRITE, name="ord", pattern=Pt.PREFIXED)
    acls.add(Op.READ, name="*")
    acls.add(Op.READ, name="payments")

    def names(f: AclBindingFilter) -> set[tuple[str, int]]:
        return {(a.resource_name, a.pattern_type) for a in acls.authorizer.acls(f)}

    every = AclBindingFilter(Rt.ANY, None, Pt.ANY, None, None, Op.ANY, AclPermissionType.ANY)
    assert len(names(every)) == 4
    match = AclBindingFilter(Rt.TOPIC, "orders", Pt.MATCH, None, None, Op.ANY, AclPermissionType.ANY)
    assert names(match) == {("orders", Pt.LITERAL), ("ord", Pt.PREFIXED), ("*", Pt.LITERAL)}
    literal = AclBindingFilter(Rt.TOPIC, "orders", Pt.LITERAL, None, None, Op.ANY, AclPermissionType.ANY)
    assert names(literal) == {("orders", Pt.LITERAL)}
    writes = AclBindingFilter(Rt.ANY, None, Pt.ANY, "User:alice", None, Op.WRITE, AclPermissionType.ANY)
    assert names(writes) == {("ord", Pt.PREFIXED)}


def test_the_class_names_kafka_configs_use_turn_it_on():
    image = MetadataImage()
    assert configured_authorizer("", "", "false", lambda: image) is None
    for name in ("org.apache.kafka.metadata.authorizer.StandardAuthorizer", "kafka.security.authorizer.AclAuthorizer"):
        authorizer = configured_authorizer(name, "User:admin; User:ANONYMOUS", "true", lambda: image)
        assert authorizer is not None
        assert authorizer.super_users == {"User:admin", "User:ANONYMOUS"}
        assert authorizer.allow_if_no_acl
    with pytest.raises(RuntimeError, match="cannot be found"):
        configured_authorizer("com.example.Nope", "", "false", lambda: image)
