"""aiokafka behind the group scenarios' interface.

Its members live on one event loop, run by a thread of the test's own: each member is a
started consumer with a task reading it, and aiokafka's coordinator runs beside that task
in the background. The test's calls are coroutines handed to that loop.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine, Iterator, Mapping
from contextlib import contextmanager
from typing import Any, TypeVar

from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.structs import OffsetAndMetadata

from brook.broker.groups.consumer_protocol import assigned_partitions

from ..groups import MemberProcess
from .base import (
    COOPERATIVE,
    DELETE_GROUPS,
    STATES_FILTER,
    TP,
    Described,
    GroupAdmin,
    GroupClient,
    GroupMember,
    JoinOptions,
    Received,
)
from .kafka_python import python_client_settings, tps

T = TypeVar("T")


class Loop:
    """An event loop running in a thread; `run` waits for a coroutine on it."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()

    def run(self, coroutine: Coroutine[Any, Any, T], timeout: float = 30) -> T:
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(timeout)

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()


class AiokafkaMember(GroupMember):
    """A started consumer and the task reading it (committing each record after processing
    it, when asked), as an application runs one.

    The reading task and aiokafka's coordinator run side by side: a batch in hand when a
    rebalance starts would be processed (and committed) after the new owner, maybe this
    consumer itself, fetched the committed offsets, and read again. As aiokafka advises,
    the rebalance listener therefore waits for the batch in hand.
    """

    def __init__(self, loop: Loop, client_id: str, commit_each: bool) -> None:
        super().__init__(client_id)
        self.loop = loop
        self.commit_each = commit_each
        self.processing = asyncio.Lock()
        self.consumer: AIOKafkaConsumer
        self.task: asyncio.Task[None] | None = None
        self._assignment: set[TP] = set()

    async def start(self, config: dict[str, Any], options: JoinOptions) -> None:
        self.consumer = AIOKafkaConsumer(**config)
        if options.pattern is not None:
            self.consumer.subscribe(pattern=options.pattern, listener=BatchGuard(self))
        else:
            self.consumer.subscribe(topics=list(options.topics), listener=BatchGuard(self))
        await self.consumer.start()
        self.task = asyncio.create_task(self._read())

    async def _read(self) -> None:
        while True:
            batches = await self.consumer.getmany(timeout_ms=100)
            async with self.processing:
                for tp, records in batches.items():
                    for record in records:
                        self.received.append(
                            Received(record.topic, record.partition, record.offset, record.value)
                        )
                        if self.commit_each:
                            await self.consumer.commit({tp: record.offset + 1})

    @property
    def assignment(self) -> set[TP]:
        return self._assignment

    def check(self) -> None:
        if self.task is not None and self.task.done() and not self.task.cancelled():
            self.task.result()  # raises what the reading task raised

    def positions(self) -> dict[TP, int]:
        async def read() -> dict[TP, int]:
            # Once the batch in hand is processed (and committed, if asked).
            async with self.processing:
                return {
                    (tp.topic, tp.partition): await self.consumer.position(tp)
                    for tp in self.consumer.assignment()
                }

        return self.loop.run(read())

    def commit(self, offsets: Mapping[TP, tuple[int, str]]) -> None:
        listed = {
            TopicPartition(t, p): OffsetAndMetadata(o, m) for (t, p), (o, m) in offsets.items()
        }
        self.loop.run(self.consumer.commit(listed))

    def committed(self, partitions: list[TP]) -> dict[TP, int]:
        async def fetch() -> dict[TP, int]:
            return {
                (t, p): await self.consumer.committed(TopicPartition(t, p)) for t, p in partitions
            }

        return self.loop.run(fetch())

    async def stop(self) -> None:
        """Stop reading, then stop the consumer (a dynamic member sends LeaveGroup)."""
        if self.task is not None:
            self.task.cancel()
            await asyncio.gather(self.task, return_exceptions=True)
        await self.consumer.stop()

    def leave(self) -> None:
        self.check()
        self.loop.run(self.stop())


class BatchGuard(ConsumerRebalanceListener):
    """Holds a rebalance until the member's batch in hand is processed and committed, and
    records the callbacks as the member's events."""

    def __init__(self, member: AiokafkaMember) -> None:
        self.member = member

    async def on_partitions_revoked(self, revoked: Any) -> None:
        async with self.member.processing:
            self.member.events.append(("revoke", tps(revoked)))
            self.member._assignment = set()  # aiokafka rebalances eagerly: all is revoked

    async def on_partitions_assigned(self, assigned: Any) -> None:
        self.member.events.append(("assign", tps(assigned)))
        self.member._assignment = tps(assigned)


class AiokafkaAdmin(GroupAdmin):
    def __init__(self, loop: Loop, bootstrap: str) -> None:
        self.loop = loop
        self.bootstrap = bootstrap

        async def start() -> AIOKafkaAdminClient:  # made on the loop, which it binds to
            admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
            await admin.start()
            return admin

        self.admin = loop.run(start())

    def list_groups(self, states: set[str] | None = None) -> list[str]:
        assert states is None, "AIOKafkaAdminClient filters no states"
        listed = self.loop.run(self.admin.list_consumer_groups())
        assert all(protocol_type == "consumer" for _, protocol_type in listed), listed
        return sorted(group for group, _ in listed)

    def describe(self, group: str) -> Described:
        # One group per request: aiokafka 0.14 reads DescribeGroups v3 responses without
        # authorized_operations, so a second group in one response is garbled.
        [response] = self.loop.run(self.admin.describe_consumer_groups([group]))
        [described] = response.groups
        error_code, group_id, state, protocol_type, protocol, members = described[:6]
        assert (error_code, group_id) == (0, group)
        # (member id, client id, client host, subscription, assignment)
        return Described(
            state,
            protocol_type,
            protocol,
            {
                client_id: {
                    (topic, p)
                    for topic, partitions in assigned_partitions(assignment).items()
                    for p in partitions
                }
                for _, client_id, _, _, assignment in members
            },
            {member_id for member_id, *_ in members},
        )

    def committed(self, group: str) -> dict[TP, tuple[int, str]]:
        offsets = self.loop.run(self.admin.list_consumer_group_offsets(group))
        return {(tp.topic, tp.partition): (o.offset, o.metadata) for tp, o in offsets.items()}

    def end_offsets(self, partitions: list[TP]) -> dict[TP, int]:
        # AIOKafkaAdminClient lists no offsets: a consumer outside any group does.
        async def ask() -> dict[TP, int]:
            consumer = AIOKafkaConsumer(bootstrap_servers=self.bootstrap)
            await consumer.start()
            try:
                ends = await consumer.end_offsets([TopicPartition(t, p) for t, p in partitions])
            finally:
                await consumer.stop()
            return {(tp.topic, tp.partition): offset for tp, offset in ends.items()}

        return self.loop.run(ask())

    def close(self) -> None:
        self.loop.run(self.admin.close())


class AiokafkaClient(GroupClient):
    name = "aiokafka"
    default_protocol = "roundrobin"  # aiokafka's only default assignor
    session_ms = 1500
    lacks = {
        COOPERATIVE: "aiokafka 0.14 rebalances eagerly only",
        DELETE_GROUPS: "AIOKafkaAdminClient cannot delete groups",
        STATES_FILTER: "AIOKafkaAdminClient lists groups without a states filter",
    }

    def __init__(self) -> None:
        super().__init__()
        self._loop: Loop | None = None

    @property
    def loop(self) -> Loop:
        if self._loop is None:
            self._loop = Loop()
        return self._loop

    def _join(
        self, bootstrap: str, group: str, client_id: str, options: JoinOptions
    ) -> AiokafkaMember:
        member = AiokafkaMember(self.loop, client_id, options.commit_each)
        config = python_client_settings(bootstrap, group, client_id, options)
        self.loop.run(member.start(config, options))
        return member

    def killable(self, bootstrap: str, group: str, client_id: str, topic: str) -> MemberProcess:
        config = python_client_settings(bootstrap, group, client_id, JoinOptions())
        return MemberProcess("aiokafka", config, [topic])

    @contextmanager
    def admin(self, bootstrap: str) -> Iterator[AiokafkaAdmin]:
        admin = AiokafkaAdmin(self.loop, bootstrap)
        try:
            yield admin
        finally:
            admin.close()

    def close_all(self) -> None:
        members, self.members = self.members, []
        if self._loop is None:
            return
        stops = [member.stop() for member in members if isinstance(member, AiokafkaMember)]

        async def stop_all() -> None:
            await asyncio.gather(*stops)

        self._loop.run(stop_all())

    def close(self) -> None:
        try:
            self.close_all()
        finally:
            if self._loop is not None:
                self._loop.close()
                self._loop = None
