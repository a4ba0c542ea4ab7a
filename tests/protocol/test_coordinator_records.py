"""Coordinator records against byte vectors built field by field from Kafka's schemas.

The vectors below never call the encoder: each is assembled here from the schema's
field list (int16 version prefix, then the fields of that version), so a test fails
if the module drifts from Kafka's layout rather than agreeing with itself.
"""

from __future__ import annotations

import dataclasses
import struct

import pytest

from brook.protocol import coordinator_records as cr

# --- field builders, independent of the module under test ------------------------------


def i8(value: int) -> bytes:
    return struct.pack(">b", value)


def i16(value: int) -> bytes:
    return struct.pack(">h", value)


def i32(value: int) -> bytes:
    return struct.pack(">i", value)


def i64(value: int) -> bytes:
    return struct.pack(">q", value)


def uvarint(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def string(text: str | None) -> bytes:
    """A non-flexible string: int16 length, -1 for null."""
    if text is None:
        return i16(-1)
    data = text.encode()
    return i16(len(data)) + data


def compact_string(text: str | None) -> bytes:
    """A flexible string: unsigned varint of length + 1, 0 for null."""
    if text is None:
        return uvarint(0)
    data = text.encode()
    return uvarint(len(data) + 1) + data


def legacy_bytes(data: bytes) -> bytes:
    return i32(len(data)) + data


def compact_bytes(data: bytes) -> bytes:
    return uvarint(len(data) + 1) + data


NO_TAGS = uvarint(0)


# --- keys -----------------------------------------------------------------------------


def test_offset_commit_key_bytes() -> None:
    expected = i16(1) + string("group-1") + string("orders") + i32(7)
    key = cr.OffsetCommitKey("group-1", "orders", 7)
    assert cr.encode_key(key) == expected
    assert cr.decode_key(expected) == key


def test_legacy_offset_commit_key_keeps_its_version_but_names_the_same_partition() -> None:
    legacy = i16(0) + string("group-1") + string("orders") + i32(7)
    key = cr.decode_key(legacy)
    assert isinstance(key, cr.OffsetCommitKey)
    assert key.key_version == 0
    assert key == cr.OffsetCommitKey("group-1", "orders", 7)
    assert hash(key) == hash(cr.OffsetCommitKey("group-1", "orders", 7))
    assert cr.encode_key(key) == legacy


def test_group_metadata_key_bytes() -> None:
    expected = i16(2) + string("group-1")
    assert cr.encode_key(cr.GroupMetadataKey("group-1")) == expected
    assert cr.decode_key(expected) == cr.GroupMetadataKey("group-1")


def test_transaction_log_key_bytes_and_topic_disambiguation() -> None:
    expected = i16(0) + string("txn-é")
    key = cr.TransactionLogKey("txn-é")
    assert cr.encode_key(key) == expected
    assert cr.decode_key(expected, cr.TRANSACTION_STATE_TOPIC) == key
    # Type 0 in `__consumer_offsets` is a legacy offset commit key, not a transactional id.
    with pytest.raises(cr.CoordinatorRecordError):
        cr.decode_key(expected, cr.CONSUMER_OFFSETS_TOPIC)


def test_decode_key_refuses_other_topics() -> None:
    with pytest.raises(ValueError):
        cr.decode_key(i16(2) + string("g"), "orders")


@pytest.mark.parametrize("version", [3, 4, 5, 8, 16, 100, -1])
def test_unknown_consumer_offsets_key_types_decode_to_unknown_record(version: int) -> None:
    # KIP-848 records (types 3+) and anything newer: recognised, not decoded.
    data = i16(version) + string("group-1") + string("member-1")
    key = cr.decode_key(data)
    assert key == cr.UnknownRecord(version, data)
    value = i16(0) + b"\x01\x02\x03"
    assert cr.decode_value(key, value) == cr.UnknownValue(0, value)
    assert cr.decode_value(key, None) is None
    # Passed on unchanged, e.g. by a compaction that does not understand them.
    assert cr.encode_key(key) == data
    assert cr.encode_value(cr.UnknownValue(0, value)) == value


def test_unknown_transaction_state_key_type() -> None:
    data = i16(1) + string("txn")
    assert cr.decode_key(data, cr.TRANSACTION_STATE_TOPIC) == cr.UnknownRecord(1, data)


@pytest.mark.parametrize("data", [b"", b"\x00", b"\x00\x01\x00", b"\x00\x01\x00\x05ab"])
def test_truncated_keys_raise(data: bytes) -> None:
    with pytest.raises(cr.CoordinatorRecordError):
        cr.decode_key(data)


# --- OffsetCommitValue ------------------------------------------------------------------

OFFSET_VALUE = cr.OffsetCommitValue(
    offset=42,
    leader_epoch=5,
    metadata="checkpoint ✓",
    commit_timestamp=1_700_000_000_123,
    expire_timestamp=1_700_086_400_123,
)


def offset_value_vector(version: int, value: cr.OffsetCommitValue) -> bytes:
    """OffsetCommitValue as its schema lays it out, field by field."""
    out = i16(version) + i64(value.offset)
    if version >= 3:
        out += i32(value.leader_epoch)
    out += compact_string(value.metadata) if version >= 4 else string(value.metadata)
    out += i64(value.commit_timestamp)
    if version == 1:
        out += i64(value.expire_timestamp)
    if version >= 4:
        out += NO_TAGS
    return out


def offset_value_as_read(version: int) -> cr.OffsetCommitValue:
    """What a reader of `version` sees: fields the version lacks take their defaults."""
    return dataclasses.replace(
        OFFSET_VALUE,
        leader_epoch=OFFSET_VALUE.leader_epoch if version >= 3 else -1,
        expire_timestamp=OFFSET_VALUE.expire_timestamp if version == 1 else -1,
    )


@pytest.mark.parametrize("version", range(5))
def test_offset_commit_value_every_version(version: int) -> None:
    key = cr.OffsetCommitKey("g", "t", 0)
    expected = offset_value_vector(version, OFFSET_VALUE)
    assert cr.encode_value(OFFSET_VALUE, version) == expected
    decoded = cr.decode_value(key, expected)
    assert decoded == offset_value_as_read(version)
    assert cr.encode_value(decoded, version) == expected


def test_offset_commit_value_v3_literal_bytes() -> None:
    value = cr.OffsetCommitValue(offset=1, leader_epoch=0, metadata="", commit_timestamp=2)
    assert cr.encode_value(value) == bytes.fromhex(
        "0003"  # version
        "0000000000000001"  # offset
        "00000000"  # leader epoch
        "0000"  # metadata ""
        "0000000000000002"  # commit timestamp
    )


def test_offset_commit_value_default_versions_are_kafkas() -> None:
    without_expiry = dataclasses.replace(OFFSET_VALUE, expire_timestamp=-1)
    assert cr.encode_value(without_expiry) == offset_value_vector(3, without_expiry)
    assert cr.encode_value(OFFSET_VALUE) == offset_value_vector(1, OFFSET_VALUE)


def test_offset_commit_value_v4_skips_unknown_tagged_fields() -> None:
    # A newer Kafka may add tagged fields; a reader that does not know them skips them.
    data = offset_value_vector(4, OFFSET_VALUE)[:-1] + uvarint(1) + uvarint(9) + uvarint(3)
    data += b"abc"
    assert cr.decode_value(cr.OffsetCommitKey("g", "t", 0), data) == offset_value_as_read(4)


def test_offset_commit_value_of_unknown_version() -> None:
    data = i16(5) + i64(1) + b"\x00"
    assert cr.decode_value(cr.OffsetCommitKey("g", "t", 0), data) == cr.UnknownValue(5, data)
    with pytest.raises(ValueError):
        cr.encode_value(OFFSET_VALUE, 5)


@pytest.mark.parametrize("cut", [1, 2, 9, 12, 20])
def test_truncated_offset_commit_value_raises(cut: int) -> None:
    data = offset_value_vector(3, OFFSET_VALUE)[:cut]
    with pytest.raises(cr.CoordinatorRecordError):
        cr.decode_value(cr.OffsetCommitKey("g", "t", 0), data)


# --- GroupMetadataValue -----------------------------------------------------------------

MEMBERS = [
    cr.MemberMetadata(
        member_id="consumer-1-6c1e",
        group_instance_id="instance-a",
        client_id="consumer-1",
        client_host="/10.0.0.7",
        rebalance_timeout=300_000,
        session_timeout=45_000,
        subscription=b"\x00\x03sub",
        assignment=b"\x00\x03\x00\x00\x00\x01",
    ),
    cr.MemberMetadata(
        member_id="consumer-2-99aa",
        group_instance_id=None,
        client_id="consumer-2",
        client_host="/10.0.0.8",
        rebalance_timeout=60_000,
        session_timeout=10_000,
        subscription=b"",
        assignment=b"",
    ),
]
GROUP_VALUE = cr.GroupMetadataValue(
    protocol_type="consumer",
    generation=7,
    protocol="cooperative-sticky",
    leader="consumer-1-6c1e",
    current_state_timestamp=1_700_000_000_000,
    members=MEMBERS,
)


def group_value_vector(version: int, value: cr.GroupMetadataValue) -> bytes:
    flexible = version >= 4
    text = compact_string if flexible else string
    blob = compact_bytes if flexible else legacy_bytes
    out = i16(version) + text(value.protocol_type) + i32(value.generation)
    out += text(value.protocol) + text(value.leader)
    if version >= 2:
        out += i64(value.current_state_timestamp)
    out += uvarint(len(value.members) + 1) if flexible else i32(len(value.members))
    for member in value.members:
        out += text(member.member_id)
        if version >= 3:
            out += text(member.group_instance_id)
        out += text(member.client_id) + text(member.client_host)
        if version >= 1:
            out += i32(member.rebalance_timeout)
        out += i32(member.session_timeout)
        out += blob(member.subscription) + blob(member.assignment)
        if flexible:
            out += NO_TAGS
    if flexible:
        out += NO_TAGS
    return out


def group_value_as_read(version: int) -> cr.GroupMetadataValue:
    return dataclasses.replace(
        GROUP_VALUE,
        current_state_timestamp=GROUP_VALUE.current_state_timestamp if version >= 2 else -1,
        members=[
            dataclasses.replace(
                member,
                group_instance_id=member.group_instance_id if version >= 3 else None,
                rebalance_timeout=member.rebalance_timeout if version >= 1 else 0,
            )
            for member in MEMBERS
        ],
    )


@pytest.mark.parametrize("version", range(5))
def test_group_metadata_value_every_version(version: int) -> None:
    key = cr.GroupMetadataKey("group-1")
    expected = group_value_vector(version, GROUP_VALUE)
    assert cr.encode_value(GROUP_VALUE, version) == expected
    decoded = cr.decode_value(key, expected)
    assert decoded == group_value_as_read(version)
    assert cr.encode_value(decoded, version) == expected


def test_group_metadata_value_default_version_is_3() -> None:
    assert cr.encode_value(GROUP_VALUE) == group_value_vector(3, GROUP_VALUE)


def test_empty_group_as_kafka_writes_it() -> None:
    # An empty group: protocol type "", null protocol and leader, no members.
    value = cr.GroupMetadataValue(
        protocol_type="", generation=0, protocol=None, leader=None, current_state_timestamp=5
    )
    expected = i16(3) + string("") + i32(0) + i16(-1) + i16(-1) + i64(5) + i32(0)
    assert cr.encode_value(value) == expected
    assert cr.decode_value(cr.GroupMetadataKey("g"), expected) == value


def test_group_metadata_value_with_null_members_raises() -> None:
    data = i16(3) + string("") + i32(0) + i16(-1) + i16(-1) + i64(5) + i32(-1)
    with pytest.raises(cr.CoordinatorRecordError):
        cr.decode_value(cr.GroupMetadataKey("g"), data)


# --- TransactionLogValue ----------------------------------------------------------------

TXN_VALUE = cr.TransactionLogValue(
    producer_id=4000,
    previous_producer_id=3999,
    next_producer_id=4001,
    producer_epoch=3,
    transaction_timeout_ms=60_000,
    transaction_status=cr.TransactionStatus.PREPARE_COMMIT,
    transaction_partitions=[
        cr.TxnPartitions(topic="orders", partition_ids=[0, 2]),
        cr.TxnPartitions(topic="__consumer_offsets", partition_ids=[17]),
    ],
    transaction_last_update_timestamp_ms=1_700_000_000_500,
    transaction_start_timestamp_ms=1_700_000_000_000,
    client_transaction_version=2,
    next_producer_epoch=-1,
)


def txn_value_vector(version: int, value: cr.TransactionLogValue) -> bytes:
    flexible = version >= 1
    out = i16(version) + i64(value.producer_id) + i16(value.producer_epoch)
    out += i32(value.transaction_timeout_ms) + i8(value.transaction_status)
    partitions = value.transaction_partitions
    if partitions is None:
        out += uvarint(0) if flexible else i32(-1)
    else:
        out += uvarint(len(partitions) + 1) if flexible else i32(len(partitions))
        for entry in partitions:
            out += compact_string(entry.topic) if flexible else string(entry.topic)
            ids = entry.partition_ids
            out += uvarint(len(ids) + 1) if flexible else i32(len(ids))
            out += b"".join(i32(partition) for partition in ids)
            if flexible:
                out += NO_TAGS
    out += i64(value.transaction_last_update_timestamp_ms)
    out += i64(value.transaction_start_timestamp_ms)
    if flexible:
        tags = []
        if value.previous_producer_id != -1:
            tags.append(uvarint(0) + uvarint(8) + i64(value.previous_producer_id))
        if value.next_producer_id != -1:
            tags.append(uvarint(1) + uvarint(8) + i64(value.next_producer_id))
        if value.client_transaction_version != 0:
            tags.append(uvarint(2) + uvarint(2) + i16(value.client_transaction_version))
        if value.next_producer_epoch != -1:
            tags.append(uvarint(3) + uvarint(2) + i16(value.next_producer_epoch))
        out += uvarint(len(tags)) + b"".join(tags)
    return out


def txn_value_as_read(version: int, value: cr.TransactionLogValue) -> cr.TransactionLogValue:
    if version >= 1:
        return value
    return dataclasses.replace(
        value,
        previous_producer_id=-1,
        next_producer_id=-1,
        client_transaction_version=0,
        next_producer_epoch=-1,
    )


@pytest.mark.parametrize("version", range(2))
def test_transaction_log_value_every_version(version: int) -> None:
    key = cr.TransactionLogKey("txn-1")
    expected = txn_value_vector(version, TXN_VALUE)
    assert cr.encode_value(TXN_VALUE, version) == expected
    decoded = cr.decode_value(key, expected)
    assert decoded == txn_value_as_read(version, TXN_VALUE)
    assert cr.encode_value(decoded, version) == expected


def test_transaction_log_value_v1_literal_tagged_section() -> None:
    value = cr.TransactionLogValue(
        producer_id=1,
        previous_producer_id=7,
        producer_epoch=0,
        transaction_timeout_ms=1000,
        transaction_status=cr.TransactionStatus.EMPTY,
        transaction_partitions=None,
        transaction_last_update_timestamp_ms=2,
        transaction_start_timestamp_ms=-1,
    )
    assert cr.encode_value(value) == bytes.fromhex(
        "0001"  # version
        "0000000000000001"  # producer id
        "0000"  # producer epoch
        "000003e8"  # timeout
        "00"  # Empty
        "00"  # null partitions
        "0000000000000002"  # last update
        "ffffffffffffffff"  # start
        "01"
        "00"
        "08"
        "0000000000000007"  # one tagged field: tag 0, 8 bytes
    )


@pytest.mark.parametrize("version", range(2))
def test_empty_transaction_writes_null_partitions(version: int) -> None:
    value = dataclasses.replace(
        TXN_VALUE,
        transaction_status=cr.TransactionStatus.EMPTY,
        transaction_partitions=None,
        previous_producer_id=-1,
        next_producer_id=-1,
        client_transaction_version=0,
    )
    expected = txn_value_vector(version, value)
    assert cr.encode_value(value, version) == expected
    decoded = cr.decode_value(cr.TransactionLogKey("t"), expected)
    assert decoded.transaction_partitions is None


def test_completed_transaction_keeps_an_empty_partition_list() -> None:
    value = dataclasses.replace(
        TXN_VALUE,
        transaction_status=cr.TransactionStatus.COMPLETE_COMMIT,
        transaction_partitions=[],
    )
    decoded = cr.decode_value(cr.TransactionLogKey("t"), cr.encode_value(value))
    assert decoded.transaction_partitions == []


def test_transaction_log_value_default_version_is_1_and_v0_drops_tagged_fields() -> None:
    assert cr.encode_value(TXN_VALUE) == txn_value_vector(1, TXN_VALUE)
    assert cr.encode_value(TXN_VALUE, 0) == txn_value_vector(0, TXN_VALUE)


def test_transaction_log_value_reads_next_producer_epoch_and_skips_unknown_tags() -> None:
    value = dataclasses.replace(TXN_VALUE, next_producer_epoch=4)
    data = txn_value_vector(1, value)
    assert cr.decode_value(cr.TransactionLogKey("t"), data) == value
    plain = dataclasses.replace(
        TXN_VALUE, previous_producer_id=-1, next_producer_id=-1, client_transaction_version=0
    )
    data = txn_value_vector(1, plain)[:-1] + uvarint(1) + uvarint(40) + uvarint(2) + b"zz"
    assert cr.decode_value(cr.TransactionLogKey("t"), data) == plain


def test_transaction_status_ids() -> None:
    assert [(status.name, int(status)) for status in cr.TransactionStatus] == [
        ("EMPTY", 0),
        ("ONGOING", 1),
        ("PREPARE_COMMIT", 2),
        ("PREPARE_ABORT", 3),
        ("COMPLETE_COMMIT", 4),
        ("COMPLETE_ABORT", 5),
        ("DEAD", 6),
        ("PREPARE_EPOCH_FENCE", 7),
    ]


def test_transaction_log_value_of_unknown_version() -> None:
    data = i16(2) + b"\x00" * 30
    assert cr.decode_value(cr.TransactionLogKey("t"), data) == cr.UnknownValue(2, data)


# --- tombstones ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "key",
    [
        cr.OffsetCommitKey("g", "t", 1),
        cr.GroupMetadataKey("g"),
        cr.TransactionLogKey("t"),
    ],
)
def test_tombstones(key: cr.Key) -> None:
    assert cr.encode_value(None) is None
    assert cr.decode_value(key, None) is None


# --- control records ----------------------------------------------------------------------


def test_control_record_keys_and_end_txn_marker_bytes() -> None:
    commit = i16(0) + i16(1)
    abort = i16(0) + i16(0)
    assert cr.encode_key(cr.ControlRecordKey(cr.ControlRecordType.COMMIT)) == commit
    assert cr.encode_key(cr.ControlRecordKey(cr.ControlRecordType.ABORT)) == abort
    assert cr.decode_control_key(commit) == cr.ControlRecordKey(cr.ControlRecordType.COMMIT)
    assert cr.decode_control_key(abort).type == cr.ControlRecordType.ABORT

    marker = i16(0) + i32(12)
    assert cr.encode_value(cr.EndTxnMarker(coordinator_epoch=12)) == marker
    key = cr.decode_control_key(commit)
    assert cr.decode_value(key, marker) == cr.EndTxnMarker(coordinator_epoch=12)


def test_newer_control_versions_parse_as_v0_like_kafka() -> None:
    key = cr.decode_control_key(i16(1) + i16(0) + b"extra")
    assert key == cr.ControlRecordKey(cr.ControlRecordType.ABORT, version=1)
    assert cr.decode_value(key, i16(3) + i32(-7) + b"more") == cr.EndTxnMarker(coordinator_epoch=-7)


def test_other_control_types_are_not_markers() -> None:
    key = cr.decode_control_key(i16(0) + i16(2))  # a KRaft leader change
    assert key.type == cr.ControlRecordType.LEADER_CHANGE
    value = i16(0) + b"\x00\x00"
    assert cr.decode_value(key, value) == cr.UnknownValue(0, value)
    assert cr.decode_control_key(i16(0) + i16(99)).type == 99


@pytest.mark.parametrize("data", [b"", b"\x00\x00\x00", i16(-1) + i16(1)])
def test_bad_control_keys_raise(data: bytes) -> None:
    with pytest.raises(cr.CoordinatorRecordError):
        cr.decode_control_key(data)


@pytest.mark.parametrize("data", [i16(0) + b"\x00", i16(-1) + i32(1)])
def test_bad_end_txn_markers_raise(data: bytes) -> None:
    with pytest.raises(cr.CoordinatorRecordError):
        cr.decode_value(cr.ControlRecordKey(cr.ControlRecordType.COMMIT), data)


# --- partition mapping ------------------------------------------------------------------


def java_hash_reference(text: str) -> int:
    """String.hashCode by its definition: the polynomial in 31 over UTF-16 units, mod 2^32.

    Computed with unbounded integers and reduced once at the end, which is equivalent
    to Java's wrapping arithmetic at every step.
    """
    units: list[int] = []
    for char in text:
        code = ord(char)
        if code > 0xFFFF:
            code -= 0x10000
            units += [0xD800 + (code >> 10), 0xDC00 + (code & 0x3FF)]
        else:
            units.append(code)
    n = len(units)
    value = sum(unit * 31 ** (n - 1 - i) for i, unit in enumerate(units)) % 2**32
    return value - 2**32 if value >= 2**31 else value


def kafka_partition_reference(text: str, partitions: int) -> int:
    h = java_hash_reference(text)
    return (0 if h == -(2**31) else abs(h)) % partitions


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", 0),
        ("a", 97),
        ("hello", 99162322),  # known from Java
        ("Aa", 2112),  # a well-known Java collision ...
        ("BB", 2112),  # ... with this one
        ("polygenelubricants", -(2**31)),  # well known to hash to Integer.MIN_VALUE
    ],
)
def test_java_hash_code_known_values(text: str, expected: int) -> None:
    assert cr.java_string_hash_code(text) == expected
    assert java_hash_reference(text) == expected


@pytest.mark.parametrize(
    "text",
    ["my-group", "console-consumer-12345", "grüppe", "组", "emoji-😀", "x" * 300, "\ud800"],
)
def test_java_hash_code_matches_the_definition(text: str) -> None:
    assert cr.java_string_hash_code(text) == java_hash_reference(text)


def test_group_partition_for_50_partitions() -> None:
    assert cr.group_partition("hello", 50) == 99162322 % 50 == 22
    assert cr.group_partition("Aa", 50) == 2112 % 50 == 12
    # Utils.abs maps Integer.MIN_VALUE to 0, where Math.abs would stay negative.
    assert cr.group_partition("polygenelubricants", 50) == 0
    assert cr.java_utils_abs(-(2**31)) == 0
    assert cr.java_utils_abs(-5) == 5
    for name in ["my-group", "payments", "console-consumer-1", "组", "emoji-😀", "Zz" * 40]:
        expected = kafka_partition_reference(name, 50)
        assert cr.group_partition(name, 50) == expected
        assert cr.transactional_id_partition(name, 50) == expected
        assert 0 <= expected < 50
    assert any(java_hash_reference(n) < 0 for n in ["console-consumer-1", "Zz" * 40])


def test_partition_count_must_be_positive() -> None:
    with pytest.raises(ValueError):
        cr.group_partition("g", 0)
