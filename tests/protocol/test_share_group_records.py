"""Share groups' `__consumer_offsets` records (KIP-932) byte for byte as Kafka 4.4 writes them.

The expected bytes are Kafka 4.4's: values serialized by its own generated classes
(org.apache.kafka.coordinator.group.generated.ShareGroup*, kafka-group-coordinator-4.4.0.jar,
with MessageUtil.toVersionPrefixedByteBuffer and toCoordinatorTypePrefixedByteBuffer). Each
reads back as what Kafka meant, and what Brook writes is what Kafka writes."""

from __future__ import annotations

import uuid

import pytest

from brook.protocol import share_group_records as sgr
from brook.protocol.coordinator_records import CoordinatorRecordError

TOPIC = uuid.UUID(int=(1 << 64) | 2)  # Kafka's new Uuid(1L, 2L)


def test_keys_are_the_record_type_then_the_fields() -> None:
    key = sgr.ShareGroupCurrentMemberAssignmentKey("g", "m")
    assert sgr.encode_key(key).hex() == "000e00016700016d"
    assert sgr.decode_key(sgr.encode_key(key)) == key
    assert sgr.decode_key(sgr.encode_key(sgr.ShareGroupMetadataKey("g"))) == (
        sgr.ShareGroupMetadataKey("g")
    )


@pytest.mark.parametrize(
    ("key", "value", "kafka"),
    [
        pytest.param(
            sgr.ShareGroupMemberMetadataKey("g", "m"),
            sgr.ShareGroupMemberMetadataValue(
                rack_id=None, client_id="c", client_host="/h", subscribed_topic_names=("a", "b")
            ),
            "0000000263032f68030261026200",
            id="member-metadata",
        ),
        pytest.param(
            sgr.ShareGroupMetadataKey("g"),
            sgr.ShareGroupMetadataValue(epoch=5, metadata_hash=77),
            "000000000005000000000000004d00",
            id="group-epoch-and-metadata-hash",
        ),
        pytest.param(
            sgr.ShareGroupTargetAssignmentMetadataKey("g"),
            sgr.ShareGroupTargetAssignmentMetadataValue(assignment_epoch=5),
            "00000000000500",
            id="target-assignment-epoch",
        ),
        pytest.param(
            sgr.ShareGroupTargetAssignmentMetadataKey("g"),
            sgr.ShareGroupTargetAssignmentMetadataValue(
                assignment_epoch=5, assignment_timestamp=99
            ),
            "0000000000050100080000000000000063",
            id="target-assignment-timestamp-tag",
        ),
        pytest.param(
            sgr.ShareGroupTargetAssignmentMemberKey("g", "m"),
            sgr.ShareGroupTargetAssignmentMemberValue(
                topic_partitions=(sgr.TopicPartitions(topic_id=TOPIC, partitions=(0, 2)),)
            ),
            "000002000000000000000100000000000000020300000000000000020000",
            id="target-member",
        ),
        pytest.param(
            sgr.ShareGroupCurrentMemberAssignmentKey("g", "m"),
            sgr.ShareGroupCurrentMemberAssignmentValue(
                member_epoch=5,
                previous_member_epoch=4,
                assigned_partitions=(sgr.TopicPartitions(topic_id=TOPIC, partitions=(1,)),),
            ),
            "0000000000050000000400020000000000000001000000000000000202000000010000",
            id="current-assignment",
        ),
        pytest.param(
            sgr.ShareGroupStatePartitionMetadataKey("g"),
            sgr.ShareGroupStatePartitionMetadataValue(
                initializing_topics=(
                    sgr.TopicPartitionsInfo(topic_id=TOPIC, topic_name="x", partitions=(0,)),
                ),
                deleting_topics=(sgr.TopicInfo(topic_id=TOPIC, topic_name="y"),),
            ),
            "00000200000000000000010000000000000002027802000000000001020000000000000001"
            "000000000000000202790000",
            id="state-partition-metadata",
        ),
    ],
)
def test_values_are_kafkas_bytes(key: sgr.ShareGroupKey, value: sgr.ShareGroupValue, kafka: str):
    assert sgr.encode_value(value).hex() == kafka
    assert sgr.decode_value(key, bytes.fromhex(kafka)) == value


def test_what_is_not_a_share_group_record_is_refused() -> None:
    with pytest.raises(CoordinatorRecordError):
        sgr.decode_key(b"\x00\x03\x00\x01g")  # a consumer group's type
    with pytest.raises(CoordinatorRecordError):
        sgr.decode_value(sgr.ShareGroupMetadataKey("g"), b"\x00\x01\x00\x00\x00\x05")
    with pytest.raises(CoordinatorRecordError):
        sgr.decode_value(sgr.ShareGroupMetadataKey("g"), b"\x00\x00\x00")  # cut short
