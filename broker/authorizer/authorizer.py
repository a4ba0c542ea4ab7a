"""The authorizer: Kafka's AclAuthorizer decisions over the ACLs a store keeps.

An action (principal, client host, operation, resource) is allowed when the principal is a
super user; else, among the ACLs that apply to the resource (its literal name, the literal
wildcard `*`, every prefixed pattern the name starts with), none denies it and one allows
it; a resource no ACL applies to is allowed only with `allow.everyone.if.no.acl.found`.
An ACL matches on its principal (or `User:*`), its host (or `*`), and its operation (or
All); allowing Read, Write, Delete or Alter also allows Describe, and AlterConfigs allows
DescribeConfigs. Deny always wins.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Callable, Iterable

from .acl import (
    WILDCARD,
    WILDCARD_PRINCIPAL,
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    PatternType,
    PermissionType,
    ResourcePattern,
    ResourceType,
)
from .operations import AclOperation

log = logging.getLogger("brook.authorizer")

# Operations whose allowance implies another's (Kafka's AclOperation documentation).
_IMPLIED_BY: dict[AclOperation, frozenset[AclOperation]] = {
    AclOperation.DESCRIBE: frozenset(
        {
            AclOperation.DESCRIBE,
            AclOperation.READ,
            AclOperation.WRITE,
            AclOperation.DELETE,
            AclOperation.ALTER,
        }
    ),
    AclOperation.DESCRIBE_CONFIGS: frozenset(
        {AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS}
    ),
}

Entries = frozenset[AccessControlEntry]


class AclCache:
    """Every ACL by resource pattern: what a store loads and each change replaces."""

    def __init__(self) -> None:
        self._by_pattern: dict[ResourcePattern, Entries] = {}
        # Prefixed patterns by resource type, for the names a resource name starts with.
        self._prefixed: dict[ResourceType, dict[str, Entries]] = defaultdict(dict)

    def replace(self, pattern: ResourcePattern, entries: Iterable[AccessControlEntry]) -> None:
        """A resource's ACLs as they now are (none: the pattern is forgotten)."""
        kept = frozenset(entries)
        if kept:
            self._by_pattern[pattern] = kept
        else:
            self._by_pattern.pop(pattern, None)
        if pattern.pattern_type == PatternType.PREFIXED:
            prefixed = self._prefixed[pattern.resource_type]
            if kept:
                prefixed[pattern.name] = kept
            else:
                prefixed.pop(pattern.name, None)

    def entries(self, pattern: ResourcePattern) -> Entries:
        return self._by_pattern.get(pattern, frozenset())

    def bindings(self) -> list[AclBinding]:
        return [
            AclBinding(pattern, entry)
            for pattern, entries in sorted(self._by_pattern.items())
            for entry in sorted(entries)
        ]

    def patterns(self) -> list[ResourcePattern]:
        return list(self._by_pattern)

    def applying_to(self, resource_type: ResourceType, name: str) -> list[AccessControlEntry]:
        """The ACLs that apply to one resource: its literal name, the literal wildcard, and
        every prefixed pattern the name starts with (Kafka's matchingAcls)."""
        found: list[AccessControlEntry] = []
        for literal in (name, WILDCARD):
            found.extend(self.entries(ResourcePattern(resource_type, literal, PatternType.LITERAL)))
        for prefix, entries in self._prefixed.get(resource_type, {}).items():
            if name.startswith(prefix):
                found.extend(entries)
        return found

    def of_type(self, resource_type: ResourceType) -> dict[ResourcePattern, Entries]:
        return {p: e for p, e in self._by_pattern.items() if p.resource_type == resource_type}


def _matches(
    entry: AccessControlEntry,
    principal: str,
    host: str,
    operation: AclOperation,
    permission: PermissionType,
) -> bool:
    return (
        entry.permission == permission
        and entry.principal in (principal, WILDCARD_PRINCIPAL)
        and entry.host in (host, WILDCARD)
        and entry.operation in (operation, AclOperation.ALL)
    )


class Authorizer:
    def __init__(self, super_users: Iterable[str], allow_everyone_if_no_acl_found: bool) -> None:
        self.super_users = frozenset(super_users)
        self.allow_everyone_if_no_acl_found = allow_everyone_if_no_acl_found
        self.cache = AclCache()
        # Called after the ACLs change (a store's reload), e.g. to log it.
        self.listeners: list[Callable[[], None]] = []

    def authorize(
        self,
        principal: str,
        host: str,
        operation: AclOperation,
        resource_type: ResourceType,
        name: str,
    ) -> bool:
        if principal in self.super_users:
            return True
        acls = self.cache.applying_to(resource_type, name)
        if not acls:
            return self.allow_everyone_if_no_acl_found
        if any(_matches(a, principal, host, operation, PermissionType.DENY) for a in acls):
            return False
        allowing = _IMPLIED_BY.get(operation, frozenset({operation}))
        return any(
            _matches(a, principal, host, allowed, PermissionType.ALLOW)
            for a in acls
            for allowed in allowing
        )

    def authorize_by_resource_type(
        self, principal: str, host: str, operation: AclOperation, resource_type: ResourceType
    ) -> bool:
        """Whether the principal may do the operation on SOME resource of the type (Kafka's
        authorizeByResourceType: an idempotent producer without IdempotentWrite on the
        cluster needs Write on any topic): a literal or prefixed allow not overruled by a
        deny of the same name or of a prefix of it, a wildcard deny overruling all."""
        if principal in self.super_users:
            return True
        denied_literals: set[str] = set()
        denied_prefixes: set[str] = set()
        allowed: list[ResourcePattern] = []
        for pattern, entries in self.cache.of_type(resource_type).items():
            for entry in entries:
                if _matches(entry, principal, host, operation, PermissionType.DENY):
                    if pattern.pattern_type == PatternType.LITERAL:
                        denied_literals.add(pattern.name)
                    else:
                        denied_prefixes.add(pattern.name)
                elif _matches(entry, principal, host, operation, PermissionType.ALLOW):
                    allowed.append(pattern)
        if WILDCARD in denied_literals:
            return False
        if self.allow_everyone_if_no_acl_found:
            return True

        def dominated(name: str) -> bool:
            return any(name.startswith(prefix) for prefix in denied_prefixes)

        for pattern in allowed:
            if pattern.pattern_type == PatternType.PREFIXED and not dominated(pattern.name):
                return True
            if pattern.pattern_type == PatternType.LITERAL and (
                pattern.name == WILDCARD
                or (pattern.name not in denied_literals and not dominated(pattern.name))
            ):
                return True
        return False

    def authorized_operations(
        self,
        principal: str,
        host: str,
        resource_type: ResourceType,
        name: str,
        supported: Iterable[AclOperation],
    ) -> int:
        """The bitfield of supported operations this principal may do on the resource."""
        return sum(
            1 << operation
            for operation in supported
            if self.authorize(principal, host, operation, resource_type, name)
        )

    def acls(self, selected: AclBindingFilter) -> list[AclBinding]:
        return [binding for binding in self.cache.bindings() if selected.matches(binding)]

    def changed(self) -> None:
        for listener in self.listeners:
            listener()
