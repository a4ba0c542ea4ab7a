"""Consumer groups with real clients: each scenario runs against every client
(confluent-kafka, kafka-python, aiokafka, kcat) through its adapter in group_clients/,
and against confluent-kafka in Kafka 4's consumer protocol (KIP-848, group.protocol=consumer).
A scenario that needs a feature a client lacks is skipped for that client, with the
reason the adapter declares.

Session timeouts are short (the broker's group.min.session.timeout.ms is lowered for
these tests) so that a vanished member is noticed within seconds. Waits end on the
broker's own state (DescribeGroups, OffsetFetch) or on what the members report.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import pytest
from kio.schema.errors import ErrorCode

from brook.broker.testing import wait_until

from .clients import create_topic, produce
from .group_clients import CLIENTS, KCAT, GroupClient
from .group_clients.base import (
    ADMIN,
    COMMITTED,
    COOPERATIVE,
    DELETE_GROUPS,
    MANUAL_COMMIT,
    RIDES_OUT_RESTART,
    STATES_FILTER,
    TP,
    GroupMember,
    Received,
)
from .group_clients.kcat import KcatClient
from .groups import (
    broker_committed,
    broker_view,
    generation,
    produce_spread,
    split_evenly,
    stored_generation,
)
from .processes import watermarks

# Kafka 4's consumer groups (KIP-848) take their session and heartbeat from the broker:
# short ones here, as the classic members ask for.
OVERRIDES = {
    "group.min.session.timeout.ms": 500,
    "group.consumer.min.session.timeout.ms": 500,
    "group.consumer.session.timeout.ms": 1500,
    "group.consumer.min.heartbeat.interval.ms": 100,
    "group.consumer.heartbeat.interval.ms": 100,
}
pytestmark = pytest.mark.brook_config(**{k.replace(".", "_"): v for k, v in OVERRIDES.items()})
# Long enough that nothing within a test's waits can be a session expiry.
LONG_SESSION_MS = 10_000
# A KIP-848 member's session is the broker's (group.consumer.session.timeout.ms): where
# the members must outlive a SIGKILL and restart of the broker (a busy CI machine took
# longer than its 1.5 s), it is long too.
RESTART_OVERRIDES = {**OVERRIDES, "group.consumer.session.timeout.ms": LONG_SESSION_MS}

T = TypeVar("T")


def client_param(client_type: type[GroupClient]) -> Any:
    marks = []
    if client_type is KcatClient:
        reason = "kcat is not installed (./test.sh installs Debian's kcat with apt-get)"
        marks.append(pytest.mark.skipif(KCAT is None, reason=reason))
    return pytest.param(client_type, id=client_type.name, marks=marks)


@pytest.fixture(params=[client_param(client_type) for client_type in CLIENTS])
def client(request: pytest.FixtureRequest) -> Iterator[GroupClient]:
    """The client of the test; the members it leaves open are closed at its end."""
    made = request.param()
    try:
        yield made
    finally:
        made.close()


def needs(client: GroupClient, *features: str) -> None:
    for feature in features:
        if feature in client.lacks:
            pytest.skip(f"{client.name} lacks {feature}: {client.lacks[feature]}")


def wait(client: GroupClient, condition: Callable[[], T], what: str, timeout: float = 20) -> T:
    """Wait for `condition`, failing at once if a member's background work failed."""
    return wait_until(condition, what, timeout, tick=client.check)


def ends_of(bootstrap: str, topic: str, partitions: int) -> dict[TP, int]:
    return {
        (topic, p): high for p, (_, high) in enumerate(watermarks(bootstrap, topic, partitions))
    }


def offsets_only(committed: dict[TP, tuple[int, str]]) -> dict[TP, int]:
    return {tp: offset for tp, (offset, _) in committed.items()}


def committed_as_seen(client: GroupClient, broker: Any, group: str) -> dict[TP, tuple[int, str]]:
    """The group's committed offsets as the client's admin lists them, or as OffsetFetch
    answers for a client without one. (confluent-kafka commits metadata with the NUL that
    ends its C string; the broker keeps the bytes it got, and librdkafka's admin reads
    them back as a C string.)"""
    if ADMIN in client.lacks:
        return broker_committed(broker.port, group)
    with client.admin(broker.bootstrap) as admin:
        return admin.committed(group)


def read_to_end(members: list[GroupMember], ends: dict[TP, int]) -> bool:
    """Every partition of `ends` owned, and read to its end by its owner: nothing more
    can be delivered (a record delivered again included) until more is produced. What a
    member committing each record has read, it has committed."""
    owned = set().union(*(m.assignment for m in members))
    return set(ends) <= owned and all(m.caught_up(ends) for m in members)


def consume_as_group(
    client: GroupClient, broker: Any, group: str, topic: str, partitions: int, count: int
) -> list[Received]:
    """Join `group`, read `count` records committing each, see that nothing more can come,
    leave, and see that all is committed."""
    ends = ends_of(broker.bootstrap, topic, partitions)
    member = client.join(
        broker.bootstrap, group, f"{group}-reader", topics=(topic,), commit_each=True
    )
    wait(
        client,
        lambda: len(member.received) >= count and read_to_end([member], ends),
        f"{count} records read",
        timeout=30,
    )
    client.leave(member)  # kcat commits on leaving what it has not committed yet
    assert len(member.received) == count, [r.value for r in member.received]
    assert offsets_only(broker_committed(broker.port, group)) == ends
    return member.received


def values(records: list[Received]) -> list[bytes]:
    return [record.value for record in records]


def test_members_split_partitions_and_take_over_from_one_that_leaves(
    brook_broker, client, topic_name
):
    bootstrap = brook_broker.bootstrap
    create_topic(bootstrap, topic_name, partitions=6)
    # Sessions far longer than the takeover may take: only a LeaveGroup can explain it.
    members = [
        client.join(
            bootstrap, "split", f"member-{i}", topics=(topic_name,), session_ms=LONG_SESSION_MS
        )
        for i in range(3)
    ]
    wait(
        client,
        lambda: split_evenly([m.assignment for m in members], 6),
        "three members to share six partitions",
    )
    assert [len(m.assignment) for m in members] == [2, 2, 2]
    # The broker holds the same assignment as the members apply.
    view = broker_view(brook_broker.port, "split")
    assert (view.state, view.protocol) == ("Stable", client.default_protocol)
    assert view.members == {m.client_id: m.assignment for m in members}

    client.leave(members[0])
    wait(
        client,
        lambda: split_evenly([m.assignment for m in members[1:]], 6),
        "the two remaining members to take over",
        timeout=LONG_SESSION_MS / 1000 * 0.8,
    )
    view = wait(
        client,
        lambda: (v := broker_view(brook_broker.port, "split")).state == "Stable" and v,
        "the group to be Stable again",
    )
    assert set(view.members) == {"member-1", "member-2"}


def test_killed_member_partitions_move_after_session_timeout(brook_broker, client, topic_name):
    bootstrap = brook_broker.bootstrap
    create_topic(bootstrap, topic_name, partitions=6)
    doomed = client.killable(bootstrap, "killed", "doomed", topic_name)
    try:
        survivors = [
            client.join(bootstrap, "killed", f"survivor-{i}", topics=(topic_name,))
            for i in range(2)
        ]
        wait(
            client,
            lambda: split_evenly([s.assignment for s in survivors] + [doomed.assignment], 6),
            "two members and a process to share six partitions",
            timeout=30,
        )
        assert "doomed" in broker_view(brook_broker.port, "killed").members
        doomed.kill()
        # No LeaveGroup came, and a dropped connection is no leave: the member stays
        # until its session times out.
        assert "doomed" in broker_view(brook_broker.port, "killed").members
        wait(
            client,
            lambda: split_evenly([s.assignment for s in survivors], 6),
            "the survivors to take the killed member's partitions",
        )
    finally:
        doomed.kill()
    view = broker_view(brook_broker.port, "killed")
    assert set(view.members) == {"survivor-0", "survivor-1"}


def test_every_record_consumed_once_while_members_come_and_go(brook_broker, client, topic_name):
    bootstrap, port = brook_broker.bootstrap, brook_broker.port
    create_topic(bootstrap, topic_name, partitions=6)
    options: dict[str, Any] = {"topics": (topic_name,), "commit_each": True, "max_poll_records": 10}
    expected = produce_spread(bootstrap, topic_name, 6, 25, tag="a")
    everyone = [client.join(bootstrap, "once", name, **options) for name in ("1st", "2nd")]

    def seen() -> list[bytes]:
        return [value for member in everyone for value in values(member.received)]

    wait(client, lambda: len(seen()) >= len(expected), "the first records")
    everyone.append(client.join(bootstrap, "once", "3rd", **options))
    wait(
        client,
        lambda: split_evenly([m.assignment for m in everyone], 6),
        "a newcomer to take its share",
    )
    expected += produce_spread(bootstrap, topic_name, 6, 25, tag="b")
    wait(client, lambda: len(seen()) >= len(expected) - 75, "records read by three members")
    # Each commits a record once processed; one that leaves, mid-stream where the client
    # reads slowly enough, hands its partitions on without a record lost or read twice.
    client.leave(everyone[0])
    wait(
        client,
        lambda: split_evenly([m.assignment for m in everyone[1:]], 6),
        "the two left to take over",
    )
    expected += produce_spread(bootstrap, topic_name, 6, 10, tag="c")
    ends = {(topic_name, p): 60 for p in range(6)}
    wait(
        client,
        lambda: len(seen()) >= len(expected) and read_to_end(everyone[1:], ends),
        "every record read",
        timeout=40,
    )
    assert sorted(seen()) == sorted(expected)
    assert not [value for value, n in Counter(seen()).items() if n > 1]
    assert [v for v in values(everyone[2].received) if v.startswith(b"c")]  # it took part
    if COMMITTED not in client.lacks:  # as a member fetches them
        assert everyone[2].committed(list(ends)) == ends
    client.close_all()  # kcat commits on leaving what it has not committed yet
    assert offsets_only(broker_committed(port, "once")) == ends


def test_committed_offsets_survive_restart_and_sigkill(brokers, client, topic_name):
    broker = brokers.start(OVERRIDES)
    create_topic(broker.bootstrap, topic_name, partitions=2)
    first = {0: 4, 1: 7}  # records before the commits
    for partition, count in first.items():
        records = [(None, b"%d-%d" % (partition, i)) for i in range(count)]
        produce(broker.bootstrap, topic_name, records, partition=partition)
    before = {(topic_name, 0): (4, "after four"), (topic_name, 1): (7, "after seven")}
    if MANUAL_COMMIT in client.lacks:
        # The group reads what there is, and commits each record it read.
        consume_as_group(client, broker, "durable", topic_name, 2, sum(first.values()))
        before = {tp: (offset, "") for tp, (offset, _) in before.items()}
    else:
        member = client.join(broker.bootstrap, "durable", "durable-first", topics=(topic_name,))
        wait(client, lambda: len(member.assignment) == 2, "the member to own both partitions")
        member.commit(before)
        client.leave(member)
    assert committed_as_seen(client, broker, "durable") == before
    rest = []
    for partition, count in first.items():
        records = [(None, b"%d-%d" % (partition, i)) for i in range(count, 10)]
        produce(broker.bootstrap, topic_name, records, partition=partition)
        rest += [value for _, value in records]

    broker.stop()
    broker = brokers.restart(broker, OVERRIDES)
    assert committed_as_seen(client, broker, "durable") == before
    # A member of the group resumes where the commits say: 6 + 3 records, no more.
    resumed = consume_as_group(client, broker, "durable", topic_name, 2, 9)
    assert sorted(values(resumed)) == sorted(rest)

    broker.kill()  # no clean shutdown: the commits are only in __consumer_offsets' log
    broker = brokers.restart(broker, OVERRIDES)
    assert offsets_only(broker_committed(broker.port, "durable")) == {
        (topic_name, 0): 10,
        (topic_name, 1): 10,
    }
    produce(broker.bootstrap, topic_name, [(None, b"after-kill")], partition=1)
    again = consume_as_group(client, broker, "durable", topic_name, 2, 1)
    assert values(again) == [b"after-kill"]


def test_cooperative_sticky_rebalances_incrementally(brook_broker, client, topic_name):
    needs(client, COOPERATIVE)
    bootstrap = brook_broker.bootstrap
    create_topic(bootstrap, topic_name, partitions=6)

    def join(name: str) -> GroupMember:
        return client.join(bootstrap, "cooperative", name, topics=(topic_name,), cooperative=True)

    def revoked(member: GroupMember, since: int) -> set[TP]:
        return set().union(*[ps for kind, ps in member.events[since:] if kind == "revoke"])

    a = join("a")
    wait(client, lambda: len(a.assignment) == 6, "a to own all six")
    assert a.events == [("assign", {(topic_name, p) for p in range(6)})]
    before = a.assignment

    mark = len(a.events)
    b = join("b")
    wait(client, lambda: split_evenly([a.assignment, b.assignment], 6), "b to take half")
    # Incremental: a gave up only what b took, and kept the rest throughout.
    assert revoked(a, mark) == b.assignment
    assert a.assignment <= before
    assert all(ps != before for kind, ps in a.events[mark:] if kind == "revoke")
    assert broker_view(brook_broker.port, "cooperative").protocol == client.cooperative_protocol

    marks = {m.client_id: len(m.events) for m in (a, b)}
    kept = {m.client_id: m.assignment for m in (a, b)}
    c = join("c")
    wait(client, lambda: split_evenly([m.assignment for m in (a, b, c)], 6), "c to join")
    for member in (a, b):
        gave = revoked(member, marks[member.client_id])
        assert gave == kept[member.client_id] - member.assignment
        assert len(gave) == 1
    assert c.assignment == revoked(a, marks["a"]) | revoked(b, marks["b"])

    # b leaves: a and c are only given b's partitions; they revoke nothing.
    marks = {m.client_id: len(m.events) for m in (a, c)}
    kept = {m.client_id: m.assignment for m in (a, c)}
    gone = b.assignment
    client.leave(b)
    wait(client, lambda: split_evenly([a.assignment, c.assignment], 6), "a and c to take over")
    for member in (a, c):
        assert revoked(member, marks[member.client_id]) == set()
        assert kept[member.client_id] <= member.assignment
    assert (a.assignment | c.assignment) - kept["a"] - kept["c"] == gone


def test_static_member_restarts_without_rebalance(brook_broker, client, topic_name):
    bootstrap, port = brook_broker.bootstrap, brook_broker.port
    create_topic(bootstrap, topic_name, partitions=6)

    def join(name: str) -> GroupMember:
        return client.join(
            bootstrap,
            "static",
            name,
            topics=(topic_name,),
            instance_id=f"instance-{name}",
            session_ms=LONG_SESSION_MS,  # outlives the restart
        )

    a, b = join("a"), join("b")
    wait(client, lambda: split_evenly([a.assignment, b.assignment], 6), "a and b to share")
    a_partitions, b_partitions, b_events = a.assignment, b.assignment, len(b.events)
    before, generation_before = broker_view(port, "static"), generation(brook_broker, "static")

    client.leave(a)  # a static member sends no LeaveGroup (KIP-345)
    view = broker_view(port, "static")
    assert (view.state, set(view.members)) == ("Stable", {"a", "b"})
    restarted = join("a")
    wait(client, lambda: restarted.assignment == a_partitions, "a back with its partitions")
    # Stable in the same generation: no rebalance started, none can reach b.
    after = broker_view(port, "static")
    assert after.state == "Stable"
    assert generation(brook_broker, "static") == generation_before
    assert b.events[b_events:] == []
    assert b.assignment == b_partitions
    assert after.member_ids["a"] != before.member_ids["a"]  # a new incarnation...
    assert after.member_ids["b"] == before.member_ids["b"]
    assert after.members == before.members  # ...with the same assignment
    assert after.instance_ids == {"a": "instance-a", "b": "instance-b"}


def test_two_groups_read_the_same_topic_independently(brook_broker, client, topic_name):
    bootstrap, port = brook_broker.bootstrap, brook_broker.port
    create_topic(bootstrap, topic_name, partitions=6)
    expected = produce_spread(bootstrap, topic_name, 6, 10)
    first = consume_as_group(client, brook_broker, "reader-one", topic_name, 6, 60)
    assert sorted(values(first)) == sorted(expected)
    # The other group has committed nothing, and reads everything too.
    assert broker_committed(port, "reader-two") == {}
    second = consume_as_group(client, brook_broker, "reader-two", topic_name, 6, 60)
    assert sorted(values(second)) == sorted(expected)
    produce(bootstrap, topic_name, [(None, b"late")], partition=3)
    late = consume_as_group(client, brook_broker, "reader-one", topic_name, 6, 1)
    assert values(late) == [b"late"]
    assert offsets_only(broker_committed(port, "reader-one")) == {
        (topic_name, p): 11 if p == 3 else 10 for p in range(6)
    }
    assert set(offsets_only(broker_committed(port, "reader-two")).values()) == {10}


def test_regex_subscription_picks_up_a_new_topic(brook_broker, client, topic_name):
    bootstrap = brook_broker.bootstrap
    create_topic(bootstrap, f"{topic_name}-a", partitions=2)
    create_topic(bootstrap, f"other-{topic_name}")
    produce(bootstrap, f"{topic_name}-a", [(None, b"a0")], partition=0)
    member = client.join(
        bootstrap,
        "regex",
        "pattern",
        pattern=f"^{topic_name}-.*",
        metadata_refresh_ms=200,
        commit_each=True,  # so a record is not read again when the new topic rebalances
    )
    wait(client, lambda: member.received, "the first topic's record")
    create_topic(bootstrap, f"{topic_name}-b", partitions=2)
    produce(bootstrap, f"{topic_name}-b", [(None, b"b1")], partition=1)
    produce(bootstrap, f"other-{topic_name}", [(None, b"not matched")])
    both = {(f"{topic_name}-{t}", p) for t in "ab" for p in range(2)}
    wait(
        client,
        lambda: len(member.received) >= 2 and member.assignment == both,
        "the new topic's partitions and record",
    )
    assert [(r.topic, r.value) for r in member.received] == [
        (f"{topic_name}-a", b"a0"),
        (f"{topic_name}-b", b"b1"),
    ]
    assert broker_view(brook_broker.port, "regex").members["pattern"] == both


def join_admin_group(client: GroupClient, brook_broker: Any, topic: str) -> list[GroupMember]:
    """Two members of group "admin" sharing six partitions of ten records each, having
    committed offset p + 1 with metadata "m<p>" for each partition p."""
    bootstrap = brook_broker.bootstrap
    create_topic(bootstrap, topic, partitions=6)
    produce_spread(bootstrap, topic, 6, 10)
    members = [client.join(bootstrap, "admin", f"admin-{i}", topics=(topic,)) for i in range(2)]
    wait(client, lambda: split_evenly([m.assignment for m in members], 6), "two to share")
    for member in members:  # aiokafka commits only partitions it owns
        member.commit({(t, p): (p + 1, f"m{p}") for t, p in member.assignment})
    return members


def test_admin_lists_describes_and_shows_offsets_and_lag(brook_broker, client, topic_name):
    needs(client, ADMIN)
    members = join_admin_group(client, brook_broker, topic_name)
    partitions = [(topic_name, p) for p in range(6)]
    with client.admin(brook_broker.bootstrap) as admin:
        assert admin.list_groups() == ["admin"]
        described = admin.describe("admin")
        assert (described.state, described.protocol_type, described.protocol) == (
            "Stable",
            "consumer",
            client.default_protocol,
        )
        assert described.members == {m.client_id: m.assignment for m in members}
        view = broker_view(brook_broker.port, "admin")
        assert described.member_ids == set(view.member_ids.values())
        own_ids = {m.member_id() for m in members}
        if None not in own_ids:  # where the client tells its members their ids
            assert described.member_ids == own_ids

        offsets = admin.committed("admin")
        assert offsets == {(topic_name, p): (p + 1, f"m{p}") for p in range(6)}
        ends = admin.end_offsets(partitions)
        lag = {tp: ends[tp] - offsets[tp][0] for tp in partitions}
        assert lag == {(topic_name, p): 10 - (p + 1) for p in range(6)}
        assert admin.committed("reader-none") == {}

        client.close_all()
        wait(client, lambda: admin.describe("admin").state == "Empty", "the group to empty")
        assert admin.list_groups() == ["admin"]
        assert admin.committed("admin") == offsets  # an empty group keeps its offsets
        assert admin.describe("never-was").state == "Dead"


def test_admin_filters_by_state_and_deletes_only_empty_groups(brook_broker, client, topic_name):
    needs(client, STATES_FILTER, DELETE_GROUPS)
    join_admin_group(client, brook_broker, topic_name)
    with client.admin(brook_broker.bootstrap) as admin:
        assert admin.list_groups({"Stable"}) == ["admin"]
        assert admin.list_groups({"Empty"}) == []
        assert admin.delete("admin") == ErrorCode.non_empty_group
        assert admin.describe("admin").state == "Stable"

        client.close_all()
        wait(client, lambda: admin.list_groups({"Empty"}), "the group to empty")
        assert admin.list_groups({"Empty"}) == ["admin"]
        assert admin.list_groups({"Stable"}) == []
        assert admin.delete("admin") == ErrorCode.none
        assert admin.list_groups() == []
        assert admin.committed("admin") == {}
        assert admin.delete("admin") == ErrorCode.group_id_not_found
        assert admin.describe("admin").state == "Dead"


def test_live_group_carries_on_across_a_broker_sigkill(brokers, client, topic_name):
    """Group metadata is in __consumer_offsets too: after a SIGKILL and restart the
    coordinator knows the members and their generation, so they carry on (consume,
    commit) without rejoining."""
    needs(client, RIDES_OUT_RESTART)
    broker = brokers.start(RESTART_OVERRIDES)
    create_topic(broker.bootstrap, topic_name, partitions=4)
    members = [
        client.join(
            broker.bootstrap,
            "live",
            f"live-{i}",
            topics=(topic_name,),
            commit_each=True,
            session_ms=6000,  # outlives the restart
        )
        for i in range(2)
    ]
    wait(client, lambda: split_evenly([m.assignment for m in members], 4), "two to share")
    before = broker_view(broker.port, "live")
    assignments = [m.assignment for m in members]
    stored = stored_generation(broker.data_dir, "live")

    broker.kill()
    broker = brokers.restart(broker, RESTART_OVERRIDES)
    assert broker_view(broker.port, "live") == before  # loaded: same members, Stable
    for p in range(4):
        produce(broker.bootstrap, topic_name, [(None, b"p%d" % p)], partition=p)
    ends = {(topic_name, p): 1 for p in range(4)}
    wait(
        client,
        lambda: read_to_end(members, ends),
        "records after the restart read",
        timeout=30,
    )
    got = [value for member in members for value in values(member.received)]
    assert sorted(got) == [b"p0", b"p1", b"p2", b"p3"]
    # The same members, the same generation's assignment: nobody had to rejoin.
    assert [m.assignment for m in members] == assignments
    assert broker_view(broker.port, "live").member_ids == before.member_ids
    assert stored_generation(broker.data_dir, "live") == stored > 0
    assert offsets_only(broker_committed(broker.port, "live")) == ends
