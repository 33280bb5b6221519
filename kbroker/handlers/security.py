"""The security features' plug-in points, their "feature off" state, and the authorization
checks every handler makes.

A Kafka broker answers the ACL, SCRAM and delegation-token APIs even where the feature is off:
without ``authorizer.class.name`` the ACL APIs answer SECURITY_DISABLED; on a PLAINTEXT
connection every delegation-token request is DELEGATION_TOKEN_REQUEST_NOT_ALLOWED.
``SecurityFeatures()`` is all off and each handler answers as Kafka does then. With an
authorizer (kbroker/security/authorizer.py) each handler asks ``allowed`` what Kafka's KafkaApis
asks its authorizer, with the request's principal and client address; without one ``allowed``
is a single attribute test.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from kbroker.network.context import RequestContext
from kbroker.protocol.acl import CLUSTER_NAME, AclBinding, AclBindingFilter, ResourceType
from kbroker.protocol.errors import ErrorCode, KafkaError
from kbroker.security.principal import KafkaPrincipal

_NOTHING: frozenset[str] = frozenset()


class Authorizer(Protocol):
    """What handlers need from an authorizer (Kafka's ``Authorizer``): decisions and the ACLs."""

    def authorize(self, principal: KafkaPrincipal, host: str, operation: int, resource_type: int,
                  name: str) -> bool: ...

    def authorize_any(self, principal: KafkaPrincipal, host: str, operation: int, resource_type: int) -> bool: ...

    def authorized_operations(self, principal: KafkaPrincipal, host: str, resource_type: int, name: str) -> int: ...

    def acls(self, matching: AclBindingFilter) -> Sequence[AclBinding]: ...


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


def allowed(ctx: RequestContext[HasSecurity], operation: int, resource_type: int, name: str) -> bool:
    """May the request's principal, from its host, perform ``operation`` on the resource?"""
    authorizer = ctx.services.security.authorizer
    return authorizer is None or authorizer.authorize(ctx.principal, ctx.client_host, operation, resource_type, name)


def cluster_allowed(ctx: RequestContext[HasSecurity], operation: int) -> bool:
    return allowed(ctx, operation, ResourceType.CLUSTER, CLUSTER_NAME)


def allowed_any(ctx: RequestContext[HasSecurity], operation: int, resource_type: int) -> bool:
    """Kafka's ``authorizeByResourceType``: the operation on at least one resource of the type."""
    authorizer = ctx.services.security.authorizer
    return authorizer is None or authorizer.authorize_any(ctx.principal, ctx.client_host, operation, resource_type)


def denied_names(ctx: RequestContext[HasSecurity], operation: int, resource_type: int,
                 names: Iterable[str]) -> frozenset[str]:
    """The names among ``names`` the operation is not allowed on (none without an authorizer:
    the produce and fetch paths pay one attribute test)."""
    authorizer = ctx.services.security.authorizer
    if authorizer is None:
        return _NOTHING
    principal, host = ctx.principal, ctx.client_host
    return frozenset(n for n in set(names) if not authorizer.authorize(principal, host, operation, resource_type, n))


def authorized_operations(ctx: RequestContext[HasSecurity], resource_type: int, name: str,
                          without_authorizer: int) -> int:
    """A describe's ``*_authorized_operations``: ``without_authorizer`` (what Kafka answers with
    none configured) or the operations the ACLs allow."""
    authorizer = ctx.services.security.authorizer
    if authorizer is None:
        return without_authorizer
    return authorizer.authorized_operations(ctx.principal, ctx.client_host, resource_type, name)


# Kafka's default messages of the authorization errors (Errors.X.message()), which KafkaApis
# answers where it gives no message of its own.
TOPIC_DENIED = "Topic authorization failed."
GROUP_DENIED = "Group authorization failed."
CLUSTER_DENIED = "Cluster authorization failed."
TRANSACTIONAL_ID_DENIED = "Transactional Id authorization failed."

# Config resource types (DescribeConfigs / AlterConfigs): the ACL resource each is checked on.
_CONFIG_TOPIC, _CONFIG_BROKER, _CONFIG_BROKER_LOGGER, _CONFIG_CLIENT_METRICS, _CONFIG_GROUP = 2, 4, 8, 16, 32


def config_resource_denied(ctx: RequestContext[HasSecurity], operation: int, config_type: int,
                           name: str) -> KafkaError | None:
    """Kafka's check of one config resource (``operation`` DESCRIBE_CONFIGS or ALTER_CONFIGS): a
    topic on itself, a group on itself, a broker, broker logger or client-metrics resource on the
    cluster; the refusal names the resource's kind, with Kafka's default message."""
    if config_type == _CONFIG_TOPIC:
        if not allowed(ctx, operation, ResourceType.TOPIC, name):
            return KafkaError(ErrorCode.topic_authorization_failed, TOPIC_DENIED)
    elif config_type == _CONFIG_GROUP:
        if not allowed(ctx, operation, ResourceType.GROUP, name):
            return KafkaError(ErrorCode.group_authorization_failed, GROUP_DENIED)
    elif config_type in (_CONFIG_BROKER, _CONFIG_BROKER_LOGGER, _CONFIG_CLIENT_METRICS):
        if not cluster_allowed(ctx, operation):
            return KafkaError(ErrorCode.cluster_authorization_failed, CLUSTER_DENIED)
    return None


def cluster_refusal(ctx: RequestContext[HasSecurity], operation: int,
                    error_response: Callable[[int, ErrorCode], object]) -> object | None:
    """A forwarded admin API's ``answer_locally``: its CLUSTER_AUTHORIZATION_FAILED answer when
    the caller may not perform ``operation`` on the cluster, else None (forward it)."""
    if cluster_allowed(ctx, operation):
        return None
    return error_response(ctx.api_version, ErrorCode.cluster_authorization_failed)
