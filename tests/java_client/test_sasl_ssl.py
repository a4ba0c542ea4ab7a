"""The Java client against one Brook broker over SASL_SSL with ACLs on: the AdminClient
(PLAIN, a super user) grants, lists and removes ACLs; bob (SCRAM-SHA-256) is refused with
Kafka's authorization exceptions until granted, then runs the same producer, transaction
and group scenarios as over PLAINTEXT; a wrong password is refused as Kafka refuses it.
The client checks the broker's certificate against the test CA and its name (127.0.0.1)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.security.certs import make_pki
from tests.security.conftest import SecureBroker
from tests.security.test_acls import AUTHORIZER

from .harness import JavaClientError, JavaClients
from .scenarios import group_rebalances, idempotent_producer, transactions, unique

BOB = "User:bob"


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecureBroker]:
    pki = make_pki(tmp_path_factory.mktemp("java-pki"))
    started = SecureBroker(
        tmp_path_factory.mktemp("java-sasl-ssl"),
        pki,
        {
            "authorizer.class.name": AUTHORIZER,
            "super.users": "User:admin;User:ANONYMOUS",
            "group.initial.rebalance.delay.ms": 0,
        },
    ).start()
    try:
        yield started
    finally:
        started.stop()


def _sasl_ssl(broker: SecureBroker, mechanism: str, user: str, password: str) -> dict[str, Any]:
    module = (
        "org.apache.kafka.common.security.plain.PlainLoginModule"
        if mechanism == "PLAIN"
        else "org.apache.kafka.common.security.scram.ScramLoginModule"
    )
    return {
        "bootstrap.servers": broker.bootstrap("SASL_SSL"),
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": mechanism,
        "sasl.jaas.config": f'{module} required username="{user}" password="{password}";',
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(broker.pki.ca.cert_path),
    }


@pytest.fixture
def admin(broker: SecureBroker) -> dict[str, Any]:
    return _sasl_ssl(broker, "PLAIN", "admin", "admin-secret")


@pytest.fixture
def bob(broker: SecureBroker) -> dict[str, Any]:
    return _sasl_ssl(broker, "SCRAM-SHA-256", "bob", "bob-secret")


def _bobs_acls(prefix: str) -> list[dict[str, str]]:
    """What bob needs to run the scenarios on resources named from `prefix`."""
    grants = [
        ("TOPIC", "CREATE"),
        ("TOPIC", "WRITE"),
        ("TOPIC", "READ"),
        ("TOPIC", "DESCRIBE"),
        ("GROUP", "READ"),
        ("TRANSACTIONAL_ID", "WRITE"),
    ]
    return [
        {
            "resource_type": resource,
            "name": prefix,
            "pattern": "PREFIXED",
            "principal": BOB,
            "operation": operation,
        }
        for resource, operation in grants
    ]


def test_refused_until_granted_then_every_scenario(
    java: JavaClients, admin: dict[str, Any], bob: dict[str, Any]
) -> None:
    topic = unique("java-refused")
    with pytest.raises(JavaClientError) as refused:
        java.call(
            "produce",
            config={**bob, "max.block.ms": "10000"},
            topic=topic,
            records=[{"value": "v"}],
        )
    assert refused.value.type == "TopicAuthorizationException"
    denied = java.admin(bob, "create_topics", topics=[{"name": topic, "partitions": 1}])
    assert denied[topic]["error"]["type"] == "TopicAuthorizationException"
    with pytest.raises(JavaClientError) as not_admin:
        java.admin(bob, "describe_acls", filter={})
    assert not_admin.value.type == "ClusterAuthorizationException"

    acls = _bobs_acls("java-")
    assert java.admin(admin, "create_acls", bindings=acls) is None
    listed = java.admin(admin, "describe_acls", filter={"principal": BOB})
    expected = [{**acl, "host": "*", "permission": "ALLOW"} for acl in acls]
    assert sorted(listed, key=str) == sorted(expected, key=str)

    idempotent_producer(java, bob)
    transactions(java, bob)
    group_rebalances(java, bob)

    deleted = java.admin(admin, "delete_acls", filter={"principal": BOB})
    assert sorted(deleted, key=str) == sorted(expected, key=str)
    with pytest.raises(JavaClientError) as refused_again:
        java.call(
            "produce",
            config={**bob, "max.block.ms": "10000"},
            topic=topic,
            records=[{"value": "v"}],
        )
    assert refused_again.value.type == "TopicAuthorizationException"


def test_a_transactional_id_without_its_acl_is_refused(
    java: JavaClients, admin: dict[str, Any], bob: dict[str, Any]
) -> None:
    topic = unique("java-txn-refused")
    java.admin(admin, "create_topics", topics=[{"name": topic, "partitions": 1}])
    with pytest.raises(JavaClientError) as refused:
        java.call(
            "produce_transactions",
            config={**bob, "transactional.id": unique("bobs"), "max.block.ms": "10000"},
            topic=topic,
            transactions=[{"records": [{"value": "v"}], "commit": True}],
        )
    assert refused.value.type == "TransactionalIdAuthorizationException"


def test_a_wrong_password_is_refused(java: JavaClients, broker: SecureBroker) -> None:
    wrong = _sasl_ssl(broker, "SCRAM-SHA-256", "bob", "not-bobs-secret")
    with pytest.raises(JavaClientError) as refused:
        java.admin(
            {**wrong, "default.api.timeout.ms": "10000", "request.timeout.ms": "5000"},
            "describe_cluster",
        )
    assert refused.value.type == "SaslAuthenticationException", refused.value.message


def test_admin_sees_the_cluster_over_sasl_ssl(
    java: JavaClients, admin: dict[str, Any], broker: SecureBroker
) -> None:
    cluster = java.admin(admin, "describe_cluster")
    (node,) = cluster["nodes"]
    # The node is the SASL_SSL listener's endpoint: the listener the request came in on.
    assert (node["host"], node["port"]) == ("127.0.0.1", broker.ports["SASL_SSL"])
    # A super user may do everything on the cluster.
    assert {"ALTER", "DESCRIBE", "CLUSTER_ACTION"} <= set(cluster["authorized_operations"])
