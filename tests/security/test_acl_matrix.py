"""The ACL matrix: each admin operation, as alice (SASL PLAIN), refused with Kafka's error
and nothing changed, then allowed once the one ACL Kafka asks for is granted. Each case
names its own topic or group, so that no case's ACL applies to another's."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
from confluent_kafka import (
    ConsumerGroupTopicPartitions,
    ElectionType,
    KafkaError,
    KafkaException,
    TopicPartition,
)
from confluent_kafka.admin import (
    AclOperation,
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewPartitions,
    OffsetSpec,
    ResourceType,
)

from .conftest import SecureBroker
from .test_acls import ALICE, _admin, _allow, _create_topic, _produce, acl_broker  # noqa: F401


@dataclass(frozen=True)
class Case:
    name: str
    # What the case needs before alice acts (a topic, a group), by the super user.
    prepare: Callable[[SecureBroker, str], None]
    # alice's action; raises KafkaException when refused.
    act: Callable[[AdminClient, str], Any]
    refused_with: int
    # The ACL that allows it: resource type, whether on the case's name (else the cluster).
    grant: tuple[ResourceType, AclOperation]
    # What shows the action took effect (by the super user), checked after it is allowed.
    took_effect: Callable[[SecureBroker, str], bool]


def _topic(broker: SecureBroker, name: str) -> None:
    _create_topic(broker, name, partitions=1)
    _produce({"bootstrap.servers": broker.bootstrap("PLAINTEXT")}, name, [b"a", b"b", b"c"])


def _described_topic(broker: SecureBroker, name: str) -> None:
    """A topic alice may describe (her client looks its leaders up before deleting)."""
    _topic(broker, name)
    _allow(broker, ALICE, ResourceType.TOPIC, name, AclOperation.DESCRIBE)


def _group(broker: SecureBroker, name: str) -> None:
    """A group with a committed offset (of the topic of the same name)."""
    _topic(broker, name)
    admin = _admin(broker)
    offsets = ConsumerGroupTopicPartitions(name, [TopicPartition(name, 0, 2)])
    admin.alter_consumer_group_offsets([offsets])[name].result(15)


def _topics(broker: SecureBroker) -> dict[str, Any]:
    return _admin(broker).list_topics(timeout=15).topics  # type: ignore[no-any-return]


def _retention(broker: SecureBroker, name: str) -> str | None:
    admin = _admin(broker)
    resource = ConfigResource(ConfigResource.Type.TOPIC, name)
    configs = admin.describe_configs([resource])[resource].result(15)
    entry = configs.get("retention.ms")
    return entry.value if entry is not None else None


def _set_retention(admin: AdminClient, name: str) -> Any:
    setting = ConfigEntry("retention.ms", "1234", incremental_operation=AlterConfigOpType.SET)
    resource = ConfigResource(ConfigResource.Type.TOPIC, name, incremental_configs=[setting])
    return admin.incremental_alter_configs([resource])[resource].result(15)


def _describe_configs(admin: AdminClient, name: str) -> Any:
    resource = ConfigResource(ConfigResource.Type.TOPIC, name)
    return admin.describe_configs([resource])[resource].result(15)


def _low_watermark(broker: SecureBroker, name: str) -> int:
    from confluent_kafka import Consumer

    consumer = Consumer({"bootstrap.servers": broker.bootstrap("PLAINTEXT"), "group.id": "w"})
    try:
        return consumer.get_watermark_offsets(TopicPartition(name, 0), timeout=10)[0]  # type: ignore[no-any-return]
    finally:
        consumer.close()


def _groups(broker: SecureBroker) -> set[str]:
    listed = _admin(broker).list_consumer_groups().result(15)
    return {group.group_id for group in listed.valid}


def _readable_group(broker: SecureBroker, name: str) -> None:
    """A group (with a committed offset) whose topic alice may read."""
    _group(broker, name)
    _allow(broker, ALICE, ResourceType.TOPIC, name, AclOperation.READ)


def _committed(broker: SecureBroker, name: str) -> int:
    admin = _admin(broker)
    found = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(name)])[name]
    (partition,) = found.result(15).topic_partitions
    return partition.offset  # type: ignore[no-any-return]


CASES = [
    Case(
        "list-offsets",
        _topic,
        lambda admin, name: admin.list_offsets({TopicPartition(name, 0): OffsetSpec.latest()})[
            TopicPartition(name, 0)
        ].result(15),
        # librdkafka looks the leaders up first; Metadata hides the topic from alice.
        KafkaError._NOENT,
        (ResourceType.TOPIC, AclOperation.DESCRIBE),
        lambda broker, name: True,
    ),
    Case(
        "alter-group-offsets",
        _readable_group,
        lambda admin, name: admin.alter_consumer_group_offsets(
            [ConsumerGroupTopicPartitions(name, [TopicPartition(name, 0, 1)])]
        )[name].result(15),
        KafkaError.GROUP_AUTHORIZATION_FAILED,
        (ResourceType.GROUP, AclOperation.READ),
        lambda broker, name: _committed(broker, name) == 1,
    ),
    Case(
        "elect-leaders",
        _topic,
        lambda admin, name: admin.elect_leaders(
            ElectionType.PREFERRED, [TopicPartition(name, 0)]
        ).result(15),
        KafkaError.CLUSTER_AUTHORIZATION_FAILED,
        (ResourceType.BROKER, AclOperation.ALTER),
        lambda broker, name: True,
    ),
    Case(
        "delete-topic",
        _topic,
        lambda admin, name: admin.delete_topics([name])[name].result(15),
        KafkaError.TOPIC_AUTHORIZATION_FAILED,
        (ResourceType.TOPIC, AclOperation.DELETE),
        lambda broker, name: name not in _topics(broker),
    ),
    Case(
        "create-partitions",
        _topic,
        lambda admin, name: admin.create_partitions([NewPartitions(name, 3)])[name].result(15),
        KafkaError.TOPIC_AUTHORIZATION_FAILED,
        (ResourceType.TOPIC, AclOperation.ALTER),
        lambda broker, name: len(_topics(broker)[name].partitions) == 3,
    ),
    Case(
        "alter-configs",
        _topic,
        _set_retention,
        KafkaError.TOPIC_AUTHORIZATION_FAILED,
        (ResourceType.TOPIC, AclOperation.ALTER_CONFIGS),
        lambda broker, name: _retention(broker, name) == "1234",
    ),
    Case(
        "describe-configs",
        _topic,
        _describe_configs,
        KafkaError.TOPIC_AUTHORIZATION_FAILED,
        (ResourceType.TOPIC, AclOperation.DESCRIBE_CONFIGS),
        lambda broker, name: True,  # a read: allowed is all there is to see
    ),
    Case(
        "delete-records",
        _described_topic,
        lambda admin, name: admin.delete_records([TopicPartition(name, 0, 2)])[
            TopicPartition(name, 0, 2)
        ].result(15),
        KafkaError.TOPIC_AUTHORIZATION_FAILED,
        (ResourceType.TOPIC, AclOperation.DELETE),
        lambda broker, name: _low_watermark(broker, name) == 2,
    ),
    Case(
        "describe-group",
        _group,
        lambda admin, name: _raise_group_error(
            admin.describe_consumer_groups([name])[name].result(15)
        ),
        KafkaError.GROUP_AUTHORIZATION_FAILED,
        (ResourceType.GROUP, AclOperation.DESCRIBE),
        lambda broker, name: True,
    ),
    Case(
        "delete-group",
        _group,
        lambda admin, name: admin.delete_consumer_groups([name])[name].result(15),
        KafkaError.GROUP_AUTHORIZATION_FAILED,
        (ResourceType.GROUP, AclOperation.DELETE),
        lambda broker, name: name not in _groups(broker),
    ),
    Case(
        "list-group-offsets",
        _group,
        lambda admin, name: admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(name)])[
            name
        ].result(15),
        KafkaError.GROUP_AUTHORIZATION_FAILED,
        (ResourceType.GROUP, AclOperation.DESCRIBE),
        lambda broker, name: True,
    ),
]


def _raise_group_error(description: Any) -> Any:
    # confluent-kafka reports a group's own error on the description.
    error = getattr(description, "error", None)
    if error is not None and error.code() != KafkaError.NO_ERROR:
        raise KafkaException(error)
    return description


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.name)
def test_each_operation_is_refused_then_allowed(acl_broker, case):  # noqa: F811
    name = f"{case.name}-{uuid.uuid4().hex[:8]}"
    case.prepare(acl_broker, name)
    before = case.took_effect(acl_broker, name)
    alice = _admin(acl_broker, "alice")
    with pytest.raises(KafkaException) as raised:
        case.act(alice, name)
    assert raised.value.args[0].code() == case.refused_with, raised.value
    # Refused: nothing changed (a read case has nothing to change).
    assert case.took_effect(acl_broker, name) == before
    resource_type, operation = case.grant
    granted = "kafka-cluster" if resource_type == ResourceType.BROKER else name
    _allow(acl_broker, ALICE, resource_type, granted, operation)
    # A new client: librdkafka keeps what Metadata told it while the topic was hidden.
    case.act(_admin(acl_broker, "alice"), name)
    assert case.took_effect(acl_broker, name)
