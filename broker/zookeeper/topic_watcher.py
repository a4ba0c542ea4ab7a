"""Topics, partition states and topic configs, from ZooKeeper into the metadata cache.

Every broker watches what Kafka's brokers learnt from the controller's UpdateMetadata
requests: /brokers/topics (children: which topics exist), each /brokers/topics/<t> (the
assignment and topic id), each partition's state znode (leader, leader epoch, ISR; its
version is the partition epoch; a partition the controller has not made yet, by its
topic's partitions znode's children) and the topic configs (read at start, then again when a
change notification under /config/changes names the topic). Watches rather than
requests from the controller: ZooKeeper is the one source of truth already, its watches
reach every broker without a channel of the controller's own, and a broker that was
away reads the current state instead of replaying missed requests.

What it reads becomes the metadata records (TopicRecord, PartitionRecord, ...) that
differ from what the cache shows, applied through the MetadataPublisher on the loop: a
watch that fires for an unchanged znode, or for a change the broker made itself (its own
ISR write), applies nothing.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable
from typing import Any

from ..config.broker_config import ConfigError
from ..config.topic_config import validate_topic_configs
from ..metadata.cache import MetadataCache, PartitionRegistration
from ..metadata.publisher import MetadataPublisher
from ..metadata.records import (
    MetadataRecord,
    PartitionRecord,
    RemoveTopicRecord,
    TopicConfigsRecord,
    TopicRecord,
)
from . import znodes
from .client import ZooKeeperClient
from .kazoo_api import EventType, NoNodeError, WatchedEvent
from .serial_job import SerialJob

log = logging.getLogger("brook.zookeeper.topics")

NO_LEADER = -1
# Where a partition without a state znode stands (its controller has not written one yet).
NO_STATE = znodes.PartitionState(NO_LEADER, 0, (), 0, 0)


class TopicWatcher:
    def __init__(
        self, client: ZooKeeperClient, cache: MetadataCache, publisher: MetadataPublisher | None
    ) -> None:
        self._client = client
        self._cache = cache
        self.publisher = publisher
        # What ZooKeeper held when last read.
        self.assignments: dict[str, tuple[uuid.UUID | None, dict[int, list[int]]]] = {}
        # Each topic's znode whole (with the replicas being added and removed by a
        # reassignment) and its version, which the controller's rewrites are checked on.
        self.topic_znodes: dict[str, tuple[znodes.TopicZNode, int]] = {}
        self.states: dict[tuple[str, int], znodes.PartitionState] = {}
        self.configs: dict[str, dict[str, str]] = {}
        # What a watch said may have changed since.
        self._stale_topics: set[str] = set()
        self._stale_states: set[tuple[str, int]] = set()
        self._stale_configs: set[str] = set()
        # Partitions read while their znode was not yet made (a new topic's, before the
        # controller decides them), by topic: the topic's partitions znode's children
        # say when they are, one watch for the topic rather than one per partition.
        self._awaited: dict[str, set[int]] = {}
        self._stale_children: set[str] = set()
        # The topics read since the cache was last brought to what was read (all of them
        # after a new session): only theirs are compared, so that the refreshes a topic of
        # thousands of partitions brings, one state or a few at a time, do not each walk
        # every partition of every topic.
        self._read_since_publish: set[str] = set()
        self._compare_all = True
        self._last_change: str | None = None
        self._job = SerialJob("reading topics from ZooKeeper", self._refresh)
        # The cache brought to what was read, apart from the reads: a topic of thousands
        # of partitions takes a while to make, and the controller, which decides on what
        # was read, must not wait for it (reads_done).
        self._publishing = SerialJob("applying topics from ZooKeeper", self._publish)
        # Told after every read (the controller decides on what was read).
        self.refreshed: list[Callable[[], None]] = []

    async def start(self) -> None:
        self._job.schedule()
        await self.idle()

    def schedule(self) -> None:
        self._job.schedule()

    async def reads_done(self) -> None:
        """Until what was asked for is read (the controller's decisions need no more)."""
        await self._job.idle()

    async def idle(self) -> None:
        """Until what was asked for is read and in the cache."""
        while self._job.busy or self._publishing.busy:
            await self._job.idle()
            await self._publishing.idle()

    def close(self) -> None:
        self._job.close()
        self._publishing.close()

    def resync(self) -> None:
        """A new session: its watches are gone with the old one; read everything again."""
        self._everything_stale()
        self._job.schedule()

    # --- watches ------------------------------------------------------------------------

    def _everything_stale(self) -> None:
        # A lost connection: kazoo drops its watches; read everything again.
        self._compare_all = True
        self._stale_topics.update(self.assignments)
        self._stale_states.update(self.states)
        self._stale_configs.update(self.assignments)
        self._stale_children.update(self._awaited)

    def _topics_changed(self, event: WatchedEvent) -> None:
        if event.type == EventType.NONE:
            self._everything_stale()
        self._job.schedule()

    def _topic_changed(self, event: WatchedEvent) -> None:
        if event.type == EventType.NONE or event.path is None:
            self._everything_stale()
        else:
            self._stale_topics.add(event.path.rsplit("/", 1)[-1])
        self._job.schedule()

    def _state_changed(self, event: WatchedEvent) -> None:
        if event.type == EventType.NONE or event.path is None:
            self._everything_stale()
        else:
            # /brokers/topics/<t>/partitions/<p>/state
            parts = event.path.split("/")
            if len(parts) >= 6 and parts[-2].isdigit():
                self._stale_states.add((parts[-4], int(parts[-2])))
        self._job.schedule()

    def _children_changed(self, event: WatchedEvent) -> None:
        if event.type == EventType.NONE or event.path is None:
            self._everything_stale()
        else:
            # /brokers/topics/<t>/partitions
            parts = event.path.split("/")
            if len(parts) >= 3 and parts[-1] == "partitions":
                self._stale_children.add(parts[-2])
        self._job.schedule()

    def _config_changes(self, event: WatchedEvent) -> None:
        if event.type == EventType.NONE:
            self._everything_stale()
        self._job.schedule()

    def _config_changed(self, event: WatchedEvent) -> None:
        if event.type == EventType.NONE or event.path is None:
            self._everything_stale()
        else:
            self._stale_configs.add(event.path.rsplit("/", 1)[-1])
        self._job.schedule()

    # --- reading ------------------------------------------------------------------------

    async def _refresh(self) -> None:
        await self._read_config_changes()
        children = await self._client.get_children(znodes.TOPICS, self._topics_changed)
        names = set(children)
        read = self._read_since_publish
        for gone in set(self.assignments) - names:
            read.add(gone)
            self.assignments.pop(gone, None)
            self.topic_znodes.pop(gone, None)
            self.configs.pop(gone, None)
            for key in [k for k in self.states if k[0] == gone]:
                del self.states[key]
            self._awaited.pop(gone, None)
        new_topics = names - set(self.assignments)
        to_read = sorted(new_topics | (self._stale_topics & names))
        self._stale_topics.difference_update(to_read)
        read.update(to_read)
        await asyncio.gather(*(self._read_topic(name) for name in to_read))
        configs_to_read = sorted(new_topics | (self._stale_configs & names))
        self._stale_configs.difference_update(configs_to_read)
        read.update(configs_to_read)
        await asyncio.gather(*(self._read_config(name) for name in configs_to_read))
        unread: dict[str, list[int]] = {}
        wanted = []
        for name, (_, assignment) in self.assignments.items():
            for partition in assignment:
                if (name, partition) not in self.states:
                    unread.setdefault(name, []).append(partition)
                elif (name, partition) in self._stale_states:
                    wanted.append((name, partition))
        self._stale_states.difference_update(wanted)
        wanted += await self._made_partitions(unread)
        read.update(name for name, _ in wanted)
        await asyncio.gather(*(self._read_state(name, partition) for name, partition in wanted))
        self._publishing.schedule()
        for listener in self.refreshed:
            listener()

    async def _made_partitions(self, unread: dict[str, list[int]]) -> list[tuple[str, int]]:
        """Of the partitions never read (`unread`) and those awaited, the ones whose
        znode is made now, to read; the rest are awaited, on their topic's children.

        A topic of thousands of partitions is seen before its controller has made their
        state znodes: asking for each state, and setting a watch for its creation, would
        cost every broker two round trips a partition for nothing."""
        topics = set(unread) | (self._stale_children & self._awaited.keys())
        self._stale_children.difference_update(topics)
        listed = await asyncio.gather(*(self._partition_children(name) for name in topics))
        made = []
        for name, children in zip(topics, listed, strict=True):
            awaited = self._awaited.setdefault(name, set())
            awaited.update(unread.get(name, ()))
            for partition in [p for p in awaited if p in children]:
                awaited.discard(partition)
                made.append((name, partition))
            for partition in awaited:
                self.states.setdefault((name, partition), NO_STATE)
            if not awaited:
                del self._awaited[name]
        return made

    async def _partition_children(self, name: str) -> set[int]:
        """The partitions whose znode a topic's partitions znode holds (watched)."""
        path = znodes.topic_partitions_path(name)
        try:
            children = await self._client.get_children(path, self._children_changed)
        except NoNodeError:
            # Not made yet: its creation fires this watch.
            if await self._client.exists(path, self._children_changed) is None:
                return set()
            self._stale_children.add(name)
            self._job.schedule()
            return set()
        return {int(child) for child in children if child.isdigit()}

    async def _read_topic(self, name: str) -> None:
        try:
            data, stat = await self._client.get(znodes.topic_path(name), self._topic_changed)
        except NoNodeError:
            self.assignments.pop(name, None)
            self.topic_znodes.pop(name, None)
            return
        try:
            held = znodes.decode_topic_znode(name, data)
        except ValueError as exc:
            log.error("%s; topic %s is left out of the metadata", exc, name)
            # Known but without an id: left out until its znode changes (its watch).
            self.assignments[name] = (None, {})
            self.topic_znodes.pop(name, None)
            return
        self.assignments[name] = (held.topic_id, held.partitions)
        self.topic_znodes[name] = (held, stat.version)

    def reread_topic(self, name: str) -> None:
        """Read a topic's znode again at the next refresh (a write of this broker's own,
        which its watch would bring a moment later)."""
        self._stale_topics.add(name)
        self._job.schedule()

    def reread_state(self, name: str, partition: int) -> None:
        """Read a partition's state znode again at the next refresh (as reread_topic)."""
        self._stale_states.add((name, partition))
        self._job.schedule()

    async def _read_state(self, name: str, partition: int) -> None:
        path = znodes.topic_partition_state_path(name, partition)
        try:
            data, stat = await self._client.get(path, self._state_changed)
        except NoNodeError:
            # Not written yet: its creation fires this watch.
            if await self._client.exists(path, self._state_changed) is None:
                self.states[(name, partition)] = NO_STATE
                return
            self._stale_states.add((name, partition))
            self._job.schedule()
            return
        try:
            self.states[(name, partition)] = znodes.decode_partition_state(data, stat.version)
        except ValueError as exc:
            log.error("%s (%s)", exc, path)
            self.states[(name, partition)] = NO_STATE

    async def _read_config(self, name: str) -> None:
        path = znodes.config_entity_path("topics", name)
        try:
            data, _ = await self._client.get(path, self._config_changed)
        except NoNodeError:
            await self._client.exists(path, self._config_changed)
            self.configs[name] = {}
            return
        try:
            self.configs[name] = znodes.decode_entity_config(data)
        except ValueError as exc:
            log.error("%s (%s)", exc, path)

    async def _read_config_changes(self) -> None:
        """Topics named by notifications newer than the last one read get their configs
        read again (the config znodes are watched too: a notification only hurries it)."""
        children = sorted(
            c
            for c in await self._client.get_children(znodes.CONFIG_CHANGES, self._config_changes)
            if c.startswith(znodes.CONFIG_CHANGE_PREFIX)
        )
        if self._last_change is None:
            self._last_change = children[-1] if children else ""
            return
        for child in children:
            if child <= self._last_change:
                continue
            self._last_change = child
            try:
                data, _ = await self._client.get(f"{znodes.CONFIG_CHANGES}/{child}")
                entity = znodes.decode_config_change(data)
            except (NoNodeError, ValueError):
                continue
            if entity is not None and entity[0] == "topics":
                self._stale_configs.add(entity[1])

    # --- into records -------------------------------------------------------------------

    def records(self, names: set[str] | None = None) -> list[MetadataRecord]:
        """The records that take the cache to what ZooKeeper holds: for every topic, or
        for those of `names` only."""
        records: list[MetadataRecord] = []
        if names is None:
            cached = {topic.name: topic for topic in self._cache.topics()}
            held_topics = sorted(self.assignments.items())
        else:
            cached = {name: topic for name in names if (topic := self._cache.get(name))}
            held_topics = sorted(
                (name, self.assignments[name]) for name in names if name in self.assignments
            )
        for name, known in cached.items():
            held = self.assignments.get(name)
            if held is None or held[0] != known.topic_id:
                records.append(RemoveTopicRecord(known.topic_id))
        for name, (topic_id, assignment) in held_topics:
            if topic_id is None:
                continue  # an old Kafka's topic: the controller gives it an id first
            topic = cached.get(name)
            if topic is not None and topic.topic_id != topic_id:
                topic = None
            if topic is None:
                records.append(TopicRecord(name, topic_id))
            for partition in range(len(assignment)):
                if partition not in assignment:
                    break  # partitions are numbered without gaps: the rest waits
                state = self.states.get((name, partition), NO_STATE)
                registration = PartitionRegistration(
                    tuple(assignment[partition]),
                    state.isr,
                    state.leader,
                    state.leader_epoch,
                    state.zk_version,
                )
                if (
                    topic is not None
                    and partition < len(topic.partitions)
                    and topic.partitions[partition] == registration
                ):
                    continue
                records.append(
                    PartitionRecord(
                        topic_id,
                        partition,
                        registration.replicas,
                        registration.isr,
                        registration.leader,
                        registration.leader_epoch,
                        registration.partition_epoch,
                    )
                )
            configs = self._parsed_configs(name)
            if configs is not None and (topic.configs if topic else {}) != configs:
                records.append(TopicConfigsRecord(topic_id, configs))
        return records

    def _parsed_configs(self, name: str) -> dict[str, Any] | None:
        raw = self.configs.get(name)
        if raw is None:
            return None
        try:
            return validate_topic_configs(dict(raw))
        except ConfigError as exc:
            log.error("The configs of topic %s in ZooKeeper are not valid: %s", name, exc)
            return None

    async def _publish(self) -> None:
        if self.publisher is None:
            return
        # Taken now: reads go on while a change is applied, and name topics for the next.
        names = None if self._compare_all else self._read_since_publish
        self._compare_all = False
        self._read_since_publish = set()
        try:
            records = self.records(names)
            if records:
                await self._apply(records)
        except BaseException:
            # Compared again at the next publish: what a failed change left different.
            if names is None:
                self._compare_all = True
            else:
                self._read_since_publish.update(names)
            raise

    async def _apply(self, records: list[MetadataRecord]) -> None:
        assert self.publisher is not None
        # Removals first, on their own: a topic deleted and made again under the same
        # name must lose its old partitions before it gets new ones.
        removed = [r for r in records if isinstance(r, RemoveTopicRecord)]
        if removed:
            self.publisher.apply(removed)
        # Then what changes the topics known already, and last the new topics, whose
        # logs (thousands, for a topic of thousands of partitions) are made a slice at a
        # time while the broker serves others (MetadataPublisher.apply_in_slices).
        added = [r for r in records if isinstance(r, TopicRecord)]
        new_ids = {record.topic_id for record in added}
        known: list[MetadataRecord] = []
        new: list[MetadataRecord] = []
        for record in records:
            if isinstance(record, TopicRecord):
                new.append(record)
            elif isinstance(record, PartitionRecord | TopicConfigsRecord):
                (new if record.topic_id in new_ids else known).append(record)
        if known:
            self.publisher.apply(known)
        if new:
            await self.publisher.apply_in_slices(new)
        if added or removed:
            log.info(
                "Topics from ZooKeeper: %s added, %s removed",
                ", ".join(sorted(r.name for r in added)) or "none",
                len(removed),
            )
