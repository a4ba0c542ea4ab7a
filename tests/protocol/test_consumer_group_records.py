"""Kafka 4's consumer group records (KIP-848) byte for byte as Kafka 4.4 writes them.

The expected bytes are Kafka 4.4's: values serialized by its own generated classes
(org.apache.kafka.coordinator.group.generated.*, kafka-group-coordinator-4.4.0.jar) and
records read out of a log dir it wrote (tests/apache_kafka/ does that live). Each is
decoded to what Kafka meant, and what Brook writes is what Kafka writes."""

from __future__ import annotations

import uuid

import pytest

from brook.protocol import consumer_group_records as cgr

TOPIC = uuid.UUID("49cc9fac-45e9-4176-8e5f-28bd28de1229")
MEMBER_KEY = cgr.encode_key(cgr.ConsumerGroupMemberMetadataKey("kip848", "m"))


def test_keys_are_the_record_type_then_the_fields() -> None:
    assert cgr.encode_key(cgr.ConsumerGroupMetadataKey("kip848")).hex() == "000300066b6970383438"
    assert cgr.encode_key(cgr.ConsumerGroupRegularExpressionKey("g", "a.*")).hex() == (
        "0010" + "000167" + "0003612e2a"
    )
    decoded = cgr.decode(
        16, cgr.encode_key(cgr.ConsumerGroupRegularExpressionKey("g", "a.*")), None
    )
    assert decoded == (cgr.ConsumerGroupRegularExpressionKey("g", "a.*"), None)


@pytest.mark.parametrize(
    ("record_type", "value", "kafka"),
    [
        pytest.param(
            3,
            cgr.ConsumerGroupMetadataValue(epoch=3, metadata_hash=77),
            "000000000003010008000000000000004d",
            id="epoch-and-metadata-hash",
        ),
        pytest.param(
            6,
            cgr.ConsumerGroupTargetAssignmentMetadataValue(assignment_epoch=3),
            "00000000000300",
            id="target-epoch",
        ),
        pytest.param(
            5,
            cgr.ConsumerGroupMemberMetadataValue(
                instance_id="",
                rack_id="",
                client_id="c",
                client_host="h",
                subscribed_topic_regex="",
                server_assignor="",
                classic_member_metadata=cgr.ClassicMemberMetadata(
                    session_timeout_ms=5,
                    supported_protocols=(cgr.ClassicProtocol(name="range", metadata=b"xy"),),
                ),
            ),
            # The classic metadata, tag 0: its presence byte, then the struct.
            "00000101026302680101ffffffff010100110100000005020672616e67650378790000",
            id="member-with-classic-metadata",
        ),
    ],
)
def test_values_are_written_as_kafka_writes_them(
    record_type: int, value: cgr.ConsumerGroupValue, kafka: str
) -> None:
    assert cgr.encode_value(value).hex() == kafka
    assert cgr.decode(record_type, MEMBER_KEY, bytes.fromhex(kafka)) == (
        cgr.decode(record_type, MEMBER_KEY, None)[0],  # type: ignore[index]
        value,
    )


def test_records_from_a_log_dir_kafka_wrote() -> None:
    # A member of group kip848: no regex (Kafka writes ""), and a tag 0 holding the
    # single byte 0, Kafka's null classic metadata.
    member = bytes.fromhex(
        "0000"
        "00"
        "00"
        "096b69703834382d61"
        "0b2f3132372e302e302e31"
        "02"
        "0b636f6465632d6e6f6e65"
        "01"
        "000493e0"
        "00"
        "01"
        "00"
        "01"
        "00"
    )
    _, value = cgr.decode(5, MEMBER_KEY, member)  # type: ignore[misc]
    assert value == cgr.ConsumerGroupMemberMetadataValue(
        client_id="kip848-a",
        client_host="/127.0.0.1",
        subscribed_topic_names=("codec-none",),
        subscribed_topic_regex="",
        rebalance_timeout_ms=300000,
    )
    # A current assignment with Kafka 4.4's per-partition assignment epochs (tag 0 of
    # each topic), revoking partition 1: decoded, and written back to the same bytes.
    current = bytes.fromhex(
        "0000"
        "00000002"
        "00000002"
        "01"
        "02"
        "49cc9fac45e941768e5f28bd28de1229"
        "0200000000"
        "01"
        "00"
        "05"
        "0200000002"
        "02"
        "49cc9fac45e941768e5f28bd28de1229"
        "0200000001"
        "01"
        "00"
        "05"
        "0200000002"
        "00"
    )
    _, assignment = cgr.decode(8, MEMBER_KEY, current)  # type: ignore[misc]
    assert assignment == cgr.ConsumerGroupCurrentMemberAssignmentValue(
        member_epoch=2,
        previous_member_epoch=2,
        state=1,
        assigned_partitions=(
            cgr.TopicPartitions(topic_id=TOPIC, partitions=(0,), assignment_epochs=(2,)),
        ),
        partitions_pending_revocation=(
            cgr.TopicPartitions(topic_id=TOPIC, partitions=(1,), assignment_epochs=(2,)),
        ),
    )
    assert cgr.encode_value(assignment) == current
    # The target's epoch with Kafka 4.3's timestamp (tag 0).
    target = bytes.fromhex("000000000002010008000001a22497bd15")
    _, epoch = cgr.decode(6, MEMBER_KEY, target)  # type: ignore[misc]
    assert epoch == cgr.ConsumerGroupTargetAssignmentMetadataValue(
        assignment_epoch=2, assignment_timestamp=0x1A22497BD15
    )


def test_unknown_tags_are_skipped_and_newer_versions_left_alone() -> None:
    # Tag 7, unknown here: skipped, as Kafka's readers skip it.
    newer = bytes.fromhex("000000000004010702abcd")
    assert cgr.decode(3, MEMBER_KEY, newer)[1] == cgr.ConsumerGroupMetadataValue(epoch=4)  # type: ignore[index]
    assert cgr.decode(3, MEMBER_KEY, bytes.fromhex("00010000000400")) is None
    assert cgr.decode(17, MEMBER_KEY, None) is None  # a streams group's: not these


def test_bytes_that_lie_raise() -> None:
    with pytest.raises(cgr.ConsumerGroupRecordError):
        cgr.decode(8, MEMBER_KEY, bytes.fromhex("000000000002"))
