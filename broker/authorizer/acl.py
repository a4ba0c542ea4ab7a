"""ACLs as Kafka defines them: a resource pattern (type, name, literal or prefixed) and an
access control entry (principal, host, operation, allow or deny), with Kafka's codes on
the wire and Kafka's names in ZooKeeper and on the command line.

Filters (DescribeAcls, DeleteAcls) match bindings as Kafka's AclBindingFilter does: ANY
matches every value, a null name/principal/host every one, and the MATCH pattern type
every pattern that applies to a resource name (the literal name, the literal wildcard
`*`, and each prefix of it).
"""

from __future__ import annotations

import enum
from typing import NamedTuple

from .operations import AclOperation

WILDCARD = "*"
CLUSTER_NAME = "kafka-cluster"
WILDCARD_PRINCIPAL = "User:*"


class ResourceType(enum.IntEnum):
    """Kafka's ResourceType codes."""

    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7

    @property
    def zk_name(self) -> str:
        """The name Kafka's ZooKeeper paths use (SecurityUtils.resourceTypeName)."""
        return _CAMEL[self]


class PatternType(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class PermissionType(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


_CAMEL: dict[enum.IntEnum, str] = {
    ResourceType.UNKNOWN: "Unknown",
    ResourceType.ANY: "Any",
    ResourceType.TOPIC: "Topic",
    ResourceType.GROUP: "Group",
    ResourceType.CLUSTER: "Cluster",
    ResourceType.TRANSACTIONAL_ID: "TransactionalId",
    ResourceType.DELEGATION_TOKEN: "DelegationToken",
    ResourceType.USER: "User",
}


def camel_name(value: enum.Enum) -> str:
    """An operation's or permission's name as Kafka writes it in ZooKeeper and prints it
    (Read, IdempotentWrite, DescribeConfigs, Allow)."""
    return "".join(part.capitalize() for part in value.name.split("_"))


def parse_name(enum_type: type[enum.IntEnum], text: str) -> enum.IntEnum:
    """A member by any of Kafka's spellings: READ, Read, read, IdempotentWrite,
    IDEMPOTENT_WRITE (ValueError naming the valid ones otherwise)."""
    wanted = text.replace("_", "").replace("-", "").lower()
    for member in enum_type:
        if member.name.replace("_", "").lower() == wanted:
            return member
    names = ", ".join(camel_name(m) for m in enum_type if m.name not in ("UNKNOWN", "ANY"))
    raise ValueError(f"unknown {enum_type.__name__} {text!r} (one of {names})")


class ResourcePattern(NamedTuple):
    resource_type: ResourceType
    name: str
    pattern_type: PatternType


class AccessControlEntry(NamedTuple):
    principal: str
    host: str
    operation: AclOperation
    permission: PermissionType


class AclBinding(NamedTuple):
    pattern: ResourcePattern
    entry: AccessControlEntry

    def __str__(self) -> str:
        p, e = self.pattern, self.entry
        return (
            f"(principal={e.principal}, host={e.host}, operation={e.operation.name},"
            f" permissionType={e.permission.name}) on {p.resource_type.name}:{p.name}"
            f" ({p.pattern_type.name})"
        )


class AclBindingFilter(NamedTuple):
    """What DescribeAcls and DeleteAcls select: None and ANY match everything."""

    resource_type: ResourceType
    name: str | None
    pattern_type: PatternType
    principal: str | None
    host: str | None
    operation: AclOperation
    permission: PermissionType

    def invalid_reason(self) -> str | None:
        """Why Kafka refuses this filter (an UNKNOWN value), or None."""
        for label, value in (
            ("resource type", self.resource_type),
            ("pattern type", self.pattern_type),
            ("operation", self.operation),
            ("permission type", self.permission),
        ):
            if value == 0:  # UNKNOWN in every one of these enums
                return f"Filter contain UNKNOWN elements: {label}"
        return None

    def matches(self, binding: AclBinding) -> bool:
        return self.matches_pattern(binding.pattern) and self.matches_entry(binding.entry)

    def matches_pattern(self, pattern: ResourcePattern) -> bool:
        if self.resource_type not in (ResourceType.ANY, pattern.resource_type):
            return False
        if self.pattern_type in (PatternType.ANY, pattern.pattern_type):
            return self.name is None or self.name == pattern.name
        if self.pattern_type != PatternType.MATCH:
            return False
        if self.name is None:
            return True
        # MATCH: the patterns that would apply to a resource of this name.
        if pattern.pattern_type == PatternType.LITERAL:
            return pattern.name in (self.name, WILDCARD)
        if pattern.pattern_type == PatternType.PREFIXED:
            return self.name.startswith(pattern.name)
        return False

    def matches_entry(self, entry: AccessControlEntry) -> bool:
        return (
            (self.principal is None or self.principal == entry.principal)
            and (self.host is None or self.host == entry.host)
            and self.operation in (AclOperation.ANY, entry.operation)
            and self.permission in (PermissionType.ANY, entry.permission)
        )


def invalid_binding_reason(binding: AclBinding) -> str | None:
    """Why Kafka refuses to create this ACL (its messages), or None."""
    pattern, entry = binding
    if pattern.resource_type in (ResourceType.UNKNOWN, ResourceType.ANY):
        return f"Invalid resource type: {pattern.resource_type.name}"
    if pattern.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
        return f"Invalid pattern type: {pattern.pattern_type.name}"
    if entry.operation in (AclOperation.UNKNOWN, AclOperation.ANY):
        return f"Invalid operation: {entry.operation.name}"
    if entry.permission in (PermissionType.UNKNOWN, PermissionType.ANY):
        return f"Invalid permission type: {entry.permission.name}"
    if not pattern.name:
        return "Invalid empty resource name specified"
    if pattern.resource_type == ResourceType.CLUSTER and pattern.name != CLUSTER_NAME:
        return f"The only valid name for the CLUSTER resource is {CLUSTER_NAME}"
    kind, sep, name = entry.principal.partition(":")
    if not sep or not kind or not name:
        return f"Could not parse principal from `{entry.principal}` (no colon is found)."
    if not entry.host:
        return "Invalid empty host specified"
    return None
