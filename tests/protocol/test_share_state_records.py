"""`__share_group_state` records (KIP-932): ShareSnapshot and ShareUpdate keys and values
byte for byte as Kafka 4.4 writes them (the expected bytes are its own generated classes',
org.apache.kafka.coordinator.share.generated.*, kafka-share-coordinator-4.4.0.jar), the
delivery-complete count a tagged field written only when known, the coordinator key in
Kafka's form, and bytes that are not a share state's refused."""

from __future__ import annotations

import uuid

import pytest

from brook.protocol import share_state_records as sr
from brook.protocol.coordinator_records import CoordinatorRecordError

TOPIC = uuid.UUID("0123456789abcdef0123456789abcdef")


def test_a_snapshot_reads_back_as_written():
    value = sr.ShareSnapshotValue(
        snapshot_epoch=3,
        state_epoch=1,
        leader_epoch=7,
        start_offset=42,
        delivery_complete_count=5,
        create_timestamp=1000,
        write_timestamp=2000,
        state_batches=(sr.PersistedStateBatch(42, 50, 2, 1), sr.PersistedStateBatch(51, 51, 4, 3)),
    )
    assert sr.decode_value(sr.SNAPSHOT_TYPE, sr.encode_value(value)) == value
    key = sr.ShareStateKey(sr.SNAPSHOT_TYPE, "group", TOPIC, 3)
    assert sr.decode_key(sr.encode_key(key)) == key


def test_snapshot_update_and_key_are_kafkas_bytes():
    snapshot = sr.ShareSnapshotValue(
        snapshot_epoch=3,
        state_epoch=1,
        leader_epoch=7,
        start_offset=42,
        delivery_complete_count=5,
        create_timestamp=1000,
        write_timestamp=2000,
        state_batches=(sr.PersistedStateBatch(42, 50, 2, 1),),
    )
    assert sr.encode_value(snapshot).hex() == (
        "0000000000030000000100000007000000000000002a00000000000003e800000000000007d0"
        "02000000000000002a00000000000000320200010001000400000005"
    )
    update = sr.ShareUpdateValue(
        snapshot_epoch=3,
        leader_epoch=7,
        start_offset=-1,
        state_batches=(sr.PersistedStateBatch(42, 50, 4, 2),),
    )
    assert sr.encode_value(update).hex() == (
        "00000000000300000007ffffffffffffffff02000000000000002a00000000000000320400020000"
    )
    key = sr.ShareStateKey(sr.SNAPSHOT_TYPE, "g", uuid.UUID(int=(1 << 64) | 2), 3)
    assert sr.encode_key(key).hex() == "00000001670000000000000001000000000000000200000003"


def test_an_update_without_a_delivery_complete_count_writes_no_tag():
    value = sr.ShareUpdateValue(
        snapshot_epoch=3,
        leader_epoch=7,
        start_offset=-1,
        state_batches=(sr.PersistedStateBatch(42, 50, 4, 2),),
    )
    encoded = sr.encode_value(value)
    # The struct ends with an empty tagged-field section (one zero byte).
    assert encoded.endswith(b"\x00\x00")
    assert sr.decode_value(sr.UPDATE_TYPE, encoded) == value
    counted = sr.ShareUpdateValue(
        snapshot_epoch=3, leader_epoch=7, start_offset=-1, delivery_complete_count=9
    )
    assert (
        len(sr.encode_value(counted))
        == len(
            sr.encode_value(sr.ShareUpdateValue(snapshot_epoch=3, leader_epoch=7, start_offset=-1))
        )
        + 6
    )
    assert sr.decode_value(sr.UPDATE_TYPE, sr.encode_value(counted)) == counted


def test_the_coordinator_key_uses_kafkas_topic_id_form():
    key = sr.coordinator_key("group", TOPIC, 4)
    assert key == "group:ASNFZ4mrze8BI0VniavN7w:4"


@pytest.mark.parametrize(
    "key",
    [b"\x00\x02\x00\x01g", b"\x00\x00\x00\x05gr", b""],
)
def test_bytes_that_are_no_share_state_key_are_refused(key):
    with pytest.raises(CoordinatorRecordError):
        sr.decode_key(key)


def test_an_unknown_value_version_is_refused():
    value = sr.encode_value(sr.ShareUpdateValue(snapshot_epoch=0, leader_epoch=0, start_offset=0))
    with pytest.raises(CoordinatorRecordError):
        sr.decode_value(sr.UPDATE_TYPE, b"\x00\x01" + value[2:])
