"""Consumer groups with aiokafka: consumers sharing partitions, rebalancing and
committing from one event loop (aiokafka's coordinator runs in the background), and
AIOKafkaAdminClient's view of the groups (it cannot delete groups).

Session timeouts are short (the broker's group.min.session.timeout.ms is lowered for
these tests) so that a vanished member is noticed in about a second.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.structs import OffsetAndMetadata

from brook.broker.groups.consumer_protocol import assigned_partitions

from .clients import create_topic, produce
from .groups import MemberProcess, broker_view, produce_spread, python_client_settings, split_evenly

pytestmark = pytest.mark.brook_config(group_min_session_timeout_ms=500)

SESSION_MS = 1500


def settings(bootstrap: str, group: str, client_id: str, **extra: Any) -> dict[str, Any]:
    return python_client_settings(bootstrap, group, client_id, SESSION_MS, **extra)


async def until(
    condition: Callable[[], Any], timeout: float = 20, what: str = "the condition"
) -> Any:
    deadline = time.monotonic() + timeout
    while not (value := condition()):
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        await asyncio.sleep(0.05)
    return value


class Member:
    """A started consumer with a task reading it (and committing each record after
    processing it, when asked), as an application runs one.

    The reading task and aiokafka's coordinator run side by side: a batch in hand when
    a rebalance starts would be processed (and committed) after the new owner, maybe
    this consumer itself, fetched the committed offsets, and read again. As aiokafka
    advises, the rebalance listener therefore waits for the batch in hand.
    """

    def __init__(self, commit: bool, listener: ConsumerRebalanceListener | None) -> None:
        self.commit = commit
        self.received: list[Any] = []
        self.task: asyncio.Task[None] | None = None
        self.processing = asyncio.Lock()
        self.listener = listener
        self.consumer: AIOKafkaConsumer

    @classmethod
    async def start(
        cls,
        bootstrap: str,
        group: str,
        client_id: str,
        topics: list[str] | None = None,
        pattern: str | None = None,
        listener: ConsumerRebalanceListener | None = None,
        commit: bool = False,
        **extra: Any,
    ) -> Member:
        member = cls(commit, listener)
        member.consumer = AIOKafkaConsumer(**settings(bootstrap, group, client_id, **extra))
        guard = BatchGuard(member)
        if pattern is not None:
            member.consumer.subscribe(pattern=pattern, listener=guard)
        else:
            member.consumer.subscribe(topics=topics, listener=guard)
        await member.consumer.start()
        member.task = asyncio.create_task(member._read())
        return member

    async def _read(self) -> None:
        while True:
            batches = await self.consumer.getmany(timeout_ms=100)
            async with self.processing:
                for tp, records in batches.items():
                    for record in records:
                        self.received.append(record)
                        if self.commit:
                            await self.consumer.commit({tp: record.offset + 1})

    @property
    def assignment(self) -> set[tuple[str, int]]:
        return {(tp.topic, tp.partition) for tp in self.consumer.assignment()}

    def check(self) -> None:
        if self.task is not None and self.task.done() and not self.task.cancelled():
            self.task.result()  # raises what the reading task raised

    async def stop(self) -> None:
        """Stop reading, then stop the consumer (a dynamic member sends LeaveGroup)."""
        self.check()
        if self.task is not None:
            self.task.cancel()
            await asyncio.gather(self.task, return_exceptions=True)
        await self.consumer.stop()


class BatchGuard(ConsumerRebalanceListener):
    """Holds a rebalance until the member's batch in hand is processed and committed,
    then passes the callbacks on to the test's own listener."""

    def __init__(self, member: Member) -> None:
        self.member = member

    async def on_partitions_revoked(self, revoked: Any) -> None:
        async with self.member.processing:
            if self.member.listener is not None:
                self.member.listener.on_partitions_revoked(revoked)

    async def on_partitions_assigned(self, assigned: Any) -> None:
        if self.member.listener is not None:
            self.member.listener.on_partitions_assigned(assigned)


class Members:
    def __init__(self, bootstrap: str) -> None:
        self.bootstrap = bootstrap
        self.open: list[Member] = []

    async def join(
        self, group: str, client_id: str, topics: list[str] | None = None, **extra: Any
    ) -> Member:
        member = await Member.start(self.bootstrap, group, client_id, topics, **extra)
        self.open.append(member)
        return member

    async def leave(self, member: Member) -> None:
        self.open.remove(member)
        await member.stop()

    async def until(self, condition: Callable[[], Any], timeout: float = 20, what: str = "") -> Any:
        def checked() -> Any:
            for member in self.open:
                member.check()
            return condition()

        return await until(checked, timeout, what or "the condition")

    async def stop_all(self) -> None:
        await asyncio.gather(*(member.stop() for member in self.open))
        self.open.clear()


def run(brook_broker: Any, scenario: Callable[[Members], Awaitable[None]]) -> None:
    """Run a scenario on a fresh event loop; whatever it started is stopped after."""

    async def main() -> None:
        members = Members(brook_broker.bootstrap)
        try:
            await scenario(members)
        finally:
            await members.stop_all()

    asyncio.run(main())


def test_three_consumers_split_six_partitions_and_take_over_from_one_that_leaves(
    brook_broker, topic_name
):
    create_topic(brook_broker.bootstrap, topic_name, partitions=6)

    async def scenario(members: Members) -> None:
        consumers = [await members.join("split", f"member-{i}", [topic_name]) for i in range(3)]
        await members.until(
            lambda: split_evenly([c.assignment for c in consumers], 6),
            what="three consumers to share six partitions",
        )
        assert [len(c.assignment) for c in consumers] == [2, 2, 2]
        view = broker_view(brook_broker.port, "split")
        assert (view.state, view.protocol) == ("Stable", "roundrobin")
        assert view.members == {f"member-{i}": c.assignment for i, c in enumerate(consumers)}

        await members.leave(consumers[0])  # LeaveGroup
        started = time.monotonic()
        await members.until(
            lambda: split_evenly([c.assignment for c in consumers[1:]], 6),
            what="the two remaining consumers to take over",
        )
        assert time.monotonic() - started < SESSION_MS / 1000
        view = await until(
            lambda: (v := broker_view(brook_broker.port, "split")).state == "Stable" and v
        )
        assert set(view.members) == {"member-1", "member-2"}

    run(brook_broker, scenario)


def test_killed_consumer_partitions_move_after_session_timeout(brook_broker, topic_name):
    create_topic(brook_broker.bootstrap, topic_name, partitions=6)
    config = settings(brook_broker.bootstrap, "killed", "doomed")

    async def scenario(members: Members) -> None:
        with MemberProcess("aiokafka", config, [topic_name]) as doomed:
            consumers = [
                await members.join("killed", f"survivor-{i}", [topic_name]) for i in range(2)
            ]
            await members.until(
                lambda: split_evenly([c.assignment for c in consumers] + [doomed.assignment], 6),
                timeout=30,
                what="two consumers and a process to share six partitions",
            )
            doomed.kill()
            killed_at = time.monotonic()
            await members.until(
                lambda: split_evenly([c.assignment for c in consumers], 6),
                what="the survivors to take the killed member's partitions",
            )
            waited = time.monotonic() - killed_at
        assert waited > SESSION_MS / 1000 * 0.6, f"partitions moved after only {waited:.2f} s"
        view = broker_view(brook_broker.port, "killed")
        assert set(view.members) == {"survivor-0", "survivor-1"}

    run(brook_broker, scenario)


def test_every_record_consumed_once_while_members_come_and_go(brook_broker, topic_name):
    bootstrap = brook_broker.bootstrap
    create_topic(bootstrap, topic_name, partitions=6)
    expected = produce_spread(bootstrap, topic_name, 6, 50)

    async def scenario(members: Members) -> None:
        options: dict[str, Any] = {"commit": True, "max_poll_records": 10}
        everyone = [
            await members.join("once", name, [topic_name], **options) for name in ("1st", "2nd")
        ]

        def seen() -> list[bytes]:
            return [r.value for member in everyone for r in member.received]

        await members.until(lambda: len(seen()) >= 100, what="a third of the records")
        everyone.append(await members.join("once", "3rd", [topic_name], **options))
        await members.until(lambda: len(seen()) >= 200, what="two thirds of the records")
        await members.leave(everyone[0])
        await members.until(lambda: len(seen()) >= len(expected), timeout=40)
        await asyncio.sleep(1)  # a record delivered twice would show up by now
        assert sorted(seen()) == sorted(expected)
        assert not [value for value, n in Counter(seen()).items() if n > 1]
        last = everyone[-1].consumer
        committed = [await last.committed(TopicPartition(topic_name, p)) for p in range(6)]
        assert committed == [50] * 6

    run(brook_broker, scenario)


async def consume_as_group(bootstrap: str, group: str, topic: str, count: int) -> list[Any]:
    """Join `group`, read `count` records committing each, check nothing more comes, leave."""
    member = await Member.start(bootstrap, group, f"{group}-reader", [topic], commit=True)
    try:
        await until(lambda: (member.check(), len(member.received) >= count)[1], timeout=30)
        await asyncio.sleep(0.5)
        assert len(member.received) == count
    finally:
        await member.stop()
    return member.received


async def committed(bootstrap: str, group: str) -> dict[tuple[str, int], tuple[int, str]]:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        offsets = await admin.list_consumer_group_offsets(group)
    finally:
        await admin.close()
    return {(tp.topic, tp.partition): (o.offset, o.metadata) for tp, o in offsets.items()}


def test_committed_offsets_survive_restart_and_sigkill(brokers, topic_name):
    overrides = {"group.min.session.timeout.ms": 500}
    broker = brokers.start(overrides)
    create_topic(broker.bootstrap, topic_name, partitions=2)
    for partition in range(2):
        records = [(None, b"%d-%d" % (partition, i)) for i in range(10)]
        produce(broker.bootstrap, topic_name, records, partition=partition)
    before = {(topic_name, 0): (4, "after four"), (topic_name, 1): (7, "after seven")}

    async def commit_first() -> None:
        member = await Member.start(broker.bootstrap, "durable", "durable-first", [topic_name])
        try:
            await until(lambda: len(member.assignment) == 2)
            await member.consumer.commit(
                {
                    TopicPartition(topic_name, p): OffsetAndMetadata(offset, metadata)
                    for (_, p), (offset, metadata) in before.items()
                }
            )
        finally:
            await member.stop()
        assert await committed(broker.bootstrap, "durable") == before

    asyncio.run(commit_first())
    broker.stop()
    broker = brokers.restart(broker, overrides)

    async def resume() -> None:
        assert await committed(broker.bootstrap, "durable") == before
        resumed = await consume_as_group(broker.bootstrap, "durable", topic_name, 9)
        assert sorted(r.value for r in resumed) == sorted(
            [b"0-%d" % i for i in range(4, 10)] + [b"1-%d" % i for i in range(7, 10)]
        )

    asyncio.run(resume())
    broker.kill()
    broker = brokers.restart(broker, overrides)

    async def after_kill() -> None:
        offsets = await committed(broker.bootstrap, "durable")
        assert {key: offset for key, (offset, _) in offsets.items()} == {
            (topic_name, 0): 10,
            (topic_name, 1): 10,
        }
        produce(broker.bootstrap, topic_name, [(None, b"after-kill")], partition=0)
        again = await consume_as_group(broker.bootstrap, "durable", topic_name, 1)
        assert [r.value for r in again] == [b"after-kill"]

    asyncio.run(after_kill())


class Recorder(ConsumerRebalanceListener):
    def __init__(self) -> None:
        self.events: list[tuple[str, set[int]]] = []

    def on_partitions_revoked(self, revoked: Any) -> None:
        self.events.append(("revoke", {tp.partition for tp in revoked}))

    def on_partitions_assigned(self, assigned: Any) -> None:
        self.events.append(("assign", {tp.partition for tp in assigned}))


def test_static_member_restarts_without_rebalance(brook_broker, topic_name):
    create_topic(brook_broker.bootstrap, topic_name, partitions=6)
    recorders = {"a": Recorder(), "b": Recorder()}

    def generation() -> int:
        return brook_broker.call(lambda: brook_broker.broker.groups.groups["static"].generation_id)

    async def scenario(members: Members) -> None:
        async def join(name: str) -> Member:
            return await members.join(
                "static",
                name,
                [topic_name],
                listener=recorders[name],
                group_instance_id=f"instance-{name}",
                session_timeout_ms=10_000,  # outlives the restart
            )

        a, b = await join("a"), await join("b")
        await members.until(lambda: split_evenly([a.assignment, b.assignment], 6))
        a_partitions, b_partitions = a.assignment, b.assignment
        before, generation_before = broker_view(brook_broker.port, "static"), generation()
        recorders["b"].events.clear()

        await members.leave(a)  # a static member sends no LeaveGroup
        assert set(broker_view(brook_broker.port, "static").members) == {"a", "b"}
        restarted = await join("a")
        await members.until(lambda: restarted.assignment == a_partitions, what="a back")
        await asyncio.sleep(1)  # time for a rebalance, had one started, to reach b
        assert recorders["b"].events == []
        assert b.assignment == b_partitions
        after = broker_view(brook_broker.port, "static")
        assert after.member_ids["a"] != before.member_ids["a"]
        assert after.member_ids["b"] == before.member_ids["b"]
        assert after.members == before.members
        assert generation() == generation_before

    run(brook_broker, scenario)


def test_two_groups_read_the_same_topic_independently(brook_broker, topic_name):
    bootstrap = brook_broker.bootstrap
    create_topic(bootstrap, topic_name, partitions=6)
    expected = produce_spread(bootstrap, topic_name, 6, 10)

    async def scenario(members: Members) -> None:
        first = await consume_as_group(bootstrap, "reader-one", topic_name, 60)
        assert sorted(r.value for r in first) == sorted(expected)
        assert await committed(bootstrap, "reader-two") == {}
        second = await consume_as_group(bootstrap, "reader-two", topic_name, 60)
        assert sorted(r.value for r in second) == sorted(expected)
        produce(bootstrap, topic_name, [(None, b"late")], partition=3)
        late = await consume_as_group(bootstrap, "reader-one", topic_name, 1)
        assert [r.value for r in late] == [b"late"]
        one, two = (
            await committed(bootstrap, "reader-one"),
            await committed(bootstrap, "reader-two"),
        )
        assert {p: o for (_, p), (o, _) in one.items()} == {
            p: 11 if p == 3 else 10 for p in range(6)
        }
        assert {o for o, _ in two.values()} == {10}

    run(brook_broker, scenario)


def test_regex_subscription_picks_up_a_new_topic(brook_broker, topic_name):
    bootstrap = brook_broker.bootstrap
    create_topic(bootstrap, f"{topic_name}-a", partitions=2)
    create_topic(bootstrap, f"other-{topic_name}")
    produce(bootstrap, f"{topic_name}-a", [(None, b"a0")], partition=0)

    async def scenario(members: Members) -> None:
        member = await members.join(
            "regex",
            "pattern",
            pattern=f"^{topic_name}-.*",
            metadata_max_age_ms=200,
            commit=True,  # so a record is not read again when the new topic rebalances
        )
        await members.until(lambda: member.received, what="the first topic's record")
        create_topic(bootstrap, f"{topic_name}-b", partitions=2)
        produce(bootstrap, f"{topic_name}-b", [(None, b"b1")], partition=1)
        produce(bootstrap, f"other-{topic_name}", [(None, b"not matched")])
        both = {(f"{topic_name}-{t}", p) for t in "ab" for p in range(2)}
        await members.until(
            lambda: len(member.received) >= 2 and member.assignment == both,
            what="the new topic's partitions and record",
        )
        assert [(r.topic, r.value) for r in member.received] == [
            (f"{topic_name}-a", b"a0"),
            (f"{topic_name}-b", b"b1"),
        ]
        assert broker_view(brook_broker.port, "regex").members["pattern"] == both

    run(brook_broker, scenario)


def test_admin_list_describe_offsets_and_lag(brook_broker, topic_name):
    bootstrap = brook_broker.bootstrap
    create_topic(bootstrap, topic_name, partitions=6)
    produce_spread(bootstrap, topic_name, 6, 10)

    async def scenario(members: Members) -> None:
        consumers = [await members.join("admin", f"admin-{i}", [topic_name]) for i in range(2)]
        await members.until(lambda: split_evenly([c.assignment for c in consumers], 6))
        for consumer in consumers:  # aiokafka commits only partitions it owns
            await consumer.consumer.commit(
                {
                    TopicPartition(topic, p): OffsetAndMetadata(p + 1, f"m{p}")
                    for topic, p in consumer.assignment
                }
            )
        admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
        await admin.start()
        try:
            assert await admin.list_consumer_groups() == [("admin", "consumer")]
            [response] = await admin.describe_consumer_groups(["admin"])
            [described] = response.groups
            error_code, group_id, state, protocol_type, protocol, members_ = described[:6]
            assert (error_code, group_id, state) == (0, "admin", "Stable")
            assert (protocol_type, protocol) == ("consumer", "roundrobin")
            # (member id, client id, client host, subscription, assignment)
            shown = {
                client_id: {
                    (topic, p)
                    for topic, partitions in assigned_partitions(assignment).items()
                    for p in partitions
                }
                for _, client_id, _, _, assignment in members_
            }
            assert shown == {f"admin-{i}": c.assignment for i, c in enumerate(consumers)}

            offsets = await admin.list_consumer_group_offsets("admin")
            assert {tp.partition: (o.offset, o.metadata) for tp, o in offsets.items()} == {
                p: (p + 1, f"m{p}") for p in range(6)
            }
            partitions = [TopicPartition(topic_name, p) for p in range(6)]
            ends = await consumers[0].consumer.end_offsets(partitions)
            lag = {tp.partition: ends[tp] - offsets[tp].offset for tp in partitions}
            assert lag == {p: 10 - (p + 1) for p in range(6)}

            await members.stop_all()
            await until(
                lambda: broker_view(brook_broker.port, "admin").state == "Empty",
                what="the group to empty",
            )
            # One group per request: aiokafka 0.14 reads DescribeGroups v3 responses
            # without authorized_operations, so a second group in one response is garbled.
            states = {}
            for group in ("admin", "never-was"):
                [response] = await admin.describe_consumer_groups([group])
                states.update({g[1]: g[2] for g in response.groups})
            assert states == {"admin": "Empty", "never-was": "Dead"}
        finally:
            await admin.close()

    run(brook_broker, scenario)
