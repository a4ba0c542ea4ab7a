"""Client quotas: AlterClientQuotas / DescribeClientQuotas on the wire, Kafka's precedence
of user, client-id and (user, client-id) entities, and real clients throttled to their
byte-rate quotas, checked against what the broker itself measured and answered."""

from __future__ import annotations

import json
import select
import time
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kio.schema.alter_client_quotas.v1.request import (
    AlterClientQuotasRequest,
    EntityData,
    EntryData,
    OpData,
)
from kio.schema.describe_client_quotas.v1.request import (
    ComponentData,
    DescribeClientQuotasRequest,
)
from kio.static.primitive import i8

from brook.broker.client import BlockingClient
from brook.broker.quotas.entities import sanitize
from brook.broker.quotas.store import CLIENT_QUOTAS_FILE
from brook.protocol.errors import ErrorCode
from tests.crafted_batches import batch, record
from tests.integration.cli import assert_one_line_error, brook
from tests.observability.conftest import Admin

from .conftest import PLAIN_USERS, SecureBroker

Entity = list[tuple[str, str | None]]
ADMIN_TOKEN = "quota-metrics"


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory, pki: Any) -> Iterator[SecureBroker]:
    # A secured broker's /metrics asks for credentials: the operator's token.
    extra = {"admin.listener": "http://127.0.0.1:0", "admin.auth.token": ADMIN_TOKEN}
    secure = SecureBroker(tmp_path_factory.mktemp("quotas"), pki, extra).start()
    try:
        yield secure
    finally:
        secure.stop()


def alter(
    broker: SecureBroker, entity: Entity, ops: dict[str, float | None], validate_only=False
) -> tuple[ErrorCode, str | None]:
    return alter_at(broker.ports["PLAINTEXT"], entity, ops, validate_only)


def alter_at(
    port: int, entity: Entity, ops: dict[str, float | None], validate_only=False
) -> tuple[ErrorCode, str | None]:
    """AlterClientQuotas of one entity through the broker listening on `port`."""
    request = AlterClientQuotasRequest(
        entries=(
            EntryData(
                entity=tuple(EntityData(entity_type=t, entity_name=n) for t, n in entity),
                ops=tuple(
                    OpData(key=key, value=value or 0.0, remove=value is None)
                    for key, value in ops.items()
                ),
            ),
        ),
        validate_only=validate_only,
    )
    with BlockingClient("127.0.0.1", port, "quota-admin") as client:
        response = client.request(request)
    (entry,) = response.entries
    return entry.error_code, entry.error_message


def describe(
    broker: SecureBroker, components: list[tuple[str, int, str | None]], strict: bool = False
) -> Any:
    request = DescribeClientQuotasRequest(
        components=tuple(
            ComponentData(entity_type=t, match_type=i8(m), match=n) for t, m, n in components
        ),
        strict=strict,
    )
    with BlockingClient("127.0.0.1", broker.ports["PLAINTEXT"], "quota-admin") as client:
        return client.request(request)


def described(broker: SecureBroker, components, strict=False) -> dict[tuple, dict[str, float]]:
    response = describe(broker, components, strict)
    assert response.error_code == ErrorCode.none, response.error_message
    return {
        tuple((e.entity_type, e.entity_name) for e in entry.entity): {
            v.key: v.value for v in entry.values
        }
        for entry in response.entries
    }


def quota_of(broker: SecureBroker, kind: str, user: str, client_id: str) -> float | None:
    """The quota the broker applies to a request of (user, client id)."""
    manager = getattr(broker.broker.services.quotas, kind)
    found = broker.call(lambda: manager.quota(sanitize(user), sanitize(client_id)))
    return None if found is None else found[1]


def test_alter_then_describe_as_kafka_answers(broker):
    entity = [("user", "dora"), ("client-id", "app-1")]
    assert alter(broker, entity, {"producer_byte_rate": 2048, "request_percentage": 12.5}) == (
        ErrorCode.none,
        None,
    )
    assert described(broker, [("user", 0, "dora")]) == {
        (("user", "dora"), ("client-id", "app-1")): {
            "producer_byte_rate": 2048.0,
            "request_percentage": 12.5,
        }
    }
    # Strict: only entities with no other types than those named.
    assert described(broker, [("user", 0, "dora")], strict=True) == {}
    assert alter(broker, entity, {"producer_byte_rate": None}) == (ErrorCode.none, None)
    assert described(broker, [("client-id", 0, "app-1")]) == {
        (("user", "dora"), ("client-id", "app-1")): {"request_percentage": 12.5}
    }
    # validate_only stores nothing.
    assert alter(broker, [("user", "dora")], {"consumer_byte_rate": 100}, True)[0] == 0
    assert described(broker, [("user", 0, "dora")], strict=True) == {}
    assert alter(broker, entity, {"request_percentage": None}) == (ErrorCode.none, None)
    assert described(broker, [("user", 0, "dora")]) == {}
    # As Kafka: removing a key that is not set (or not a quota key) changes nothing.
    assert alter(broker, entity, {"no_such_quota": None}) == (ErrorCode.none, None)
    assert described(broker, [("user", 0, "dora")]) == {}


def test_default_entities_are_null_names(broker):
    try:
        assert alter(broker, [("user", None)], {"consumer_byte_rate": 4096})[0] == 0
        assert described(broker, [("user", 1, None)]) == {
            (("user", None),): {"consumer_byte_rate": 4096.0}
        }
        # "Any name" (match type 2) includes the default.
        assert (("user", None),) in described(broker, [("user", 2, None)])
    finally:
        alter(broker, [("user", None)], {"consumer_byte_rate": None})
    assert described(broker, [("user", 1, None)]) == {}


@pytest.mark.parametrize(
    ("entity", "ops", "message"),
    [
        ([("user", "x")], {"no_such_quota": 1.0}, "Invalid configuration key no_such_quota"),
        ([("user", "x")], {"producer_byte_rate": 0.0}, "Quota producer_byte_rate must be"),
        ([("user", "x")], {"producer_byte_rate": -5.0}, "must be greater than 0"),
        ([("user", "x")], {"producer_byte_rate": 10.5}, "cannot be a fractional value"),
        ([], {"producer_byte_rate": 10.0}, "Invalid empty client quota entity"),
        ([("user", "x"), ("user", "y")], {"producer_byte_rate": 1.0}, "duplicate entity"),
        ([("group", "x")], {"producer_byte_rate": 1.0}, "Unhandled client quota entity type"),
        ([("user", "")], {"producer_byte_rate": 1.0}, "Empty user not supported"),
        ([("ip", "1.2.3.4"), ("user", "x")], {"producer_byte_rate": 1.0}, "IP entity"),
        (
            [("ip", "no-such-address")],
            {"connection_creation_rate": 5.0},
            "no-such-address is not a valid IP or resolvable host.",
        ),
        (
            [("ip", "10.9.9.9")],
            {"producer_byte_rate": 5.0},
            "Invalid configuration key producer_byte_rate",
        ),
        (
            [("user", "x")],
            {"connection_creation_rate": 5.0},
            "Invalid configuration key connection_creation_rate",
        ),
        ([("ip", "10.9.9.9")], {"connection_creation_rate": 2.5}, "cannot be a fractional"),
        ([("ip", None)], {"connection_creation_rate": 2.0**31}, "too large for an INT"),
    ],
)
def test_bad_alterations_are_refused_and_change_nothing(broker, entity, ops, message):
    error, text = alter(broker, entity, ops)
    assert error == ErrorCode.invalid_request
    assert message in text
    assert described(broker, [("user", 0, "x")]) == {}
    assert described(broker, [("ip", 2, None)]) == {}


def test_bad_describe_filters(broker):
    duplicate = describe(broker, [("user", 2, None), ("user", 1, None)])
    assert duplicate.error_code == ErrorCode.invalid_request
    assert "Duplicate user filter component" in duplicate.error_message
    custom = describe(broker, [("group", 2, None)])
    assert custom.error_code == ErrorCode.invalid_request
    assert custom.entries is None
    mixed = describe(broker, [("ip", 2, None), ("user", 2, None)])
    assert mixed.error_code == ErrorCode.invalid_request
    assert "IP filter component should not be used with User or ClientId" in mixed.error_message


def _api_versions_answered(port: int) -> bool:
    """Whether a new connection is answered (else it is closed without an answer)."""
    from kio.schema.api_versions.v3.request import ApiVersionsRequest

    from brook.broker.client import ConnectionClosedError

    try:
        with BlockingClient("127.0.0.1", port, "connection-rate") as client:
            request = ApiVersionsRequest(client_software_name="test", client_software_version="1")
            return client.request(request).error_code == ErrorCode.none
    except (ConnectionClosedError, ConnectionError):
        return False


def test_connections_over_an_ips_connection_creation_rate_are_closed(tmp_path):
    """KIP-612 on a broker of its own (every test connects from 127.0.0.1): 2 connections
    a second, measured over at least 10 s at first, lets about 20 in; the next are held
    unread and closed. Other addresses' quotas do not apply; the inter-broker listener
    is exempt (the quotas are altered through it); removing the quota lets all in."""
    from brook.broker.testing import BrokerThread, free_port

    port, internal = free_port(), free_port()
    listeners = f"PLAINTEXT://127.0.0.1:{port},INTERNAL://127.0.0.1:{internal}"
    overrides = {
        "listeners": listeners,
        "advertised.listeners": listeners,
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,INTERNAL:PLAINTEXT",
        "inter.broker.listener.name": "INTERNAL",
    }
    thread = BrokerThread(tmp_path, overrides, port=port).start()

    def alter_here(entity: Entity, ops: dict[str, float | None]) -> ErrorCode:
        return alter_at(internal, entity, ops)[0]  # the inter-broker listener: exempt

    try:
        # Another address's quota: 127.0.0.1 is not held to it.
        assert alter_here([("ip", "10.1.2.3")], {"connection_creation_rate": 1}) == 0
        assert all(_api_versions_answered(port) for _ in range(25))
        assert alter_here([("ip", "127.0.0.1")], {"connection_creation_rate": 2}) == 0
        outcomes = [_api_versions_answered(port) for _ in range(30)]
        served = outcomes.count(True)
        assert 0 < served <= 20, outcomes
        assert outcomes[served:] == [False] * (30 - served)  # held and closed from then on
        connections = thread.broker.services.quotas.connections
        assert thread.call(lambda: connections.throttled["127.0.0.1"]) == 30 - served
        assert _api_versions_answered(internal)  # the inter-broker listener is exempt
        # The default IP entity, and a removal: the address's own quota goes, the default
        # (100/s) applies, and connections are served again.
        assert alter_here([("ip", None)], {"connection_creation_rate": 100}) == 0
        assert alter_here([("ip", "127.0.0.1")], {"connection_creation_rate": None}) == 0
        assert _api_versions_answered(port)
    finally:
        thread.stop()


def test_precedence_follows_kafka(broker):
    user, client = "alice", "prec-client"
    levels = [
        ([("client-id", None)], 8.0),
        ([("client-id", client)], 7.0),
        ([("user", None)], 6.0),
        ([("user", None), ("client-id", None)], 5.0),
        ([("user", None), ("client-id", client)], 4.0),
        ([("user", user)], 3.0),
        ([("user", user), ("client-id", None)], 2.0),
        ([("user", user), ("client-id", client)], 1.0),
    ]
    try:
        # Set from the least specific up: each more specific level takes over.
        for entity, value in levels:
            assert alter(broker, entity, {"request_percentage": value})[0] == 0
            assert quota_of(broker, "request", user, client) == value
        # Removed from the most specific down: the next level applies again.
        for index in range(len(levels) - 1, 0, -1):
            entity, below = levels[index][0], levels[index - 1][1]
            assert alter(broker, entity, {"request_percentage": None})[0] == 0
            assert quota_of(broker, "request", user, client) == below
        # Each quota type resolves on its own.
        assert quota_of(broker, "produce", user, client) is None
    finally:
        for entity, _ in levels:
            alter(broker, entity, {"request_percentage": None})
    assert quota_of(broker, "request", user, client) is None


def test_quotas_are_kept_in_the_first_log_dir(broker):
    try:
        assert alter(broker, [("client-id", "kept")], {"producer_byte_rate": 777})[0] == 0
        path = broker.broker.config.log_dirs[0] / CLIENT_QUOTAS_FILE
        stored = json.loads(path.read_text())
        assert stored["entities"]["clients/kept"] == {"producer_byte_rate": "777"}
    finally:
        alter(broker, [("client-id", "kept")], {"producer_byte_rate": None})


def _topic(broker: SecureBroker, name: str) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap("PLAINTEXT")})
    for future in admin.create_topics([NewTopic(name, 1, 1)]).values():
        future.result(15)


def _produce(broker: SecureBroker, topic: str, client_id: str, total: int, extra=None):
    """Produce `total` bytes in 10 KiB records; the throttle times the client was told."""
    throttles: list[int] = []
    config = {
        "bootstrap.servers": broker.bootstrap("PLAINTEXT"),
        "client.id": client_id,
        "linger.ms": 5,
        # A request per record, as small as Java's default batches: a rate measured
        # after any of them is over the quota by one request at most.
        "batch.size": 16384,
        "throttle_cb": lambda event: throttles.append(int(event.throttle_time * 1000)),
        **(extra or {}),
    }
    producer = Producer(config)
    value = b"x" * 10240
    for _ in range(total // len(value)):
        producer.produce(topic, value)
        producer.poll(0)
    assert producer.flush(60) == 0
    producer.poll(0)
    return throttles


def test_producer_over_its_quota_is_throttled_to_it(broker):
    topic, client_id, quota = "quota-produce", "throttled-producer", 100_000
    _topic(broker, topic)
    try:
        assert alter(broker, [("client-id", client_id)], {"producer_byte_rate": quota})[0] == 0
        # The window counts as 10 s at first (11 samples of 1 s): 1 MB passes, then the
        # broker throttles.
        throttles = _produce(broker, topic, client_id, 1_400_000)
        assert throttles and max(throttles) > 0
        manager = broker.broker.services.quotas.produce
        tags = ("", client_id)
        answered = broker.call(lambda: list(manager.throttles[tags]))
        assert answered[0] > 0 and answered[1] > 0
        # The client waited as told, so the rate the broker measured is held near the
        # quota (a batch above it at most).
        rate = broker.call(lambda: manager.rates[tags].measure(time.monotonic() * 1000))
        assert rate <= quota * 1.05, rate
        # /metrics: Kafka's quota metrics of the sensor (type=Produce).
        metrics = Admin(broker.thread, token=ADMIN_TOKEN).metrics()
        labels = {"user": "", "client_id": client_id}
        assert metrics.get("kafka_server_produce_throttle_time", **labels) > 0
        assert 0 < metrics.get("kafka_server_produce_byte_rate", **labels) <= quota * 1.05
        # Another client, without quota, is not throttled.
        assert _produce(broker, topic, "free-producer", 1_400_000) == []
        assert ("", "free-producer") not in broker.call(lambda: dict(manager.throttles))
    finally:
        alter(broker, [("client-id", client_id)], {"producer_byte_rate": None})


def test_consumer_over_its_quota_is_throttled_to_it(broker):
    topic, client_id, quota = "quota-fetch", "throttled-consumer", 100_000
    _topic(broker, topic)
    _produce(broker, topic, "filler", 1_300_000)
    throttles: list[int] = []
    try:
        assert alter(broker, [("client-id", client_id)], {"consumer_byte_rate": quota})[0] == 0
        consumer = Consumer(
            {
                "bootstrap.servers": broker.bootstrap("PLAINTEXT"),
                "client.id": client_id,
                "group.id": "quota-fetchers",
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
                "fetch.max.bytes": 16384,
                "message.max.bytes": 16384,
                "max.partition.fetch.bytes": 16384,
                "throttle_cb": lambda event: throttles.append(int(event.throttle_time * 1000)),
            }
        )
        consumer.assign([TopicPartition(topic, 0, 0)])
        received = 0
        while received < 1_300_000 // 10240:
            message = consumer.poll(30)
            assert message is not None and message.error() is None
            received += 1
        consumer.close()
        assert throttles and max(throttles) > 0
        manager = broker.broker.services.quotas.fetch
        tags = ("", client_id)
        assert broker.call(lambda: manager.throttles[tags][1]) > 0
        rate = broker.call(lambda: manager.rates[tags].measure(time.monotonic() * 1000))
        assert rate <= quota * 1.05, rate
    finally:
        alter(broker, [("client-id", client_id)], {"consumer_byte_rate": None})


def test_one_fetch_carries_no_more_than_the_quota_allows_over_its_windows(broker):
    """Kafka caps a fetch by the consumer's quota times all but one windows (here 2 kB/s
    over 10 s): one response cannot overrun the quota however much the client asks for."""
    from tests.integration.raw_client import fetch_request

    topic, client_id, quota = "quota-capped", "capped-fetcher", 2_000
    _topic(broker, topic)
    _produce(broker, topic, "filler", 200_000)  # 10 KiB records
    request = fetch_request(topic, max_bytes=50_000_000)

    def fetched(client_id: str) -> int:
        host, port = broker.bootstrap("PLAINTEXT").split(":")
        with BlockingClient(host, int(port), client_id) as client:
            (partition,) = client.request(request).responses[0].partitions
        assert partition.error_code == ErrorCode.none
        return len(partition.records or b"")

    try:
        assert alter(broker, [("client-id", client_id)], {"consumer_byte_rate": quota})[0] == 0
        capped = fetched(client_id)
        assert 10_240 < capped <= quota * 10  # at least a batch, at most the windows' worth
        assert fetched("uncapped-fetcher") > 190_000
    finally:
        alter(broker, [("client-id", client_id)], {"consumer_byte_rate": None})


def _as_client(broker: SecureBroker, client_id: str, request: Any) -> Any:
    """One request on a connection of its own (a throttled one is muted a while)."""
    with BlockingClient("127.0.0.1", broker.ports["PLAINTEXT"], client_id) as client:
        return client.request(request)


def test_topic_changes_over_the_controller_mutation_rate(broker):
    """KIP-599: 1 partition/s, a burst of 11 (11 windows of 1 s). Strict versions are
    refused THROTTLING_QUOTA_EXCEEDED once the credits are spent; older ones (librdkafka's
    CreateTopics) go through, throttled."""
    import datetime

    from kio.schema.create_partitions.v3 import request as partitions3
    from kio.schema.create_topics.v7 import request as create7
    from kio.schema.delete_topics.v6 import request as delete6

    client_id = "mutator"
    timeout = datetime.timedelta(seconds=15)

    def create(*topics: tuple[str, int]) -> Any:
        request = create7.CreateTopicsRequest(
            topics=tuple(
                create7.CreatableTopic(
                    name=name,
                    num_partitions=count,
                    replication_factor=1,
                    assignments=(),
                    configs=(),
                )
                for name, count in topics
            ),
            timeout=timeout,
            validate_only=False,
        )
        return _as_client(broker, client_id, request)

    def existing() -> set[str]:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap("PLAINTEXT")})
        return set(admin.list_topics(timeout=15).topics)

    try:
        assert alter(broker, [("client-id", client_id)], {"controller_mutation_rate": 1})[0] == 0
        assert quota_of(broker, "mutations", "", client_id) == 1
        # 10 of the 11 credits, then 5 more: allowed, as it starts with credits left;
        # then none left: refused, and the response says how long until there are.
        answer = create(("mutation-a", 10), ("mutation-b", 5), ("mutation-c", 1))
        errors = {t.name: t.error_code for t in answer.topics}
        assert errors == {
            "mutation-a": ErrorCode.none,
            "mutation-b": ErrorCode.none,
            "mutation-c": ErrorCode.throttling_quota_exceeded,
        }
        assert answer.topics[2].error_message == "The throttling quota has been exceeded."
        assert 3_000 < answer.throttle_time.total_seconds() * 1000 <= 4_000
        assert {"mutation-a", "mutation-b"} <= existing()
        assert "mutation-c" not in existing()
        # DeleteTopics v6 and CreatePartitions v3 are strict too.
        deleted = _as_client(
            broker,
            client_id,
            delete6.DeleteTopicsRequest(
                topics=(delete6.DeleteTopicState(name="mutation-a", topic_id=None),),
                timeout=timeout,
            ),
        )
        assert deleted.responses[0].error_code == ErrorCode.throttling_quota_exceeded
        grown = _as_client(
            broker,
            client_id,
            partitions3.CreatePartitionsRequest(
                topics=(
                    partitions3.CreatePartitionsTopic(name="mutation-b", count=6, assignments=None),
                ),
                timeout=timeout,
                validate_only=False,
            ),
        )
        assert grown.results[0].error_code == ErrorCode.throttling_quota_exceeded
        assert "mutation-a" in existing()
        # Another client id has its credits of its own... none: no quota applies to it.
        other = _as_client(
            broker,
            "unlimited-mutator",
            create7.CreateTopicsRequest(
                topics=(
                    create7.CreatableTopic(
                        name="mutation-d",
                        num_partitions=20,
                        replication_factor=1,
                        assignments=(),
                        configs=(),
                    ),
                ),
                timeout=timeout,
                validate_only=False,
            ),
        )
        assert other.topics[0].error_code == ErrorCode.none
        assert other.throttle_time.total_seconds() == 0
        # librdkafka's CreateTopics (v4): permissive, created and throttled.
        throttles: list[float] = []
        admin = AdminClient(
            {
                "bootstrap.servers": broker.bootstrap("PLAINTEXT"),
                "client.id": client_id,
                "throttle_cb": lambda event: throttles.append(event.throttle_time),
            }
        )
        admin.create_topics([NewTopic("mutation-e", 2, 1)])["mutation-e"].result(15)
        admin.poll(1)
        assert "mutation-e" in existing()
        assert throttles and max(throttles) > 0
    finally:
        alter(broker, [("client-id", client_id)], {"controller_mutation_rate": None})


def test_user_quota_over_sasl_is_shared_by_the_users_clients(broker):
    from kafka import KafkaProducer

    topic, quota = "quota-user", 100_000
    _topic(broker, topic)
    # A quota of the user alone: its sensor is the user's, whatever the client id.
    try:
        assert alter(broker, [("user", "alice")], {"producer_byte_rate": quota})[0] == 0
        producer = KafkaProducer(
            bootstrap_servers=broker.bootstrap("SASL_PLAINTEXT"),
            security_protocol="SASL_PLAINTEXT",
            sasl_mechanism="PLAIN",
            sasl_plain_username="alice",
            sasl_plain_password=PLAIN_USERS["alice"],
            client_id="alice-app",
            batch_size=16384,
            linger_ms=5,
        )
        value = b"y" * 10240
        for _ in range(1_300_000 // len(value)):
            producer.send(topic, value)
        producer.flush(60)
        # kafka-python keeps the throttle times it was told per connection.
        told = [group.get("throttle-time-max", 0) for group in producer.metrics().values()]
        producer.close()
        assert max(told) > 0
        manager = broker.broker.services.quotas.produce
        assert broker.call(lambda: manager.throttles[("alice", "")][1]) > 0
        rate = broker.call(lambda: manager.rates[("alice", "")].measure(time.monotonic() * 1000))
        assert rate <= quota * 1.05, rate
    finally:
        alter(broker, [("user", "alice")], {"producer_byte_rate": None})


def test_brook_configs_manages_quotas_beside_scram_credentials(broker):
    bootstrap = broker.bootstrap("PLAINTEXT")
    configs = ("configs", "--bootstrap-server", bootstrap)
    try:
        added = brook(
            *configs, "--alter", "--entity-type", "users", "--entity-name", "frank",
            "--add-config",
            "producer_byte_rate=1024,SCRAM-SHA-256=[password=frank-secret],request_percentage=50",
        )  # fmt: skip
        assert added.returncode == 0, added.stderr
        assert added.lines == ["Completed updating config for user frank."]
        pair = brook(
            *configs, "--alter", "--entity-type", "users", "--entity-name", "frank",
            "--entity-type", "clients", "--entity-name", "app", "--add-config",
            "consumer_byte_rate=4096",
        )  # fmt: skip
        assert pair.returncode == 0, pair.stderr
        default = brook(
            *configs, "--alter", "--entity-type", "clients", "--entity-default",
            "--add-config", "producer_byte_rate=2048",
        )  # fmt: skip
        assert default.returncode == 0, default.stderr
        assert quota_of(broker, "produce", "nobody", "any-client") == 2048
        assert quota_of(broker, "fetch", "frank", "app") == 4096
        described = brook(
            *configs, "--describe", "--entity-type", "users", "--entity-name", "frank"
        )
        assert described.lines == [
            "Quota configs for user-principal 'frank' are producer_byte_rate=1024.0,"
            " request_percentage=50.0",
            "SCRAM credential configs for user-principal 'frank' are SCRAM-SHA-256=iterations=4096",
        ]
        clients = brook(*configs, "--describe", "--entity-type", "clients")
        assert clients.lines == [
            "Quota configs for the default client-id are producer_byte_rate=2048.0"
        ]
        both = brook(
            *configs, "--describe", "--entity-type", "users", "--entity-name", "frank",
            "--entity-type", "clients", "--entity-name", "app",
        )  # fmt: skip
        assert both.lines == [
            "Quota configs for user-principal 'frank', client-id 'app' are"
            " consumer_byte_rate=4096.0"
        ]
        bad = brook(
            *configs, "--alter", "--entity-type", "clients", "--entity-name", "app",
            "--add-config", "producer_byte_rate=1.5",
        )  # fmt: skip
        assert bad.returncode != 0
        assert "INVALID_REQUEST: producer_byte_rate cannot be a fractional value." in bad.stderr
        removed = brook(
            *configs, "--alter", "--entity-type", "users", "--entity-name", "frank",
            "--delete-config", "producer_byte_rate,request_percentage",
        )  # fmt: skip
        assert removed.returncode == 0, removed.stderr
        assert quota_of(broker, "produce", "frank", "x") == 2048  # the client default now
    finally:
        alter(broker, [("client-id", None)], {"producer_byte_rate": None})
        alter(broker, [("user", "frank"), ("client-id", "app")], {"consumer_byte_rate": None})


def _produce_v(version: int, topic: str, client_id: str, size: int) -> Any:
    """A Produce request of one batch of `size` value bytes, at `version`."""
    import datetime
    import importlib

    schema = importlib.import_module(f"kio.schema.produce.v{version}.request")
    now = int(time.time() * 1000)
    body = record(value=b"v" * size)
    return schema.ProduceRequest(
        transactional_id=None,
        acks=1,
        timeout=datetime.timedelta(seconds=5),
        topic_data=(
            schema.TopicProduceData(
                name=topic,
                partition_data=(
                    schema.PartitionProduceData(
                        index=0,
                        records=batch(body, 1, base_timestamp=now, max_timestamp=now),
                    ),
                ),
            ),
        ),
    )


def _muted(broker: SecureBroker, client: BlockingClient) -> bool:
    """Whether the broker reads no request of this client's connection now."""
    host, port = client.sock.getsockname()[:2]
    peer = f"{host}:{port}"
    return broker.call(
        lambda: any(c.peer == peer and c.in_flight is not None for c in broker.broker.connections)
    )


@pytest.mark.parametrize("version", [5, 7])
def test_throttle_before_and_after_kip_219(broker, version):
    """Produce v7 (KIP-219): the response goes out at once with throttle_time_ms and the
    connection is muted. Produce v5: the response itself is held back."""
    topic, client_id, quota = f"quota-v{version}", f"old-and-new-{version}", 10_000
    _topic(broker, topic)
    manager = broker.broker.services.quotas.produce
    tags = ("", client_id)
    try:
        assert alter(broker, [("client-id", client_id)], {"producer_byte_rate": quota})[0] == 0
        with BlockingClient("127.0.0.1", broker.ports["PLAINTEXT"], client_id) as client:
            # 110 KB over a 10 s window at 10 KB/s: about a second's throttle.
            client.send(_produce_v(version, topic, client_id, 110_000))
            until = time.monotonic() + 15
            while not broker.call(lambda: manager.throttles.get(tags, [0, 0])[1]):
                assert time.monotonic() < until
                time.sleep(0.01)
            if version >= 6:
                response = client.receive(response_type_of_produce(version))
                assert _muted(broker, client)
            else:
                # Throttled, and the answer not yet sent: it waits out the throttle.
                assert not select.select([client.sock], [], [], 0)[0]
                assert _muted(broker, client)
                response = client.receive(response_type_of_produce(version))
            assert response.throttle_time.total_seconds() > 0
            assert response.responses[0].partition_responses[0].error_code == ErrorCode.none
    finally:
        alter(broker, [("client-id", client_id)], {"producer_byte_rate": None})


def response_type_of_produce(version: int) -> Any:
    import importlib

    return importlib.import_module(f"kio.schema.produce.v{version}.response").ProduceResponse


def test_acls_guard_quotas_as_configs_of_the_cluster(tmp_path):
    from brook.broker.testing import BrokerThread, free_port

    port = free_port()
    thread = BrokerThread(
        tmp_path,
        {
            "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
            "allow.everyone.if.no.acl.found": "false",
        },
        port=port,
    )
    thread.start()
    try:
        with BlockingClient("127.0.0.1", port, "anonymous") as client:
            altered = client.request(
                AlterClientQuotasRequest(
                    entries=(
                        EntryData(
                            entity=(EntityData(entity_type="client-id", entity_name="x"),),
                            ops=(OpData(key="producer_byte_rate", value=10.0, remove=False),),
                        ),
                    ),
                    validate_only=False,
                )
            )
            assert altered.entries[0].error_code == ErrorCode.cluster_authorization_failed
            described = client.request(DescribeClientQuotasRequest(components=(), strict=False))
            assert described.error_code == ErrorCode.cluster_authorization_failed
        assert thread.call(lambda: thread.broker.services.quotas.configs) == {}
    finally:
        thread.stop()


def test_brook_configs_manages_ip_quotas(broker):
    configs = ("configs", "--bootstrap-server", broker.bootstrap("PLAINTEXT"))
    ip = ("--entity-type", "ips", "--entity-name", "10.4.4.4")
    try:
        added = brook(*configs, "--alter", *ip, "--add-config", "connection_creation_rate=9")
        assert (added.returncode, added.lines) == (
            0,
            ["Completed updating config for ip 10.4.4.4."],
        )
        connections = broker.broker.services.quotas.connections
        assert broker.call(lambda: connections.quota("10.4.4.4")) == 9
        assert broker.call(lambda: connections.quota("127.0.0.1")) is None
        shown = brook(*configs, "--describe", "--entity-type", "ips")
        assert shown.lines == ["Quota configs for ip '10.4.4.4' are connection_creation_rate=9.0"]
        mixed = brook(*configs, "--describe", "--entity-type", "ips", "--entity-type", "users")
        assert_one_line_error(mixed, "ips cannot be combined with users or clients", code=2)
        wrong = brook(*configs, "--alter", *ip, "--add-config", "producer_byte_rate=10")
        assert_one_line_error(wrong, "Invalid configuration key producer_byte_rate", code=1)
    finally:
        removed = brook(*configs, "--alter", *ip, "--delete-config", "connection_creation_rate")
        assert removed.returncode == 0, removed.stderr
    assert brook(*configs, "--describe", "--entity-type", "ips").lines == []
