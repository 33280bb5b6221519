"""The security features' plug-in points and their "feature off" state.

A Kafka broker answers the ACL, SCRAM and delegation-token APIs even where the feature is off:
without ``authorizer.class.name`` the ACL APIs answer SECURITY_DISABLED; on a PLAINTEXT
connection every delegation-token request is DELEGATION_TOKEN_REQUEST_NOT_ALLOWED. kbroker has
no authorizer and no SCRAM credential store yet (issue #18 adds them), so
``SecurityFeatures()`` is all off and each handler answers as Kafka does then; they plug in here
without changing the handlers' request/response code.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from kbroker.protocol.errors import KafkaError


@dataclass(frozen=True, slots=True)
class AclBinding:
    """One ACL: a resource pattern and an access control entry, in Kafka's wire codes."""

    resource_type: int
    resource_name: str
    pattern_type: int
    principal: str
    host: str
    operation: int
    permission_type: int


@dataclass(frozen=True, slots=True)
class AclBindingFilter:
    """What DescribeAcls / DeleteAcls match: a None name, principal or host, or the code ANY (1),
    matches every value of that field."""

    resource_type: int
    resource_name: str | None
    pattern_type: int
    principal: str | None
    host: str | None
    operation: int
    permission_type: int


class Authorizer(Protocol):
    """What the ACL handlers need from an authorizer (Kafka's ``Authorizer`` ACL methods)."""

    def acls(self, matching: AclBindingFilter) -> Sequence[AclBinding]: ...

    async def create_acls(self, bindings: Sequence[AclBinding]) -> Sequence[KafkaError | None]: ...

    async def delete_acls(self, filters: Sequence[AclBindingFilter]) -> Sequence[Sequence[AclBinding] | KafkaError]: ...


class ScramCredentialStore(Protocol):
    """What the SCRAM credential handlers need: each user's (mechanism, iterations) pairs, the
    mechanism in Kafka's ScramMechanism code (1 SCRAM-SHA-256, 2 SCRAM-SHA-512)."""

    def credentials(self) -> Mapping[str, Sequence[tuple[int, int]]]: ...


@dataclass(frozen=True, slots=True)
class SecurityFeatures:
    """The broker's security parts; None is a feature that is off."""

    authorizer: Authorizer | None = None
    scram: ScramCredentialStore | None = None


class HasSecurity(Protocol):
    @property
    def security(self) -> SecurityFeatures: ...
