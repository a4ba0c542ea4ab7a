"""Where ACLs are kept, in the JSON Kafka writes to ZooKeeper for each resource.

A resource's ACLs are one document, {"version": 1, "acls": [{"principal", "permissionType",
"operation", "host"}]}, changed as a whole (Kafka's updateResourceAcls): read it, apply the
change, write it back. A single broker keeps every resource's document in one file in its
first log dir (written atomically); a cluster keeps them in ZooKeeper, where every broker
sees them (broker/zookeeper/acl_store.py).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, Protocol

from brook.storage.checkpoints import read_json, write_json

from .acl import (
    AccessControlEntry,
    PatternType,
    PermissionType,
    ResourcePattern,
    ResourceType,
    camel_name,
    parse_name,
)
from .authorizer import AclCache, Entries
from .operations import AclOperation

log = logging.getLogger("brook.authorizer")

ACLS_FILE = "brook-acls.json"
DOCUMENT_VERSION = 1

Change = Callable[[Entries], Entries]


class AclStore(Protocol):
    async def start(self, cache: AclCache, changed: Callable[[], None]) -> None:
        """Load every ACL into the cache; later changes (another broker's) are put there
        too, `changed` called after each."""
        ...

    async def update(self, pattern: ResourcePattern, change: Change) -> Entries:
        """Apply `change` to a resource's ACLs where they are kept; the cache follows."""
        ...

    def close(self) -> None: ...


def encode_entries(entries: Iterable[AccessControlEntry]) -> dict[str, Any]:
    return {
        "version": DOCUMENT_VERSION,
        "acls": [
            {
                "principal": entry.principal,
                "permissionType": camel_name(entry.permission),
                "operation": camel_name(entry.operation),
                "host": entry.host,
            }
            for entry in sorted(entries)
        ],
    }


def decode_entries(document: Any) -> frozenset[AccessControlEntry]:
    """A resource's ACLs from Kafka's JSON (ValueError on anything else)."""
    if not isinstance(document, dict) or not isinstance(document.get("acls"), list):
        raise ValueError(f"not an ACL document: {document!r}")
    entries = set()
    for acl in document["acls"]:
        try:
            entries.add(
                AccessControlEntry(
                    str(acl["principal"]),
                    str(acl["host"]),
                    AclOperation(parse_name(AclOperation, str(acl["operation"]))),
                    PermissionType(parse_name(PermissionType, str(acl["permissionType"]))),
                )
            )
        except (KeyError, TypeError) as exc:
            raise ValueError(f"not an ACL entry: {acl!r}") from exc
    return frozenset(entries)


class LocalAclStore:
    """A single broker's ACLs: one JSON file, every resource's document in it."""

    def __init__(self, log_dir: Path) -> None:
        self.path = log_dir / ACLS_FILE
        self._cache: AclCache | None = None

    async def start(self, cache: AclCache, changed: Callable[[], None]) -> None:
        self._cache = cache
        stored = read_json(self.path) or {"resources": []}
        for resource in stored["resources"]:
            pattern = ResourcePattern(
                ResourceType(parse_name(ResourceType, resource["resourceType"])),
                resource["name"],
                PatternType(parse_name(PatternType, resource["patternType"])),
            )
            cache.replace(pattern, decode_entries(resource))
        changed()

    async def update(self, pattern: ResourcePattern, change: Change) -> Entries:
        assert self._cache is not None, "start() first"
        entries = change(self._cache.entries(pattern))
        resources = []
        for kept in sorted({*self._cache.patterns(), pattern}):
            kept_entries = entries if kept == pattern else self._cache.entries(kept)
            if kept_entries:
                resources.append(
                    {
                        "resourceType": kept.resource_type.zk_name,
                        "name": kept.name,
                        "patternType": kept.pattern_type.name,
                        **encode_entries(kept_entries),
                    }
                )
        # Written (atomically, fsynced) before the cache changes: an ACL answered as
        # created survives a crash.
        write_json(self.path, {"version": DOCUMENT_VERSION, "resources": resources}, pretty=True)
        self._cache.replace(pattern, entries)
        return entries

    def close(self) -> None:
        pass
