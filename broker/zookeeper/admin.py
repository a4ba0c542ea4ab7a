"""Topic administration from any broker of a ZooKeeper cluster, as Kafka 2.x's
AdminZkClient does it: a request changes znodes, the elected controller and every
broker's watches do the rest.

- CreateTopics and auto-creation: the configs to /config/topics/<t> first, then the
  assignment to /brokers/topics/<t> (NodeExists: TOPIC_ALREADY_EXISTS); the controller
  writes the partitions' states, and the response waits until this broker's cache shows
  every partition with a leader (bounded by the request's timeout: REQUEST_TIMED_OUT).
- DeleteTopics: /admin/delete_topics/<t>; the controller deletes the topic's znodes.
- CreatePartitions: the assignment rewritten, conditional on the version read.
- Topic AlterConfigs: the config znode, then a change notification under /config/changes.

The checks are the single broker's (Controller), over the live brokers in ZooKeeper. The
handlers call the same methods on either controller.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import Callable, Coroutine, Mapping, Sequence
from typing import Any

from brook.protocol.errors import (
    CoordinatorNotAvailableError,
    LeaderNotAvailableError,
    ReassignmentInProgressError,
    RequestTimedOutError,
    TopicDeletionDisabledError,
    TopicExistsError,
    UnknownTopicOrPartitionError,
)
from brook.storage.checkpoints import topic_id_to_string

from ..cluster.assignment import (
    BrokerMetadata,
    assign_new_partitions,
    assign_replicas_to_brokers,
)
from ..config.broker_config import BrokerConfig
from ..config.topic_config import validate_topic_configs
from ..config.values import config_to_string
from ..metadata.cache import MetadataCache, TopicMetadata
from ..metadata.controller import Controller, check_partition_increase, partitions
from ..metadata.publisher import MetadataPublisher
from ..metadata.records import MetadataRecord
from ..metadata.topics import validate_manual_assignment
from ..observability.log_format import first_and_count
from . import znodes
from .client import ZooKeeperClient
from .kazoo_api import BadVersionError, NodeExistsError, NoNodeError

log = logging.getLogger("brook.controller")

# How long AlterConfigs waits for this broker's cache to show a topic's new configs (the
# watch brings them within a round trip to ZooKeeper).
CONFIG_APPLIED_WAIT_MS = 30_000
# The config key of each internal topic's replication factor, for Kafka's message.
_REPLICATION_FACTOR_KEYS = {
    "__consumer_offsets": ("offsets.topic.replication.factor", "offsets topic"),
    "__transaction_state": ("transaction.state.log.replication.factor", "transactions topic"),
}


class ZkController(Controller):
    def __init__(
        self,
        broker_id: int,
        config: Callable[[], BrokerConfig],
        cache: MetadataCache,
        publisher: MetadataPublisher,
        client: ZooKeeperClient,
    ) -> None:
        super().__init__(broker_id, config, cache, publisher)
        self._client = client
        # (condition on the cache, future): resolved when a change makes it true.
        self._waiters: list[tuple[Callable[[], bool], asyncio.Future[None]]] = []
        self._background: set[asyncio.Task[Any]] = set()
        self._creating: set[str] = set()
        publisher.listeners.append(self._metadata_changed)

    @property
    def live_brokers(self) -> set[int]:
        return {broker.broker_id for broker in self._cache.brokers()}

    # --- waiting for the cache ----------------------------------------------------------

    def _metadata_changed(self, records: Sequence[MetadataRecord]) -> None:
        for waiter in list(self._waiters):
            condition, future = waiter
            if not future.done() and condition():
                future.set_result(None)

    async def _wait_for(self, condition: Callable[[], bool], timeout_ms: int) -> bool:
        """Until `condition` holds in this broker's cache; False after `timeout_ms`."""
        if condition():
            return True
        if timeout_ms <= 0:
            return False
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        waiter = (condition, future)
        self._waiters.append(waiter)
        try:
            await asyncio.wait_for(future, timeout_ms / 1000)
            return True
        except TimeoutError:
            return False
        finally:
            self._waiters.remove(waiter)

    def _has_leaders(self, name: str, topic_id: uuid.UUID, count: int) -> Callable[[], bool]:
        def condition() -> bool:
            topic = self._cache.get(name)
            return (
                topic is not None
                and topic.topic_id == topic_id
                and len(topic.partitions) >= count
                and all(p.leader >= 0 for p in topic.partitions[:count])
            )

        return condition

    # --- creation -----------------------------------------------------------------------

    def _assignment(self, num_partitions: int, replication_factor: int) -> dict[int, list[int]]:
        """Kafka's assignment over the live brokers, with their racks."""
        brokers = [BrokerMetadata(b.broker_id, b.rack) for b in self._cache.brokers()]
        return assign_replicas_to_brokers(brokers, num_partitions, replication_factor)

    async def _write_topic(
        self,
        name: str,
        assignment: dict[int, list[int]],
        configs: dict[str, Any],
    ) -> uuid.UUID:
        """Configs first, then the assignment (AdminZkClient.createTopicWithAssignment):
        a broker that sees the topic finds its configs already there."""
        raw = _config_strings(configs)
        await self._set_or_create(
            znodes.config_entity_path("topics", name), znodes.encode_entity_config(raw)
        )
        topic_id = uuid.uuid4()
        try:
            await self._client.create(
                znodes.topic_path(name), znodes.encode_topic(topic_id, assignment)
            )
        except NodeExistsError:
            raise TopicExistsError(f"Topic '{name}' already exists.") from None
        log.info(
            "Created topic %s with %s (topic id %s), assignment %s",
            name,
            partitions(len(assignment)),
            topic_id_to_string(topic_id),
            # The first partitions' replicas: the znode holds all of a topic of thousands.
            "{" + first_and_count([f"{p}: {assignment[p]}" for p in sorted(assignment)], 20) + "}",
        )
        return topic_id

    async def _set_or_create(self, path: str, data: bytes) -> None:
        try:
            await self._client.set(path, data)
        except NoNodeError:
            try:
                await self._client.create(path, data, makepath=True)
            except NodeExistsError:
                await self._client.set(path, data)

    async def create_topic(
        self,
        name: str,
        num_partitions: int,
        replication_factor: int,
        configs: dict[str, Any],
        assignments: dict[int, list[int]] | None = None,
        timeout_ms: int = 0,
    ) -> uuid.UUID:
        _, _, parsed = self.check_create(name, num_partitions, replication_factor, configs)
        if assignments is None:
            assignments = self._assignment(num_partitions, replication_factor)
        topic_id = await self._write_topic(name, assignments, parsed)
        if (
            not await self._wait_for(
                self._has_leaders(name, topic_id, len(assignments)), timeout_ms
            )
            and timeout_ms > 0
        ):
            raise RequestTimedOutError(
                f"Timed out after {timeout_ms} ms waiting for the leaders of topic {name}"
            )
        return topic_id

    def auto_create(self, name: str) -> TopicMetadata:
        """Kafka's auto-creation in ZooKeeper mode: the znodes are written, and the
        Metadata response says LEADER_NOT_AVAILABLE until the topic has leaders."""
        num_partitions, replication_factor, _ = self.check_create(name, -1, -1, {})
        self._in_background(
            name,
            f"auto-creation of topic {name}",
            self._write_topic(name, self._assignment(num_partitions, replication_factor), {}),
        )
        raise LeaderNotAvailableError(f"Topic {name} is being created")

    def create(
        self,
        name: str,
        num_partitions: int = -1,
        replication_factor: int = -1,
        configs: dict[str, Any] | None = None,
        internal: bool = False,
    ) -> TopicMetadata:
        """An internal topic, made by its coordinator on first use: its replication factor
        as configured, refused with COORDINATOR_NOT_AVAILABLE while fewer brokers live
        (Kafka's words); the creation goes on in the background, and the coordinator is
        not available until the topic has leaders."""
        live = len(self.live_brokers)
        if internal and name in _REPLICATION_FACTOR_KEYS and replication_factor > live:
            key, what = _REPLICATION_FACTOR_KEYS[name]
            raise CoordinatorNotAvailableError(
                f"Number of alive brokers '{live}' does not meet the required replication"
                f" factor '{replication_factor}' for the {what} (configured via '{key}')."
                " This error can be ignored if the cluster is starting up and not all"
                " brokers are up yet."
            )
        num_partitions, replication_factor, parsed = self.check_create(
            name, num_partitions, replication_factor, configs or {}, internal
        )
        self._in_background(
            name,
            f"creation of topic {name}",
            self._write_topic(name, self._assignment(num_partitions, replication_factor), parsed),
        )
        raise CoordinatorNotAvailableError(f"Topic {name} is being created")

    def _in_background(self, name: str, what: str, work: Coroutine[Any, Any, Any]) -> None:
        """One creation of a topic at a time: clients retry while it is under way."""
        if name in self._creating:
            work.close()
            return
        self._creating.add(name)
        task = asyncio.ensure_future(work)
        self._background.add(task)

        def done(finished: asyncio.Task[Any]) -> None:
            self._background.discard(finished)
            self._creating.discard(name)
            if finished.cancelled():
                return
            error = finished.exception()
            if isinstance(error, TopicExistsError):
                return  # another broker made it first
            if error is not None:
                log.error("The %s failed: %s", what, error)

        task.add_done_callback(done)

    # --- deletion -----------------------------------------------------------------------

    async def delete_topic(self, name: str, timeout_ms: int = 0) -> uuid.UUID:
        if not self._config()["delete.topic.enable"]:
            raise TopicDeletionDisabledError("Topic deletion is disabled.")
        topic = self._cache.get(name)
        if topic is None:
            raise UnknownTopicOrPartitionError(f"Topic {name} does not exist")
        with contextlib.suppress(NodeExistsError):  # marked already: the same outcome
            await self._client.create(znodes.delete_topic_path(name), makepath=True)
        log.info("Topic %s marked for deletion", name)
        topic_id = topic.topic_id

        def gone() -> bool:
            current = self._cache.get(name)
            return current is None or current.topic_id != topic_id

        if not await self._wait_for(gone, timeout_ms) and timeout_ms > 0:
            raise RequestTimedOutError(f"Timed out after {timeout_ms} ms deleting topic {name}")
        return topic_id

    # --- partitions ---------------------------------------------------------------------

    async def create_partitions(
        self,
        name: str,
        new_total: int,
        assignments: list[list[int]] | None = None,
        validate_only: bool = False,
        timeout_ms: int = 0,
    ) -> None:
        while True:
            try:
                data, stat = await self._client.get(znodes.topic_path(name))
            except NoNodeError:
                raise UnknownTopicOrPartitionError(f"The topic '{name}' does not exist.") from None
            held = znodes.decode_topic_znode(name, data)
            topic_id, existing = held.topic_id, held.partitions
            if held.adding or held.removing:
                # As Kafka: new partitions could race the controller's completion of the
                # move, which rewrites this znode.
                raise ReassignmentInProgressError(
                    f"A partition reassignment is in progress for the topic '{name}'."
                )
            current = len(existing)
            check_partition_increase(name, current, new_total, assignments)
            if assignments is not None:
                replication_factor = len(existing[0]) if existing else None
                for broker_ids in assignments:
                    validate_manual_assignment(broker_ids, replication_factor, self.live_brokers)
                added = {current + i: list(ids) for i, ids in enumerate(assignments)}
            else:
                brokers = [BrokerMetadata(b.broker_id, b.rack) for b in self._cache.brokers()]
                added = assign_new_partitions(name, existing, brokers, new_total)
            if validate_only:
                return
            if topic_id is None:
                raise LeaderNotAvailableError(f"Topic {name} has no topic id yet")
            try:
                await self._client.set(
                    znodes.topic_path(name),
                    znodes.encode_topic(topic_id, {**existing, **added}),
                    stat.version,
                )
                break
            except BadVersionError:
                continue  # changed since read: check again against the new assignment
        log.info("Topic %s now has %s, new assignment %s", name, partitions(new_total), added)
        if (
            not await self._wait_for(self._has_leaders(name, topic_id, new_total), timeout_ms)
            and timeout_ms > 0
        ):
            raise RequestTimedOutError(
                f"Timed out after {timeout_ms} ms waiting for the new partitions of {name}"
            )

    # --- configs ------------------------------------------------------------------------

    async def alter_topic_configs(self, name: str, configs: dict[str, Any]) -> None:
        """The config znode, then a change notification (AdminZkClient.changeTopicConfig);
        returns once this broker's cache shows the new configs."""
        topic = self._cache.get(name)
        if topic is None:
            raise UnknownTopicOrPartitionError(f"Topic {name} does not exist")
        raw = _config_strings(configs)
        # What the watch will make of the strings written (the cache holds parsed values).
        expected = validate_topic_configs(raw)
        await self._set_or_create(
            znodes.config_entity_path("topics", name), znodes.encode_entity_config(raw)
        )
        await self._client.create(
            f"{znodes.CONFIG_CHANGES}/{znodes.CONFIG_CHANGE_PREFIX}",
            znodes.encode_config_change("topics", name),
            sequence=True,
        )

        def applied() -> bool:
            current = self._cache.get(name)
            return current is None or current.configs == expected

        # The watch brings it within a round trip; a request must not wait for ever.
        await self._wait_for(applied, CONFIG_APPLIED_WAIT_MS)


def _config_strings(configs: Mapping[str, Any]) -> dict[str, str]:
    """Parsed topic configs as their config znode holds them. No parsed value is None
    (validate_topic_configs refuses a null), so each has its string."""
    return {
        key: text for key, value in configs.items() if (text := config_to_string(value)) is not None
    }
