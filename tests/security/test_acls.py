"""ACLs as Kafka's AclAuthorizer applies them, with real clients logged in over SASL.

The broker runs with `authorizer.class.name`; User:admin (PLAIN) and User:ANONYMOUS (the
PLAINTEXT listener, the tests' admin path) are super users. alice (PLAIN) and bob
(SCRAM-SHA-256) are the principals under test: each test names its own topics, groups and
transactional ids, so that one test's ACLs never apply to another's resources.
"""

from __future__ import annotations

import asyncio
import datetime
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from aiokafka import AIOKafkaProducer
from aiokafka.errors import TopicAuthorizationFailedError as AioTopicAuthorizationFailed
from confluent_kafka import (
    Consumer,
    ConsumerGroupTopicPartitions,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
    ScramMechanism,
    UserScramCredentialDeletion,
)
from kafka import KafkaProducer
from kafka.errors import TopicAuthorizationFailedError as KpTopicAuthorizationFailed

from brook.broker.testing import BrokerThread
from brook.protocol.errors import ErrorCode
from tests.integration.processes import run_brook
from tests.integration.raw_client import RawClient

from .conftest import PLAIN_USERS, SCRAM_USERS, SecureBroker

AUTHORIZER = "kafka.security.authorizer.AclAuthorizer"
ALICE = "User:alice"
BOB = "User:bob"


def started_acl_broker(data_dir: Path, pki: Any) -> SecureBroker:
    """A secure broker with ACLs on; admin and ANONYMOUS (PLAINTEXT) are super users."""
    return SecureBroker(
        data_dir,
        pki,
        {"authorizer.class.name": AUTHORIZER, "super.users": "User:admin;User:ANONYMOUS"},
    ).start()


@pytest.fixture(scope="module")
def acl_broker(tmp_path_factory: pytest.TempPathFactory, pki: Any) -> Iterator[SecureBroker]:
    broker = started_acl_broker(tmp_path_factory.mktemp("acl-broker"), pki)
    try:
        yield broker
    finally:
        broker.stop()


def _unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def _sasl(broker: SecureBroker, user: str = "alice") -> dict[str, Any]:
    if user == "bob":
        mechanism, (name, password) = "SCRAM-SHA-256", SCRAM_USERS["SCRAM-SHA-256"]
    else:
        mechanism, name, password = "PLAIN", user, PLAIN_USERS[user]
    return {
        "bootstrap.servers": broker.bootstrap("SASL_PLAINTEXT"),
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": mechanism,
        "sasl.username": name,
        "sasl.password": password,
    }


def _admin(broker: SecureBroker, user: str | None = None) -> AdminClient:
    config = _sasl(broker, user) if user else {"bootstrap.servers": broker.bootstrap("PLAINTEXT")}
    return AdminClient(config)


def _allow(
    broker: SecureBroker,
    principal: str,
    resource_type: ResourceType,
    name: str,
    operation: AclOperation,
    pattern: ResourcePatternType = ResourcePatternType.LITERAL,
    permission: AclPermissionType = AclPermissionType.ALLOW,
) -> AclBinding:
    binding = AclBinding(resource_type, name, pattern, principal, "*", operation, permission)
    admin = _admin(broker)
    for future in admin.create_acls([binding]).values():
        assert future.result(15) is None
    return binding


def _create_topic(broker: SecureBroker, name: str, partitions: int = 1) -> None:
    admin = _admin(broker)
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(15)


def _produce(config: dict[str, Any], topic: str, values: list[bytes]) -> list[Any]:
    """Delivery errors (None for each record delivered)."""
    outcomes: list[Any] = []
    producer = Producer({**config, "message.timeout.ms": 10000})
    for value in values:
        producer.produce(topic, value, on_delivery=lambda err, _msg: outcomes.append(err))
    producer.flush(20)
    return outcomes


def _consume_error(config: dict[str, Any], topic: str, group: str) -> KafkaError | None:
    """The first error a group consumer of `topic` meets, or None after a record."""
    consumer = Consumer(
        {**config, "group.id": group, "auto.offset.reset": "earliest", "enable.auto.commit": False}
    )
    consumer.subscribe([topic])
    deadline = time.monotonic() + 20
    try:
        while time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is None:
                continue
            if message.error() is not None:
                if message.error().code() == KafkaError._PARTITION_EOF:
                    continue
                return message.error()  # type: ignore[no-any-return]
            return None
        raise AssertionError(f"no record and no error consuming {topic}")
    finally:
        consumer.close()


# --- the ACL APIs ----------------------------------------------------------------------


def test_acls_are_created_described_and_deleted(acl_broker):
    topic = _unique("described")
    admin = _admin(acl_broker)
    bindings = [
        AclBinding(
            ResourceType.TOPIC,
            topic,
            ResourcePatternType.LITERAL,
            ALICE,
            "*",
            AclOperation.READ,
            AclPermissionType.ALLOW,
        ),
        AclBinding(
            ResourceType.TOPIC,
            topic,
            ResourcePatternType.LITERAL,
            BOB,
            "10.0.0.1",
            AclOperation.WRITE,
            AclPermissionType.DENY,
        ),
        AclBinding(
            ResourceType.GROUP,
            topic + "-",
            ResourcePatternType.PREFIXED,
            ALICE,
            "*",
            AclOperation.READ,
            AclPermissionType.ALLOW,
        ),
    ]
    for future in admin.create_acls(bindings).values():
        assert future.result(15) is None
    every = AclBindingFilter(
        ResourceType.ANY,
        None,
        ResourcePatternType.ANY,
        None,
        None,
        AclOperation.ANY,
        AclPermissionType.ANY,
    )
    found = admin.describe_acls(every).result(15)
    assert set(bindings) <= set(found)
    # MATCH: the patterns that apply to a resource of that name.
    matching = AclBindingFilter(
        ResourceType.GROUP,
        topic + "-consumers",
        ResourcePatternType.MATCH,
        None,
        None,
        AclOperation.ANY,
        AclPermissionType.ANY,
    )
    assert admin.describe_acls(matching).result(15) == [bindings[2]]
    by_principal = AclBindingFilter(
        ResourceType.TOPIC,
        topic,
        ResourcePatternType.LITERAL,
        BOB,
        None,
        AclOperation.ANY,
        AclPermissionType.ANY,
    )
    (deleted,) = admin.delete_acls([by_principal]).values()
    assert deleted.result(15) == [bindings[1]]
    remaining = admin.describe_acls(every).result(15)
    assert bindings[1] not in remaining and bindings[0] in remaining
    # Kept where Kafka keeps a single broker's state: beside the logs, in Kafka's JSON.
    assert topic in (acl_broker.thread.data_dir / "brook-acls.json").read_text()


def test_invalid_acls_are_refused_with_kafkas_reasons(acl_broker):
    admin = _admin(acl_broker)
    bad_cluster = AclBinding(
        ResourceType.BROKER,
        "not-the-cluster",
        ResourcePatternType.LITERAL,
        ALICE,
        "*",
        AclOperation.ALTER,
        AclPermissionType.ALLOW,
    )
    (future,) = admin.create_acls([bad_cluster]).values()
    with pytest.raises(KafkaException) as raised:
        future.result(15)
    error = raised.value.args[0]
    assert error.code() == KafkaError.INVALID_REQUEST
    assert "The only valid name for the CLUSTER resource is kafka-cluster" in error.str()
    # Nothing was kept.
    kept = admin.describe_acls(
        AclBindingFilter(
            ResourceType.BROKER,
            None,
            ResourcePatternType.ANY,
            None,
            None,
            AclOperation.ANY,
            AclPermissionType.ANY,
        )
    ).result(15)
    assert bad_cluster not in kept


def test_only_the_cluster_alterer_manages_acls(acl_broker):
    admin = _admin(acl_broker, "alice")
    binding = AclBinding(
        ResourceType.TOPIC,
        _unique("self-granted"),
        ResourcePatternType.LITERAL,
        ALICE,
        "*",
        AclOperation.ALL,
        AclPermissionType.ALLOW,
    )
    (future,) = admin.create_acls([binding]).values()
    with pytest.raises(KafkaException) as raised:
        future.result(15)
    assert raised.value.args[0].code() == KafkaError.CLUSTER_AUTHORIZATION_FAILED
    # Granted Alter on the cluster, alice may.
    _allow(acl_broker, ALICE, ResourceType.BROKER, "kafka-cluster", AclOperation.ALTER)
    try:
        (future,) = admin.create_acls([binding]).values()
        assert future.result(15) is None
    finally:
        # Taken back (and waited for): the other tests count on alice not altering the cluster.
        super_admin = _admin(acl_broker)
        grant = AclBindingFilter(
            ResourceType.BROKER,
            "kafka-cluster",
            ResourcePatternType.LITERAL,
            ALICE,
            None,
            AclOperation.ANY,
            AclPermissionType.ANY,
        )
        for future in super_admin.delete_acls([grant]).values():
            future.result(15)


def test_acl_apis_without_an_authorizer_answer_security_disabled(brook_broker):
    # Over the wire: librdkafka's describe_acls reports this error as an empty list.
    from kio.schema.create_acls.v3 import request as create3
    from kio.schema.describe_acls.v3 import request as describe3

    describe = describe3.DescribeAclsRequest(
        resource_type_filter=1,
        resource_name_filter=None,
        pattern_type_filter=1,
        principal_filter=None,
        host_filter=None,
        operation=1,
        permission_type=1,
    )
    creation = create3.AclCreation(
        resource_type=2,
        resource_name="t",
        resource_pattern_type=3,
        principal=ALICE,
        host="*",
        operation=3,
        permission_type=3,
    )
    with RawClient(brook_broker.port) as client:
        described = client.request(describe)
        created = client.request(create3.CreateAclsRequest(creations=(creation,)))
    assert described.error_code == ErrorCode.security_disabled
    assert described.error_message == "No Authorizer is configured on the broker"
    assert [r.error_code for r in created.results] == [ErrorCode.security_disabled]


# --- enforcement ----------------------------------------------------------------------


def test_producing_needs_write_on_the_topic(acl_broker):
    topic = _unique("orders")
    _create_topic(acl_broker, topic)
    alice = _sasl(acl_broker)
    assert [e.code() for e in _produce(alice, topic, [b"refused"])] == [
        KafkaError.TOPIC_AUTHORIZATION_FAILED
    ]
    assert acl_broker.thread.records(topic) == []
    _allow(acl_broker, ALICE, ResourceType.TOPIC, topic, AclOperation.WRITE)
    assert _produce(alice, topic, [b"accepted"]) == [None]
    assert [r.value for r in acl_broker.thread.records(topic)] == [b"accepted"]
    # bob (SCRAM) is still refused: the ACL names alice.
    bob = _sasl(acl_broker, "bob")
    assert [e.code() for e in _produce(bob, topic, [b"bob"])] == [
        KafkaError.TOPIC_AUTHORIZATION_FAILED
    ]


def test_kafka_python_and_aiokafka_are_refused_then_allowed(acl_broker):
    topic = _unique("python-clients")
    _create_topic(acl_broker, topic)
    sasl = {
        "security_protocol": "SASL_PLAINTEXT",
        "sasl_mechanism": "PLAIN",
        "sasl_plain_username": "alice",
        "sasl_plain_password": PLAIN_USERS["alice"],
    }
    bootstrap = acl_broker.bootstrap("SASL_PLAINTEXT")
    producer = KafkaProducer(
        bootstrap_servers=bootstrap, enable_idempotence=False, retries=0, **sasl
    )
    try:
        with pytest.raises(KpTopicAuthorizationFailed):
            producer.send(topic, b"kafka-python").get(20)
    finally:
        producer.close()

    async def aiokafka_send() -> None:
        client = AIOKafkaProducer(bootstrap_servers=bootstrap, **sasl)
        await client.start()
        try:
            await client.send_and_wait(topic, b"aiokafka")
        finally:
            await client.stop()

    with pytest.raises(AioTopicAuthorizationFailed):
        asyncio.run(aiokafka_send())
    assert acl_broker.thread.records(topic) == []
    _allow(acl_broker, ALICE, ResourceType.TOPIC, topic, AclOperation.WRITE)
    producer = KafkaProducer(bootstrap_servers=bootstrap, enable_idempotence=False, **sasl)
    try:
        producer.send(topic, b"kafka-python").get(20)
    finally:
        producer.close()
    asyncio.run(aiokafka_send())
    assert sorted(r.value for r in acl_broker.thread.records(topic)) == [
        b"aiokafka",
        b"kafka-python",
    ]


def test_prefixed_acls_and_deny_precedence(acl_broker):
    prefix = _unique("eu") + "-"
    allowed, secret = prefix + "orders", prefix + "secret"
    for topic in (allowed, secret):
        _create_topic(acl_broker, topic)
        assert _produce({"bootstrap.servers": acl_broker.bootstrap("PLAINTEXT")}, topic, [b"x"])
    group = _unique("eu-readers")
    _allow(
        acl_broker,
        ALICE,
        ResourceType.TOPIC,
        prefix,
        AclOperation.READ,
        ResourcePatternType.PREFIXED,
    )
    _allow(acl_broker, ALICE, ResourceType.GROUP, group, AclOperation.READ)
    _allow(
        acl_broker,
        ALICE,
        ResourceType.TOPIC,
        secret,
        AclOperation.READ,
        permission=AclPermissionType.DENY,
    )
    alice = _sasl(acl_broker)
    assert _consume_error(alice, allowed, group) is None
    error = _consume_error(alice, secret, group)
    assert error is not None and error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED


def test_consuming_in_a_group_needs_read_on_the_group(acl_broker):
    topic = _unique("grouped")
    _create_topic(acl_broker, topic)
    _produce({"bootstrap.servers": acl_broker.bootstrap("PLAINTEXT")}, topic, [b"x"])
    _allow(acl_broker, ALICE, ResourceType.TOPIC, topic, AclOperation.READ)
    error = _consume_error(_sasl(acl_broker), topic, _unique("no-grant"))
    assert error is not None and error.code() == KafkaError.GROUP_AUTHORIZATION_FAILED


def test_metadata_lists_only_the_topics_a_principal_may_describe(acl_broker):
    visible, hidden = _unique("visible"), _unique("hidden")
    for topic in (visible, hidden):
        _create_topic(acl_broker, topic)
    # Write implies Describe.
    _allow(acl_broker, ALICE, ResourceType.TOPIC, visible, AclOperation.WRITE)
    topics = _admin(acl_broker, "alice").list_topics(timeout=15).topics
    assert visible in topics
    assert hidden not in topics
    # The super user sees both.
    every = _admin(acl_broker).list_topics(timeout=15).topics
    assert {visible, hidden} <= set(every)


def test_list_groups_shows_the_groups_a_principal_may_describe(acl_broker):
    topic, visible, hidden = _unique("listed"), _unique("visible"), _unique("hidden")
    _create_topic(acl_broker, topic)
    admin = _admin(acl_broker)
    for group in (visible, hidden):
        offsets = ConsumerGroupTopicPartitions(group, [TopicPartition(topic, 0, 0)])
        admin.alter_consumer_group_offsets([offsets])[group].result(15)
    _allow(acl_broker, ALICE, ResourceType.GROUP, visible, AclOperation.DESCRIBE)
    alice = _admin(acl_broker, "alice")
    listed = alice.list_consumer_groups().result(15)
    assert listed.errors == []
    names = {group.group_id for group in listed.valid}
    assert visible in names
    assert hidden not in names


def test_transactions_need_write_on_the_transactional_id(acl_broker):
    topic, transactional_id = _unique("txn"), _unique("checkout")
    _create_topic(acl_broker, topic)
    _allow(acl_broker, ALICE, ResourceType.TOPIC, topic, AclOperation.WRITE)
    producer = Producer({**_sasl(acl_broker), "transactional.id": transactional_id})
    with pytest.raises(KafkaException) as raised:
        producer.init_transactions(15)
    assert raised.value.args[0].code() == KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    _allow(acl_broker, ALICE, ResourceType.TRANSACTIONAL_ID, transactional_id, AclOperation.WRITE)
    producer = Producer({**_sasl(acl_broker), "transactional.id": transactional_id})
    producer.init_transactions(15)
    producer.begin_transaction()
    producer.produce(topic, b"in a transaction")
    producer.commit_transaction(15)
    assert [r.value for r in acl_broker.thread.records(topic)] == [b"in a transaction"]


def test_creating_topics_needs_create(acl_broker):
    topic = _unique("created-by-alice")
    admin = _admin(acl_broker, "alice")
    with pytest.raises(KafkaException) as raised:
        admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(15)
    assert raised.value.args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert topic not in _admin(acl_broker).list_topics(timeout=15).topics
    _allow(acl_broker, ALICE, ResourceType.TOPIC, topic, AclOperation.CREATE)
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(15)
    assert topic in _admin(acl_broker).list_topics(timeout=15).topics


def test_acls_survive_a_restart(tmp_path, pki):
    overrides = {"authorizer.class.name": AUTHORIZER, "super.users": "User:ANONYMOUS"}
    broker = SecureBroker(tmp_path, pki, overrides).start()
    topic = _unique("kept")
    try:
        _create_topic(broker, topic)
        _allow(broker, ALICE, ResourceType.TOPIC, topic, AclOperation.WRITE)
    finally:
        broker.stop()
    # The same data dir (new ports): the ACL is back.
    again = SecureBroker(tmp_path, pki, overrides).start()
    try:
        assert _produce(_sasl(again), topic, [b"after restart"]) == [None]
    finally:
        again.stop()


def test_brook_acls_adds_lists_and_removes(acl_broker):
    topic, group = _unique("tool-topic"), _unique("tool-group")
    acls = ["acls", "--bootstrap-server", acl_broker.bootstrap("PLAINTEXT")]
    alice = ["--allow-principal", ALICE]
    added = run_brook([*acls, "--add", *alice, "--consumer", "--topic", topic, "--group", group])
    assert added.returncode == 0, added.output
    pattern = f"ResourcePattern(resourceType=TOPIC, name={topic}, patternType=LITERAL)"
    assert f"Adding ACLs for resource `{pattern}`" in added.output
    assert "(principal=User:alice, host=*, operation=READ, permissionType=ALLOW)" in added.output
    listed = run_brook([*acls, "--list", "--topic", topic])
    assert listed.returncode == 0, listed.output
    assert f"Current ACLs for resource `{pattern}`" in listed.output
    assert "operation=DESCRIBE, permissionType=ALLOW" in listed.output
    # The consumer it allowed can read the topic in that group.
    _create_topic(acl_broker, topic)
    _produce({"bootstrap.servers": acl_broker.bootstrap("PLAINTEXT")}, topic, [b"x"])
    assert _consume_error(_sasl(acl_broker), topic, group) is None
    removed = run_brook(
        [*acls, "--remove", "--force", *alice, "--operation", "Read", "--topic", topic]
    )
    assert removed.returncode == 0, removed.output
    listed = run_brook([*acls, "--list", "--topic", topic])
    assert "operation=READ" not in listed.output
    assert "operation=DESCRIBE" in listed.output
    # Bad input: an unknown operation, and no principal.
    bad = run_brook([*acls, "--add", *alice, "--operation", "Fly", "--topic", topic])
    assert bad.returncode == 2 and "unknown operation 'Fly'" in bad.output
    none = run_brook([*acls, "--add", "--operation", "Read", "--topic", topic])
    assert none.returncode == 2 and "name a principal" in none.output


def test_authorized_operations_are_the_principals(acl_broker):
    from confluent_kafka import TopicCollection

    topic = _unique("ops")
    _create_topic(acl_broker, topic)
    _allow(acl_broker, ALICE, ResourceType.TOPIC, topic, AclOperation.READ)
    _allow(acl_broker, ALICE, ResourceType.TOPIC, topic, AclOperation.ALTER_CONFIGS)
    admin = _admin(acl_broker, "alice")
    futures = admin.describe_topics(TopicCollection([topic]), include_authorized_operations=True)
    described = futures[topic].result(15)
    # Read implies Describe, AlterConfigs implies DescribeConfigs; nothing else is allowed.
    assert set(described.authorized_operations) == {
        AclOperation.READ,
        AclOperation.DESCRIBE,
        AclOperation.ALTER_CONFIGS,
        AclOperation.DESCRIBE_CONFIGS,
    }
    super_admin = _admin(acl_broker)  # kept referenced while its future runs
    futures = super_admin.describe_topics(
        TopicCollection([topic]), include_authorized_operations=True
    )
    every = futures[topic].result(15)
    assert AclOperation.DELETE in set(every.authorized_operations)  # the super user's


def test_scram_credentials_and_reassignments_need_the_cluster(acl_broker, tmp_path):
    admin = _admin(acl_broker, "alice")
    deletion = UserScramCredentialDeletion("bob", ScramMechanism.SCRAM_SHA_256)
    with pytest.raises(KafkaException) as raised:
        admin.alter_user_scram_credentials([deletion])["bob"].result(15)
    assert raised.value.args[0].code() == KafkaError.CLUSTER_AUTHORIZATION_FAILED
    super_admin = _admin(acl_broker)
    assert "bob" in super_admin.describe_user_scram_credentials().result(15)
    # Over the wire, as User:ANONYMOUS on a broker where it is no super user
    # (confluent-kafka 2.16's describe_user_scram_credentials crashes the process on a
    # response with a top-level error, which is what Kafka answers too).
    from kio.schema.describe_user_scram_credentials.v0 import request as describe0
    from kio.schema.list_partition_reassignments.v0 import request as list0

    broker = BrokerThread(tmp_path, {"authorizer.class.name": AUTHORIZER}).start()
    try:
        with RawClient(broker.port) as client:
            described = client.request(describe0.DescribeUserScramCredentialsRequest(users=None))
            listed = client.request(
                list0.ListPartitionReassignmentsRequest(
                    timeout=datetime.timedelta(seconds=5), topics=None
                )
            )
    finally:
        broker.stop()
    assert described.error_code == ErrorCode.cluster_authorization_failed
    assert described.results == ()
    assert listed.error_code == ErrorCode.cluster_authorization_failed
