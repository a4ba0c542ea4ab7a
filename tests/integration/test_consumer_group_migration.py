"""Classic and consumer-protocol (KIP-848) members in one group, with confluent-kafka: the
online upgrade of a classic group when a consumer-protocol member joins it, classic
members inside a consumer group, the downgrade when the last consumer-protocol member
leaves, and group.consumer.migration.policy. Every record produced along the way is read
exactly once by a group whose members commit each record they process."""

from __future__ import annotations

import datetime
from collections import Counter
from collections.abc import Iterator

import pytest
from kio.index import load_request_schema
from kio.schema.errors import ErrorCode

from brook.broker.testing import BrokerThread, wait_until
from brook.protocol.api_table import ApiKey

from .clients import create_topic
from .group_clients.base import GroupMember
from .group_clients.confluent import ConfluentClient, ConfluentConsumerProtocolClient
from .groups import broker_view, produce_spread, split_evenly
from .raw_client import RawClient, make
from .test_consumer_group_protocol import consumer_group_view

OVERRIDES = {
    "group.min.session.timeout.ms": 500,
    "group.consumer.min.session.timeout.ms": 500,
    "group.consumer.session.timeout.ms": 6000,
    "group.consumer.min.heartbeat.interval.ms": 100,
    "group.consumer.heartbeat.interval.ms": 100,
}
pytestmark = pytest.mark.brook_config(**{k.replace(".", "_"): v for k, v in OVERRIDES.items()})
PARTITIONS = 6


@pytest.fixture
def classic() -> Iterator[ConfluentClient]:
    client = ConfluentClient()
    try:
        yield client
    finally:
        client.close()


@pytest.fixture
def kip848() -> Iterator[ConfluentConsumerProtocolClient]:
    client = ConfluentConsumerProtocolClient()
    try:
        yield client
    finally:
        client.close()


def received(members: list[GroupMember]) -> list[bytes]:
    return [r.value for m in members for r in m.received]


def wait_read(members: list[GroupMember], expected: list[bytes], what: str) -> None:
    def done() -> bool:
        for member in members:
            member.check()
        return sorted(set(received(members))) == sorted(expected)

    wait_until(done, what, 40)


@pytest.mark.parametrize("cooperative", [True, False], ids=["cooperative", "eager"])
def test_a_classic_group_upgrades_and_downgrades_without_a_record_lost_or_repeated(
    brook_broker: BrokerThread,
    topic_name: str,
    classic: ConfluentClient,
    kip848: ConfluentConsumerProtocolClient,
    cooperative: bool,
) -> None:
    bootstrap, port = brook_broker.bootstrap, brook_broker.port
    create_topic(bootstrap, topic_name, partitions=PARTITIONS)
    options = {"topics": (topic_name,), "commit_each": True, "cooperative": cooperative}
    olds = [classic.join(bootstrap, "migrating", f"classic-{i}", **options) for i in range(2)]
    wait_until(
        lambda: (
            split_evenly([m.assignment for m in olds], PARTITIONS)
            and broker_view(port, "migrating").state == "Stable"
        ),
        "a classic group of two",
        30,
    )
    # Records are produced once each change has settled: a commit racing a classic
    # rebalance gets REBALANCE_IN_PROGRESS from Kafka too.
    expected = produce_spread(bootstrap, topic_name, PARTITIONS, 10, tag="a")
    wait_read(olds, expected, "the classic members to read the first records")

    # A consumer-protocol member joins: the group becomes a consumer group, its classic
    # members kept, and the three share the partitions.
    new = kip848.join(bootstrap, "migrating", "kip848", topics=(topic_name,), commit_each=True)
    everyone = [*olds, new]
    wait_until(
        lambda: split_evenly([m.assignment for m in everyone], PARTITIONS),
        "the three members to share the partitions",
        40,
    )
    view = consumer_group_view(port, "migrating")
    assert view is not None and view.state == "Stable" and len(view.members) == 3
    expected += produce_spread(bootstrap, topic_name, PARTITIONS, 10, tag="b")
    wait_read(everyone, expected, "a mixed group to read the second records")

    # The consumer-protocol member leaves: a classic group again, of the classic members.
    kip848.leave(new)
    wait_until(
        lambda: (
            split_evenly([m.assignment for m in olds], PARTITIONS)
            and broker_view(port, "migrating").state == "Stable"
            and consumer_group_view(port, "migrating") is None
        ),
        "the classic members to take everything back as a classic group",
        40,
    )
    expected += produce_spread(bootstrap, topic_name, PARTITIONS, 10, tag="c")
    wait_read(everyone, expected, "the classic group to read the last records")
    seen = received(everyone)
    assert [v for v, n in Counter(seen).items() if n > 1] == []
    assert sorted(seen) == sorted(expected)


def test_a_classic_member_joins_a_consumer_group(
    brook_broker: BrokerThread,
    topic_name: str,
    classic: ConfluentClient,
    kip848: ConfluentConsumerProtocolClient,
) -> None:
    bootstrap, port = brook_broker.bootstrap, brook_broker.port
    create_topic(bootstrap, topic_name, partitions=PARTITIONS)
    first = kip848.join(bootstrap, "mixed", "kip848", topics=(topic_name,), commit_each=True)
    wait_until(lambda: len(first.assignment) == PARTITIONS, "the first member", 30)
    second = classic.join(bootstrap, "mixed", "classic", topics=(topic_name,), commit_each=True)
    wait_until(
        lambda: split_evenly([first.assignment, second.assignment], PARTITIONS),
        "the two to share",
        40,
    )
    view = consumer_group_view(port, "mixed")
    assert view is not None and view.members == {
        "kip848": first.assignment,
        "classic": second.assignment,
    }
    # ConsumerGroupDescribe v1 tells the classic member by its type (0).
    request_type = load_request_schema(ApiKey.CONSUMER_GROUP_DESCRIBE, 1)
    with RawClient(port) as client:
        (described,) = client.request(
            request_type(group_ids=("mixed",), include_authorized_operations=False)
        ).groups
    assert {m.client_id: m.member_type for m in described.members} == {"kip848": 1, "classic": 0}
    expected = produce_spread(bootstrap, topic_name, PARTITIONS, 5)
    wait_read([first, second], expected, "every record")
    assert sorted(received([first, second])) == sorted(expected)


def heartbeat(port: int, group: str, topic: str) -> ErrorCode:
    request_type = load_request_schema(ApiKey.CONSUMER_GROUP_HEARTBEAT, 1)
    with RawClient(port) as client:
        answer = client.request(
            make(
                request_type,
                group_id=group,
                member_id="raw-kip848-member",
                member_epoch=0,
                rebalance_timeout=datetime.timedelta(seconds=30),
                subscribed_topic_names=(topic,),
                topic_partitions=(),
            )
        )
    return ErrorCode(answer.error_code)


@pytest.mark.brook_config(
    group_min_session_timeout_ms=500, group_consumer_migration_policy="downgrade"
)
def test_without_upgrade_a_classic_group_with_members_refuses_consumer_members(
    brook_broker: BrokerThread, topic_name: str, classic: ConfluentClient
) -> None:
    create_topic(brook_broker.bootstrap, topic_name, partitions=2)
    member = classic.join(brook_broker.bootstrap, "kept-classic", "c", topics=(topic_name,))
    wait_until(lambda: len(member.assignment) == 2, "the classic member", 30)
    assert heartbeat(brook_broker.port, "kept-classic", topic_name) == (
        ErrorCode.group_id_not_found
    )
    assert broker_view(brook_broker.port, "kept-classic").state == "Stable"


@pytest.mark.brook_config(
    group_min_session_timeout_ms=500,
    group_consumer_migration_policy="upgrade",
    group_consumer_min_heartbeat_interval_ms=100,
    group_consumer_heartbeat_interval_ms=100,
)
def test_without_downgrade_classic_members_stay_in_the_consumer_group(
    brook_broker: BrokerThread,
    topic_name: str,
    classic: ConfluentClient,
    kip848: ConfluentConsumerProtocolClient,
) -> None:
    bootstrap, port = brook_broker.bootstrap, brook_broker.port
    create_topic(bootstrap, topic_name, partitions=4)
    old = classic.join(bootstrap, "no-way-back", "classic", topics=(topic_name,))
    wait_until(lambda: len(old.assignment) == 4, "the classic member", 30)
    new = kip848.join(bootstrap, "no-way-back", "kip848", topics=(topic_name,))
    wait_until(lambda: split_evenly([old.assignment, new.assignment], 4), "the two to share", 40)
    kip848.leave(new)
    wait_until(lambda: len(old.assignment) == 4, "the classic member to take all back", 40)
    view = consumer_group_view(port, "no-way-back")
    assert view is not None and set(view.members) == {"classic"}
