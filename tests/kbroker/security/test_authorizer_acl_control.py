"""AclControlManager, the controller's CreateAcls/DeleteAcls decisions: Kafka's INVALID_REQUEST
messages for ACLs it cannot store, no duplicate records, and filters removing what they match."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from kbroker.protocol.acl import AclBinding, AclBindingFilter
from kbroker.protocol.errors import ErrorCode
from kbroker.replication.quorum.acl_control_manager import AclControlManager
from kbroker.replication.quorum.metadata_image import MetadataImage
from kbroker.replication.quorum.metadata_records import MetadataRecord

TOPIC, GROUP, CLUSTER = 2, 3, 4
LITERAL, PREFIXED, MATCH, ANY = 3, 4, 2, 1
READ, WRITE = 3, 4
DENY, ALLOW = 2, 3


class Controller:
    """Commits by applying to its image, as the QuorumController does once Raft took the records."""

    def __init__(self) -> None:
        self.image = MetadataImage()
        self.commits: list[Sequence[MetadataRecord]] = []

    def replay_and_commit(self, records: Sequence[MetadataRecord], now_ms: int) -> int:
        self.commits.append(records)
        for record in records:
            self.image.apply(self.image.offset + 1, record)
        return self.image.offset


def acl(**changes: object) -> AclBinding:
    fields = {"resource_type": TOPIC, "resource_name": "orders", "pattern_type": LITERAL,
              "principal": "User:alice", "host": "*", "operation": READ, "permission_type": ALLOW, **changes}
    return AclBinding(**fields)


@pytest.mark.parametrize(("bad", "message"), [
    (acl(resource_type=ANY), "Invalid resourceType ANY"),
    (acl(resource_type=0), "Invalid resourceType UNKNOWN"),
    (acl(pattern_type=MATCH), "Invalid patternType MATCH"),
    (acl(operation=ANY), "Invalid operation ANY"),
    (acl(permission_type=ANY), "Invalid permissionType ANY"),
    (acl(resource_name=""), "Resource name should not be empty"),
    (acl(resource_type=CLUSTER, resource_name="other"),
     "The only valid name for the CLUSTER resource is kafka-cluster"),
    (acl(principal="alice"), "Could not parse principal from `alice` (no colon is present separating the principal "
                             "type from the principal name)"),
])
def test_invalid_acls_are_refused_with_kafkas_message(bad: AclBinding, message: str) -> None:
    controller = Controller()
    [outcome] = AclControlManager(controller).create([bad], 0)
    assert outcome is not None and (outcome.code, outcome.message) == (ErrorCode.invalid_request, message)
    assert not controller.image.acls


def test_an_acl_is_stored_once() -> None:
    controller = Controller()
    manager = AclControlManager(controller)
    assert manager.create([acl(), acl()], 0) == [None, None]
    assert manager.create([acl()], 0) == [None]
    assert len(controller.image.acls) == 1


def test_delete_filters_remove_what_they_match() -> None:
    controller = Controller()
    manager = AclControlManager(controller)
    manager.create([acl(), acl(resource_name="ord", pattern_type=PREFIXED, operation=WRITE),
                    acl(resource_type=GROUP, resource_name="billing")], 0)
    match_orders = AclBindingFilter(TOPIC, "orders", MATCH, None, None, ANY, ANY)
    [matched] = manager.delete([match_orders], 0)
    assert sorted((a.resource_name, a.pattern_type) for a in matched) == [("ord", PREFIXED), ("orders", LITERAL)]
    assert [a.resource_type for a in controller.image.acls.values()] == [GROUP]
    every = AclBindingFilter(ANY, None, ANY, None, None, ANY, ANY)
    assert len(manager.delete([every, every], 0)[0]) == 1  # both filters see it; one record removes it
    assert not controller.image.acls
