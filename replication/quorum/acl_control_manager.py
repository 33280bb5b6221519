"""AclControlManager: the controller's CreateAcls and DeleteAcls decisions, as ACL records.

Kafka's AclControlManager rules: a new ACL must name a concrete resource type (not UNKNOWN or
ANY), a LITERAL or PREFIXED pattern, a concrete operation and ALLOW or DENY, a non-empty
resource name (``kafka-cluster`` for the CLUSTER resource, as the broker's AclApis requires) and
a ``Type:name`` principal; otherwise INVALID_REQUEST with Kafka's message. An ACL already stored
is not stored twice (its creation still succeeds). A delete filter removes every stored ACL it
matches (the matching rules of Kafka's AclBindingFilter) and answers them. Records are committed
through ``QuorumController.replay_and_commit``; the image then holds the ACLs by id.

Codes are Kafka's wire codes (kbroker/security/acl.py names them for the broker side; this
engine package stays free of it).
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from kbroker.protocol.errors import ErrorCode, KafkaError

from .metadata_image import MetadataImage
from .metadata_records import AccessControlEntryRecord, MetadataRecord, RemoveAccessControlEntryRecord

_RESOURCE_TYPES = {0: "UNKNOWN", 1: "ANY", 2: "TOPIC", 3: "GROUP", 4: "CLUSTER", 5: "TRANSACTIONAL_ID",
                   6: "DELEGATION_TOKEN", 7: "USER"}
_PATTERN_TYPES = {0: "UNKNOWN", 1: "ANY", 2: "MATCH", 3: "LITERAL", 4: "PREFIXED"}
_OPERATIONS = {0: "UNKNOWN", 1: "ANY", 2: "ALL", 3: "READ", 4: "WRITE", 5: "CREATE", 6: "DELETE", 7: "ALTER",
               8: "DESCRIBE", 9: "CLUSTER_ACTION", 10: "DESCRIBE_CONFIGS", 11: "ALTER_CONFIGS",
               12: "IDEMPOTENT_WRITE", 13: "CREATE_TOKENS", 14: "DESCRIBE_TOKENS", 15: "TWO_PHASE_COMMIT"}
_PERMISSIONS = {0: "UNKNOWN", 1: "ANY", 2: "DENY", 3: "ALLOW"}
_ANY, _MATCH, _LITERAL, _PREFIXED = 1, 2, 3, 4
_CLUSTER, _CLUSTER_NAME, _WILDCARD = 4, "kafka-cluster", "*"


@dataclass(frozen=True, slots=True)
class AclSpec:
    """An ACL as CreateAcls carries it."""

    resource_type: int
    resource_name: str
    pattern_type: int
    principal: str
    host: str
    operation: int
    permission_type: int


@dataclass(frozen=True, slots=True)
class AclFilter:
    """A DeleteAcls filter: None or ANY (1) in a field matches every value; pattern type MATCH
    matches the stored patterns that apply to the name."""

    resource_type: int
    resource_name: str | None
    pattern_type: int
    principal: str | None
    host: str | None
    operation: int
    permission_type: int

    def matches(self, acl: AccessControlEntryRecord) -> bool:
        if self.resource_type not in (_ANY, acl.resource_type):
            return False
        if self.pattern_type not in (_ANY, _MATCH, acl.pattern_type):
            return False
        if self.resource_name is not None:
            if self.pattern_type in (_ANY, acl.pattern_type):
                if self.resource_name != acl.resource_name:
                    return False
            elif acl.pattern_type == _LITERAL:
                if acl.resource_name not in (self.resource_name, _WILDCARD):
                    return False
            elif not self.resource_name.startswith(acl.resource_name):
                return False
        return ((self.principal is None or self.principal == acl.principal)
                and (self.host is None or self.host == acl.host)
                and self.operation in (_ANY, acl.operation)
                and self.permission_type in (_ANY, acl.permission_type))


class Committer(Protocol):
    """The QuorumController as this manager uses it."""

    @property
    def image(self) -> MetadataImage: ...

    def replay_and_commit(self, records: Sequence[MetadataRecord], now_ms: int) -> int: ...


def _invalid(message: str) -> KafkaError:
    return KafkaError(ErrorCode.invalid_request, message)


def validate(acl: AclSpec) -> None:
    """Raise INVALID_REQUEST, with Kafka's message, for an ACL the controller cannot store."""
    if acl.resource_type in (0, _ANY) or acl.resource_type not in _RESOURCE_TYPES:
        raise _invalid(f"Invalid resourceType {_RESOURCE_TYPES.get(acl.resource_type, 'UNKNOWN')}")
    if acl.pattern_type not in (_LITERAL, _PREFIXED):
        raise _invalid(f"Invalid patternType {_PATTERN_TYPES.get(acl.pattern_type, 'UNKNOWN')}")
    if acl.operation in (0, _ANY) or acl.operation not in _OPERATIONS:
        raise _invalid(f"Invalid operation {_OPERATIONS.get(acl.operation, 'UNKNOWN')}")
    if acl.permission_type not in (2, 3):
        raise _invalid(f"Invalid permissionType {_PERMISSIONS.get(acl.permission_type, 'UNKNOWN')}")
    if not acl.resource_name:
        raise _invalid("Resource name should not be empty")
    if acl.resource_type == _CLUSTER and acl.resource_name != _CLUSTER_NAME:
        raise _invalid(f"The only valid name for the CLUSTER resource is {_CLUSTER_NAME}")
    if ":" not in acl.principal:
        raise _invalid(f"Could not parse principal from `{acl.principal}` (no colon is present separating the "
                       "principal type from the principal name)")


class AclControlManager:
    def __init__(self, controller: Committer) -> None:
        self.controller = controller

    def create(self, acls: Sequence[AclSpec], now_ms: int) -> list[KafkaError | None]:
        """One outcome per ACL (None: stored, or already there); the valid ones are committed together."""
        existing = {self._spec_of(a) for a in self.controller.image.acls.values()}
        outcomes: list[KafkaError | None] = []
        records: list[MetadataRecord] = []
        for acl in acls:
            try:
                validate(acl)
            except KafkaError as exc:
                outcomes.append(exc)
                continue
            outcomes.append(None)
            if acl not in existing:
                existing.add(acl)
                records.append(AccessControlEntryRecord(uuid.uuid4(), acl.resource_type, acl.resource_name,
                                                        acl.pattern_type, acl.principal, acl.host, acl.operation,
                                                        acl.permission_type))
        self.controller.replay_and_commit(records, now_ms)
        return outcomes

    def delete(self, filters: Sequence[AclFilter], now_ms: int) -> list[list[AccessControlEntryRecord]]:
        """Per filter, the stored ACLs it matched, all removed in one commit."""
        stored = list(self.controller.image.acls.values())
        matched = [[acl for acl in stored if f.matches(acl)] for f in filters]
        removed = {acl.id for found in matched for acl in found}
        self.controller.replay_and_commit([RemoveAccessControlEntryRecord(i) for i in removed], now_ms)
        return matched

    @staticmethod
    def _spec_of(record: AccessControlEntryRecord) -> AclSpec:
        return AclSpec(record.resource_type, record.resource_name, record.pattern_type, record.principal,
                       record.host, record.operation, record.permission_type)
