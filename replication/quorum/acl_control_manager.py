"""AclControlManager: the controller's CreateAcls and DeleteAcls decisions, as ACL records.

Kafka's AclControlManager rules: a new ACL must name a concrete resource type (not UNKNOWN or
ANY), a LITERAL or PREFIXED pattern, a concrete operation and ALLOW or DENY, a non-empty
resource name (``kafka-cluster`` for the CLUSTER resource, as the broker's AclApis requires) and
a ``Type:name`` principal; otherwise INVALID_REQUEST with Kafka's message. An ACL already stored
is not stored twice (its creation still succeeds). A delete filter removes every stored ACL it
matches (the matching rules of Kafka's AclBindingFilter) and answers them. Records are committed
through ``QuorumController.replay_and_commit``; the image then holds the ACLs by id.

The codes and the binding and filter types are Kafka's wire vocabulary, kbroker/protocol/acl.py.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from enum import IntEnum
from typing import Protocol

from kbroker.protocol.acl import (
    CLUSTER_NAME,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)
from kbroker.protocol.errors import ErrorCode, KafkaError

from .metadata_image import MetadataImage
from .metadata_records import AccessControlEntryRecord, MetadataRecord, RemoveAccessControlEntryRecord


class Committer(Protocol):
    """The QuorumController as this manager uses it."""

    @property
    def image(self) -> MetadataImage: ...

    def replay_and_commit(self, records: Sequence[MetadataRecord], now_ms: int) -> int: ...


def _invalid(message: str) -> KafkaError:
    return KafkaError(ErrorCode.invalid_request, message)


def _name(kind: type[IntEnum], code: int) -> str:
    return kind(code).name if code in kind._value2member_map_ else "UNKNOWN"


def validate(acl: AclBinding) -> None:
    """Raise INVALID_REQUEST, with Kafka's message, for an ACL the controller cannot store."""
    if _name(ResourceType, acl.resource_type) in ("UNKNOWN", "ANY"):
        raise _invalid(f"Invalid resourceType {_name(ResourceType, acl.resource_type)}")
    if acl.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
        raise _invalid(f"Invalid patternType {_name(PatternType, acl.pattern_type)}")
    if _name(AclOperation, acl.operation) in ("UNKNOWN", "ANY"):
        raise _invalid(f"Invalid operation {_name(AclOperation, acl.operation)}")
    if acl.permission_type not in (AclPermissionType.DENY, AclPermissionType.ALLOW):
        raise _invalid(f"Invalid permissionType {_name(AclPermissionType, acl.permission_type)}")
    if not acl.resource_name:
        raise _invalid("Resource name should not be empty")
    if acl.resource_type == ResourceType.CLUSTER and acl.resource_name != CLUSTER_NAME:
        raise _invalid(f"The only valid name for the CLUSTER resource is {CLUSTER_NAME}")
    if ":" not in acl.principal:
        raise _invalid(f"Could not parse principal from `{acl.principal}` (no colon is present separating the "
                       "principal type from the principal name)")


class AclControlManager:
    def __init__(self, controller: Committer) -> None:
        self.controller = controller

    def create(self, acls: Sequence[AclBinding], now_ms: int) -> list[KafkaError | None]:
        """One outcome per ACL (None: stored, or already there); the valid ones are committed together."""
        existing = {self._binding_of(a) for a in self.controller.image.acls.values()}
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

    def delete(self, filters: Sequence[AclBindingFilter], now_ms: int) -> list[list[AccessControlEntryRecord]]:
        """Per filter, the stored ACLs it matched, all removed in one commit."""
        stored = list(self.controller.image.acls.values())
        matched = [[acl for acl in stored if f.matches(acl)] for f in filters]
        removed = {acl.id for found in matched for acl in found}
        self.controller.replay_and_commit([RemoveAccessControlEntryRecord(i) for i in removed], now_ms)
        return matched

    @staticmethod
    def _binding_of(record: AccessControlEntryRecord) -> AclBinding:
        return AclBinding(record.resource_type, record.resource_name, record.pattern_type, record.principal,
                       record.host, record.operation, record.permission_type)
