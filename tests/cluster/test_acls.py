"""ACLs in a ZooKeeper cluster: kept where Kafka's AclAuthorizer keeps them
(/kafka-acl, /kafka-acl-extended/prefixed, with change notifications), so that an ACL
created through one broker is applied by every broker, and a removal too."""

from __future__ import annotations

from typing import Any

from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)

from .harness import Cluster, ZooKeeperView, eventually, metadata_of

# Everyone may do everything no ACL speaks of; the tests deny with ACLs.
ACLS_ON = {
    "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
    "allow.everyone.if.no.acl.found": "true",
}
ANONYMOUS = "User:ANONYMOUS"


def _deny_write(topic: str, pattern: ResourcePatternType) -> AclBinding:
    return AclBinding(
        ResourceType.TOPIC,
        topic,
        pattern,
        ANONYMOUS,
        "*",
        AclOperation.WRITE,
        AclPermissionType.DENY,
    )


def _produce_error(bootstrap: str, topic: str) -> Any:
    outcomes: list[Any] = []
    producer = Producer({"bootstrap.servers": bootstrap, "message.timeout.ms": 10000})
    producer.produce(topic, b"x", on_delivery=lambda err, _msg: outcomes.append(err))
    producer.flush(20)
    return outcomes[0].code() if outcomes[0] is not None else None


def _listed(bootstrap: str) -> list[AclBinding]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    every = AclBindingFilter(
        ResourceType.ANY,
        None,
        ResourcePatternType.ANY,
        None,
        None,
        AclOperation.ANY,
        AclPermissionType.ANY,
    )
    return admin.describe_acls(every).result(15)  # type: ignore[no-any-return]


def _held_by(port: int) -> set[tuple[str, str, str]]:
    """(resource name, pattern type, operation) of every ACL one broker answers with."""
    from kio.schema.describe_acls.v3.request import DescribeAclsRequest
    from kio.static.primitive import i8

    from tests.integration.raw_client import RawClient

    request = DescribeAclsRequest(
        resource_type_filter=i8(ResourceType.ANY.value),
        resource_name_filter=None,
        pattern_type_filter=i8(ResourcePatternType.ANY.value),
        principal_filter=None,
        host_filter=None,
        operation=i8(AclOperation.ANY.value),
        permission_type=i8(AclPermissionType.ANY.value),
    )
    with RawClient(port) as client:
        response = client.request(request)
    assert response.error_code == 0, response.error_message
    return {
        (resource.resource_name, ResourcePatternType(resource.pattern_type).name, _op(acl))
        for resource in response.resources
        for acl in resource.acls
    }


def _op(acl: Any) -> str:
    return AclOperation(acl.operation).name.title().replace("_", "")


def test_an_acl_made_through_one_broker_is_applied_by_the_others(
    cluster: Cluster, zk: ZooKeeperView
):
    brokers = {i: cluster.start(i, ACLS_ON) for i in (1, 2)}
    zk.wait_broker_ids([1, 2])
    for broker in brokers.values():
        eventually(lambda b=broker: sorted(metadata_of(b.port).brokers), lambda ids: len(ids) == 2)
    admin_1 = AdminClient({"bootstrap.servers": brokers[1].bootstrap})
    # Led by broker 2, so that broker 2 is the one that must refuse the writes.
    admin_1.create_topics(
        [
            NewTopic("ledger", 1, replica_assignment=[[2, 1]]),
            NewTopic("eu-orders", 1, replica_assignment=[[1, 2]]),
        ],
        operation_timeout=20,
    )
    for name in ("ledger", "eu-orders"):
        eventually(lambda n=name: _produce_error(brokers[1].bootstrap, n), lambda e: e is None)

    literal = _deny_write("ledger", ResourcePatternType.LITERAL)
    (future,) = admin_1.create_acls([literal]).values()
    assert future.result(15) is None
    # Kafka's znode and JSON, and a change notification for the other brokers.
    document = zk.json("/kafka-acl/Topic/ledger")
    assert document == {
        "version": 1,
        "acls": [
            {"principal": ANONYMOUS, "permissionType": "Deny", "operation": "Write", "host": "*"}
        ],
    }
    assert any(child.startswith("acl_changes_") for child in zk.children("/kafka-acl-changes"))
    assert literal in eventually(lambda: _listed(brokers[2].bootstrap), lambda found: found != [])
    assert (
        eventually(
            lambda: _produce_error(brokers[2].bootstrap, "ledger"),
            lambda error: error == KafkaError.TOPIC_AUTHORIZATION_FAILED,
        )
        == KafkaError.TOPIC_AUTHORIZATION_FAILED
    )

    # A prefixed ACL, made through broker 2, applied by broker 1 (eu-orders' leader).
    admin_2 = AdminClient({"bootstrap.servers": brokers[2].bootstrap})
    prefixed = _deny_write("eu-", ResourcePatternType.PREFIXED)
    (future,) = admin_2.create_acls([prefixed]).values()
    assert future.result(15) is None
    assert zk.json("/kafka-acl-extended/prefixed/Topic/eu-")["acls"][0]["operation"] == "Write"
    assert zk.children("/kafka-acl-extended-changes") != []
    eventually(
        lambda: _produce_error(brokers[1].bootstrap, "eu-orders"),
        lambda error: error == KafkaError.TOPIC_AUTHORIZATION_FAILED,
    )

    # Removed through broker 1: broker 2 takes writes again, and the znode is gone.
    remove = AclBindingFilter(
        ResourceType.TOPIC,
        "ledger",
        ResourcePatternType.LITERAL,
        None,
        None,
        AclOperation.ANY,
        AclPermissionType.ANY,
    )
    (deleted,) = admin_1.delete_acls([remove]).values()
    assert deleted.result(15) == [literal]
    assert zk.exists("/kafka-acl/Topic/ledger") is None
    eventually(lambda: _produce_error(brokers[2].bootstrap, "ledger"), lambda e: e is None)

    # A broker started later loads what ZooKeeper holds (asked of that broker itself: an
    # admin client would send DescribeAcls to whichever broker it likes).
    brokers[3] = cluster.start(3, ACLS_ON)
    zk.wait_broker_ids([1, 2, 3])
    assert eventually(
        lambda: _held_by(brokers[3].port), lambda held: ("eu-", "PREFIXED", "Write") in held
    ) == {("eu-", "PREFIXED", "Write")}
