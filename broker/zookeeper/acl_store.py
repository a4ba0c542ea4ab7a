"""ACLs in ZooKeeper, where Kafka's AclAuthorizer keeps them, so that every broker of the
cluster (and Kafka's own tools) sees the same ones:

    /kafka-acl/<ResourceType>/<name>                  literal patterns
    /kafka-acl-extended/prefixed/<ResourceType>/<name> prefixed patterns

each holding the resource's ACL document, changed only by conditional (versioned) writes and
removed when its last ACL goes. After a change the writer adds a sequential notification,
`/kafka-acl-changes/acl_changes_<n>` ("<TYPE>:<name>") or `/kafka-acl-extended-changes/
acl_changes_<n>` (JSON), which every broker watches: it reads the named resource again.
Notifications older than 15 minutes are removed by whoever writes the next one, as Kafka's
ZkNodeChangeNotificationListener purges them.
"""

from __future__ import annotations

import contextlib
import json
import logging
import time
from collections.abc import Callable

from ..authorizer.acl import PatternType, ResourcePattern, ResourceType, parse_name
from ..authorizer.authorizer import AclCache, Entries
from ..authorizer.store import Change, decode_entries, encode_entries
from .client import ZooKeeperClient
from .kazoo_api import (
    BadVersionError,
    EventType,
    NodeExistsError,
    NoNodeError,
    TransactionRequest,
    WatchedEvent,
)
from .serial_job import SerialJob

log = logging.getLogger("brook.zookeeper.acls")

LITERAL_ACLS = "/kafka-acl"
EXTENDED_ACLS = "/kafka-acl-extended"
PREFIXED_ACLS = f"{EXTENDED_ACLS}/prefixed"
LITERAL_CHANGES = "/kafka-acl-changes"
EXTENDED_CHANGES = "/kafka-acl-extended-changes"
CHANGE_PREFIX = "acl_changes_"
CHANGE_EXPIRATION_MS = 15 * 60 * 1000
# Resource types ACLs can be set on (the ones whose znodes Kafka creates).
STORED_TYPES = (
    ResourceType.TOPIC,
    ResourceType.GROUP,
    ResourceType.CLUSTER,
    ResourceType.TRANSACTIONAL_ID,
    ResourceType.DELEGATION_TOKEN,
    ResourceType.USER,
)


def resource_path(pattern: ResourcePattern) -> str:
    base = LITERAL_ACLS if pattern.pattern_type == PatternType.LITERAL else PREFIXED_ACLS
    return f"{base}/{pattern.resource_type.zk_name}/{pattern.name}"


def encode_change(pattern: ResourcePattern) -> tuple[str, bytes]:
    """(notification directory, data) of a change to a resource's ACLs."""
    if pattern.pattern_type == PatternType.LITERAL:
        return LITERAL_CHANGES, f"{pattern.resource_type.name}:{pattern.name}".encode()
    event = {
        "version": 1,
        "resourceType": pattern.resource_type.name,
        "name": pattern.name,
        "patternType": pattern.pattern_type.name,
    }
    return EXTENDED_CHANGES, json.dumps(event).encode()


def decode_change(directory: str, data: bytes) -> ResourcePattern:
    """The resource a notification names (ValueError when it names none)."""
    text = data.decode()
    if directory == LITERAL_CHANGES:
        kind, sep, name = text.partition(":")
        if not sep:
            raise ValueError(f"expected ResourceType:ResourceName, got {text!r}")
        return ResourcePattern(
            ResourceType(parse_name(ResourceType, kind)), name, PatternType.LITERAL
        )
    event = json.loads(text)
    return ResourcePattern(
        ResourceType(parse_name(ResourceType, event["resourceType"])),
        event["name"],
        PatternType(parse_name(PatternType, event["patternType"])),
    )


class ZkAclStore:
    def __init__(self, client: ZooKeeperClient) -> None:
        self._client = client
        self._cache: AclCache | None = None
        self._changed: Callable[[], None] = lambda: None
        self._last_seen: dict[str, str] = {}
        self._reload_all = True
        self._job = SerialJob("reading ACLs from ZooKeeper", self._refresh)

    async def start(self, cache: AclCache, changed: Callable[[], None]) -> None:
        self._cache = cache
        self._changed = changed
        for path in (
            *(f"{LITERAL_ACLS}/{t.zk_name}" for t in STORED_TYPES),
            *(f"{PREFIXED_ACLS}/{t.zk_name}" for t in STORED_TYPES),
            LITERAL_CHANGES,
            EXTENDED_CHANGES,
        ):
            with contextlib.suppress(NodeExistsError):
                await self._client.create(path, makepath=True)
        self._job.schedule()
        await self._job.idle()

    def resync(self) -> None:
        """A new session: its watches went with the old one; read every ACL again."""
        self._reload_all = True
        self._job.schedule()

    def close(self) -> None:
        self._job.close()

    # --- reading ------------------------------------------------------------------------

    def _notified(self, event: WatchedEvent) -> None:
        if event.type == EventType.NONE:
            self._reload_all = True
        self._job.schedule()

    async def _refresh(self) -> None:
        stale: set[ResourcePattern] = set()
        for directory in (LITERAL_CHANGES, EXTENDED_CHANGES):
            children = sorted(
                child
                for child in await self._client.get_children(directory, self._notified)
                if child.startswith(CHANGE_PREFIX)
            )
            last = self._last_seen.get(directory, "")
            for child in children:
                if child <= last or self._reload_all:
                    continue
                try:
                    data, _ = await self._client.get(f"{directory}/{child}")
                    stale.add(decode_change(directory, data))
                except NoNodeError:
                    continue  # purged meanwhile: the resource is read below anyway
                except (ValueError, KeyError) as exc:
                    log.error("Ignoring ACL change notification %s/%s: %s", directory, child, exc)
            if children:
                self._last_seen[directory] = children[-1]
        if self._reload_all:
            self._reload_all = False
            await self._load_everything()
        else:
            for pattern in sorted(stale):
                await self._load(pattern)
        self._changed()

    async def _load_everything(self) -> None:
        assert self._cache is not None
        found: set[ResourcePattern] = set()
        for base, pattern_type in (
            (LITERAL_ACLS, PatternType.LITERAL),
            (PREFIXED_ACLS, PatternType.PREFIXED),
        ):
            for resource_type in STORED_TYPES:
                try:
                    names = await self._client.get_children(f"{base}/{resource_type.zk_name}")
                except NoNodeError:
                    continue
                for name in names:
                    pattern = ResourcePattern(resource_type, name, pattern_type)
                    found.add(pattern)
                    await self._load(pattern)
        for gone in set(self._cache.patterns()) - found:
            self._cache.replace(gone, ())

    async def _load(self, pattern: ResourcePattern) -> None:
        assert self._cache is not None
        self._cache.replace(pattern, (await self._read(pattern))[0])

    async def _read(self, pattern: ResourcePattern) -> tuple[Entries, int | None]:
        """A resource's ACLs and its znode's version (None: no znode)."""
        try:
            data, stat = await self._client.get(resource_path(pattern))
        except NoNodeError:
            return frozenset(), None
        try:
            return decode_entries(json.loads(data)), stat.version
        except ValueError as exc:
            log.error("Ignoring the ACLs of %s: %s", resource_path(pattern), exc)
            return frozenset(), stat.version

    # --- writing ------------------------------------------------------------------------

    async def update(self, pattern: ResourcePattern, change: Change) -> Entries:
        assert self._cache is not None, "start() first"
        path = resource_path(pattern)
        while True:  # until a conditional write wins (Kafka's updateResourceAcls)
            current, version = await self._read(pattern)
            wanted = change(current)
            if wanted == current:
                break
            data = json.dumps(encode_entries(wanted)).encode()
            try:
                if version is None:
                    await self._client.create(path, data, makepath=True)
                elif wanted:
                    await self._client.set(path, data, version)
                else:

                    def delete(transaction: TransactionRequest, version: int = version) -> None:
                        transaction.delete(path, version)

                    await self._client.multi(delete)
                    # multi reports a lost race as a result, not an exception.
                    if await self._client.exists(path) is not None:
                        continue
            except (BadVersionError, NodeExistsError, NoNodeError):
                continue
            await self._notify(pattern)
            break
        self._cache.replace(pattern, wanted)
        return wanted

    async def _notify(self, pattern: ResourcePattern) -> None:
        directory, data = encode_change(pattern)
        await self._client.create(f"{directory}/{CHANGE_PREFIX}", data, sequence=True)
        await self._purge(directory)

    async def _purge(self, directory: str) -> None:
        """Remove notifications older than Kafka's 15 minutes (every broker has read them)."""
        cutoff_ms = time.time() * 1000 - CHANGE_EXPIRATION_MS
        for child in await self._client.get_children(directory):
            path = f"{directory}/{child}"
            stat = await self._client.exists(path)
            if stat is not None and stat.ctime < cutoff_ms:

                def delete(transaction: TransactionRequest, path: str = path) -> None:
                    transaction.delete(path)

                await self._client.multi(delete)
