"""StandardAuthorizer: whether a principal may perform an operation on a resource, decided from
the ACLs in the broker's metadata image, with Kafka's StandardAuthorizer rules.

The rules (Kafka's, checked against its StandardAuthorizerData and Authorizer):
- a principal in ``super.users`` may do anything;
- the ACLs that apply to a resource are those of its type whose pattern is LITERAL with its name,
  LITERAL ``*``, or PREFIXED with a prefix of its name; an entry applies to the request when its
  principal is the caller or ``User:*`` and its host is the caller's address or ``*``;
- an applying DENY wins over any ALLOW; a DENY matches its own operation (or ALL) only, while an
  ALLOW of READ, WRITE, DELETE or ALTER also allows DESCRIBE and one of ALTER_CONFIGS allows
  DESCRIBE_CONFIGS;
- when no ACL at all is set on the resource (any principal, any operation), the answer is
  ``allow.everyone.if.no.acl.found``; when some are but none allows, it is denied.

The ACLs are indexed by (resource type, literal name) and by (resource type, prefix), so a check
costs the ACLs of that resource plus one lookup per distinct prefix length, not every ACL. The
index follows the image: when its offset moves the ACL ids are compared and only the added and
removed ACLs are applied. Decisions are cached per (principal, host, operation, resource) and the
cache is dropped when the ACLs change, so the produce/fetch hot path costs a dict lookup.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Protocol

from kbroker.protocol.acl import (
    SUPPORTED_OPERATIONS,
    WILDCARD,
    WILDCARD_PRINCIPAL,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
)
from kbroker.replication.quorum.metadata_records import AccessControlEntryRecord
from kbroker.security.principal import KafkaPrincipal

# The class names ``authorizer.class.name`` turns this authorizer on with: Kafka's KRaft
# authorizer, and the ZooKeeper-era AclAuthorizer a migrated server.properties may still name.
AUTHORIZER_CLASS_NAMES = frozenset({
    "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    "kafka.security.authorizer.AclAuthorizer",
})

# The keys the authorizer reads besides authorizer.class.name: Kafka hands the whole broker
# configuration to its authorizer, so they are configuration keys though KafkaConfig does not
# define them.
AUTHORIZER_KEYS = frozenset({"super.users", "allow.everyone.if.no.acl.found"})

# Operations an ALLOW entry grants besides its own (Kafka: only ALLOW entries imply).
_IMPLIED_BY: dict[int, frozenset[int]] = {
    AclOperation.DESCRIBE: frozenset({AclOperation.DESCRIBE, AclOperation.READ, AclOperation.WRITE,
                                      AclOperation.DELETE, AclOperation.ALTER}),
    AclOperation.DESCRIBE_CONFIGS: frozenset({AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS}),
}
_CACHE_LIMIT = 100_000  # decisions kept before the cache starts over (bounded memory)


class AclSource(Protocol):
    """Where the ACLs live: the metadata image (its ``offset`` moves with every record applied)."""

    offset: int
    acls: dict  # uuid.UUID -> AccessControlEntryRecord


def binding_of(record: AccessControlEntryRecord) -> AclBinding:
    return AclBinding(record.resource_type, record.resource_name, record.pattern_type, record.principal,
                      record.host, record.operation, record.permission_type)


def _entry_result(acl: AclBinding, principals: tuple[str, str], host: str, operation: int) -> bool | None:
    """True (allows), False (denies), or None when the entry does not apply to the request."""
    if acl.principal not in principals or acl.host not in (WILDCARD, host):
        return None
    if acl.operation != AclOperation.ALL:
        if acl.permission_type == AclPermissionType.ALLOW:
            implied_by = _IMPLIED_BY.get(operation)
            if acl.operation != operation and (implied_by is None or acl.operation not in implied_by):
                return None
        elif acl.operation != operation:
            return None
    return acl.permission_type == AclPermissionType.ALLOW


class StandardAuthorizer:
    """Decides from ``image()``'s ACLs; ``super_users`` are ``Type:name`` strings."""

    def __init__(self, image: Callable[[], AclSource], super_users: Iterable[str] = (),
                 allow_everyone_if_no_acl_found: bool = False) -> None:
        self._image = image
        self.super_users = frozenset(super_users)
        self.allow_if_no_acl = allow_everyone_if_no_acl_found
        self._source: AclSource | None = None
        self._offset = -2
        self._acls: dict[object, AclBinding] = {}  # id -> binding: what the index holds
        self._literal: dict[tuple[int, str], list[AclBinding]] = {}
        self._prefixed: dict[tuple[int, str], list[AclBinding]] = {}
        self._prefix_lengths: dict[int, set[int]] = {}  # resource type -> lengths of its PREFIXED names
        self._decisions: dict[tuple[KafkaPrincipal, str, int, int, str], bool] = {}
        self.version = 0  # counts ACL changes (callers caching their own results compare it)

    # --- following the image ------------------------------------------------------------

    def refresh(self) -> None:
        """Bring the index up to the image's ACLs (cheap when the image has not moved)."""
        source = self._image()
        if source is self._source and source.offset == self._offset:
            return
        self._source, self._offset = source, source.offset
        current: Mapping[object, AccessControlEntryRecord] = source.acls
        if current.keys() == self._acls.keys():
            return
        for acl_id in self._acls.keys() - current.keys():
            self._unindex(self._acls.pop(acl_id))
        for acl_id in current.keys() - self._acls.keys():
            binding = binding_of(current[acl_id])
            self._acls[acl_id] = binding
            self._index(binding)
        self._decisions.clear()
        self.version += 1

    def _section(self, acl: AclBinding) -> list[AclBinding] | None:
        key = (acl.resource_type, acl.resource_name)
        if acl.pattern_type == PatternType.LITERAL:
            return self._literal.setdefault(key, [])
        if acl.pattern_type == PatternType.PREFIXED:
            self._prefix_lengths.setdefault(acl.resource_type, set()).add(len(acl.resource_name))
            return self._prefixed.setdefault(key, [])
        return None  # the controller stores LITERAL and PREFIXED only

    def _index(self, acl: AclBinding) -> None:
        section = self._section(acl)
        if section is not None:
            section.append(acl)

    def _unindex(self, acl: AclBinding) -> None:
        table = self._literal if acl.pattern_type == PatternType.LITERAL else self._prefixed
        key = (acl.resource_type, acl.resource_name)
        section = table.get(key)
        if section is None:
            return
        section.remove(acl)
        if not section:
            del table[key]
            if acl.pattern_type == PatternType.PREFIXED and not any(
                    rt == acl.resource_type and len(name) == len(acl.resource_name) for rt, name in self._prefixed):
                self._prefix_lengths[acl.resource_type].discard(len(acl.resource_name))

    def _applicable(self, resource_type: int, name: str) -> Iterable[list[AclBinding]]:
        """The index sections holding every ACL whose pattern applies to the resource."""
        literal = self._literal
        for key in ((resource_type, name), (resource_type, WILDCARD)):
            section = literal.get(key)
            if section:
                yield section
        for length in self._prefix_lengths.get(resource_type, ()):
            if length <= len(name):
                section = self._prefixed.get((resource_type, name[:length]))
                if section:
                    yield section

    # --- decisions ------------------------------------------------------------------------

    def authorize(self, principal: KafkaPrincipal, host: str, operation: int, resource_type: int, name: str) -> bool:
        """Kafka's ``authorize`` for one LITERAL resource."""
        self.refresh()
        key = (principal, host, operation, resource_type, name)
        decision = self._decisions.get(key)
        if decision is None:
            decision = self._decide(principal, host, operation, resource_type, name)
            if len(self._decisions) >= _CACHE_LIMIT:
                self._decisions.clear()
            self._decisions[key] = decision
        return decision

    def _decide(self, principal: KafkaPrincipal, host: str, operation: int, resource_type: int, name: str) -> bool:
        text = str(principal)
        if text in self.super_users:
            return True
        principals = (text, WILDCARD_PRINCIPAL)
        found_any = allowed = False
        for section in self._applicable(resource_type, name):
            found_any = True
            for acl in section:
                result = _entry_result(acl, principals, host, operation)
                if result is False:
                    return False  # DENY wins
                if result:
                    allowed = True
        return allowed or (not found_any and self.allow_if_no_acl)

    def authorize_any(self, principal: KafkaPrincipal, host: str, operation: int, resource_type: int) -> bool:
        """Kafka's ``authorizeByResourceType``: may the principal perform ``operation`` on at least
        one resource of the type? (An idempotent producer with WRITE on some topic, say.) Allowed
        when a resource nobody names is allowed (super users, or no ACLs and
        ``allow.everyone.if.no.acl.found``), or when an ALLOW entry for the operation (or ALL) has
        a pattern no DENY covers: a wildcard DENY denies all, a LITERAL DENY its own name, a
        PREFIXED DENY every pattern starting with it."""
        if self.authorize(principal, host, operation, resource_type, "hardcode"):
            return True
        principals = (str(principal), WILDCARD_PRINCIPAL)
        deny_literal: set[str] = set()
        deny_prefixed: set[str] = set()
        allow: list[tuple[int, str]] = []
        for acl in self._acls.values():
            if (acl.resource_type != resource_type or acl.principal not in principals
                    or acl.host not in (WILDCARD, host) or acl.operation not in (operation, AclOperation.ALL)):
                continue
            literal = acl.pattern_type == PatternType.LITERAL
            if acl.permission_type == AclPermissionType.DENY:
                if literal and acl.resource_name == WILDCARD:
                    return False
                (deny_literal if literal else deny_prefixed).add(acl.resource_name)
            elif acl.permission_type == AclPermissionType.ALLOW:
                if literal and acl.resource_name == WILDCARD:
                    return True
                allow.append((acl.pattern_type, acl.resource_name))
        for pattern_type, name in allow:
            if pattern_type == PatternType.LITERAL and name in deny_literal:
                continue
            if not any(name[:n] in deny_prefixed for n in range(1, len(name) + 1)):
                return True
        return False

    def authorized_operations(self, principal: KafkaPrincipal, host: str, resource_type: int, name: str) -> int:
        """The bit set describes answer (``*_authorized_operations``): bit ``op`` set for each
        operation Kafka supports on the resource type that the principal may perform."""
        bits = 0
        for operation in SUPPORTED_OPERATIONS.get(resource_type, ()):
            if self.authorize(principal, host, operation, resource_type, name):
                bits |= 1 << operation
        return bits

    def acls(self, matching: AclBindingFilter) -> list[AclBinding]:
        """The stored ACLs the filter matches (DescribeAcls)."""
        self.refresh()
        return [acl for acl in self._acls.values() if matching.matches(acl)]


def configured_authorizer(class_name: str, super_users: str, allow_everyone_if_no_acl_found: str,
                          image: Callable[[], AclSource]) -> StandardAuthorizer | None:
    """The authorizer ``authorizer.class.name`` asks for (None when empty), with ``super.users``
    (``;``-separated principals) and ``allow.everyone.if.no.acl.found``, as a broker's
    server.properties gives them. An authorizer class kbroker does not have stops start-up, as
    Kafka's broker stops on a class it cannot load."""
    class_name = class_name.strip()
    if not class_name:
        return None
    if class_name not in AUTHORIZER_CLASS_NAMES:
        raise RuntimeError(f"authorizer.class.name: class {class_name} cannot be found "
                           f"(kbroker has {', '.join(sorted(AUTHORIZER_CLASS_NAMES))})")
    users = [u.strip() for u in super_users.split(";") if u.strip()]
    return StandardAuthorizer(image, users, allow_everyone_if_no_acl_found.strip().lower() == "true")
