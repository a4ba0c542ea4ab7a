"""What the fuzzer sends: valid requests of every served API version, then mutated.

A valid request comes from the request's kio type (kio_strategies), with fields steered
towards what the broker knows (the fuzz topics, small partition numbers, offsets at the
edges, short timeouts) so that requests get past the first lookup. It is then encoded
with its header and, most of the time, damaged: bit flips, truncation, a lying size
prefix, lengths and counts overwritten with huge values, bytes inserted, the body
replaced by garbage, the header's API key or version changed to unknown ones, invalid
UTF-8 in a string, and for Produce, record batches broken inside with the CRC sealed
again so that the damage reaches the record parser.

The protected topic. The fuzz test checks that a topic written before the fuzzing
keeps every byte of its segments. Requests that may legitimately change a topic
(Produce, DeleteRecords, DeleteTopics, CreatePartitions, CreateTopics, AlterConfigs,
IncrementalAlterConfigs) never name it, so that any change to it is a bug; every
read-only request names it often, so that reading it is fuzzed too. Its name is
longer than any name the mutating requests are given (a bit flip keeps a length, and
random names stay shorter), and its topic-level configs pin retention and cleanup, so
that a fuzzed AlterConfigs of the broker's defaults cannot reach it either.
"""

from __future__ import annotations

import datetime
import io
import struct
import time
from dataclasses import dataclass
from functools import cache
from typing import Any

import crc32c
from hypothesis import strategies as st
from kio.index import load_entity_schema
from kio.serial import entity_writer
from kio.static.constants import EntityType
from kio.static.primitive import Records

from brook.protocol.api_table import SERVED, ApiKey, request_type
from brook.protocol.compression import Codec
from brook.protocol.record_batch import ATTRIBUTES_OFFSET, CRC_OFFSET, Record, build_batch

from .kio_strategies import entity
from .lying_lengths import length_variants, lie

PROTECTED = "protected-topic-0"
POOL = ("fuzz-a", "fuzz-b", "fuzz-c")
GROUPS = ("fuzz-group", "g")
# Configs a fuzzed topic may get; the protected topic pins the ones that delete data.
PROTECTED_CONFIGS = {
    "retention.ms": "-1",
    "retention.bytes": "-1",
    "cleanup.policy": "delete",
    "segment.ms": "604800000",
    "segment.bytes": "1073741824",
    "file.delete.delay.ms": "60000",
}
CONFIG_NAMES = (
    "retention.ms",
    "retention.bytes",
    "segment.bytes",
    "segment.ms",
    "cleanup.policy",
    "max.message.bytes",
    "message.timestamp.type",
    "min.insync.replicas",
    "compression.type",
    "flush.messages",
    "not.a.config",
)
MUTATING_APIS = frozenset(
    {
        ApiKey.PRODUCE,
        ApiKey.DELETE_RECORDS,
        ApiKey.DELETE_TOPICS,
        ApiKey.CREATE_PARTITIONS,
        ApiKey.CREATE_TOPICS,
        ApiKey.ALTER_CONFIGS,
        ApiKey.INCREMENTAL_ALTER_CONFIGS,
        # Markers: written directly, or by the coordinator into a transaction's partitions.
        ApiKey.WRITE_TXN_MARKERS,
        ApiKey.ADD_PARTITIONS_TO_TXN,
    }
)
INVALID_UTF8_MARK = b"UTF8MARK"
INVALID_UTF8 = b"\xc3\x28\xa0\xa1\xe2\x28\xa1\xff"  # as long as the mark
INTERESTING = (
    b"\xff\xff\xff\xff\x0f",  # compact length of four billion
    b"\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01",  # a varint longer than any Kafka reads
    b"\x7f\xff\xff\xff",  # int32 max
    b"\x80\x00\x00\x00",  # int32 min
    b"\xff\xff\xff\xff",  # -1: null
    b"\xff\xfe",  # int16 -2
    b"\x7f\xff",  # int16 max
    b"\x00",
    b"\x80",  # a varint that never ends
)

MUTATIONS = (
    *["valid"] * 3,
    *["bit flips"] * 2,
    "truncated",
    *["overwrite"] * 2,
    "insert",
    "garbage body",
    "unknown api",
    "unknown version",
    "size lies",
    *["lying length"] * 2,
)

SERVED_VERSIONS = [
    (api, version)
    for api, served in SERVED.items()
    for version in range(served.min_version, served.max_version + 1)
]


@dataclass(frozen=True)
class FuzzFrame:
    api: ApiKey
    version: int
    mutation: str
    wire: bytes  # size prefix included

    def __str__(self) -> str:
        return f"{self.api.name} v{self.version} [{self.mutation}] {self.wire.hex()}"


# --- field values -------------------------------------------------------------------


def _names(protected_allowed: bool) -> st.SearchStrategy[str]:
    # Hypothesis leans towards the first choices: the protected topic comes first.
    known = st.sampled_from((PROTECTED, *POOL) if protected_allowed else POOL)
    # Random names stay shorter than PROTECTED (see the module's docstring).
    legal = st.text("abcdefghijklmnopqrstuvwxyz0123456789._-", min_size=1, max_size=10)
    return st.one_of(known, known, known, legal, st.text(max_size=12))


def _ints(*edges: int, bits: int = 32) -> st.SearchStrategy[int]:
    low, high = -(2 ** (bits - 1)), 2 ** (bits - 1) - 1
    return st.one_of(st.sampled_from(edges), st.integers(low, high))


def _millis(*choices: int) -> st.SearchStrategy[datetime.timedelta]:
    return st.sampled_from(choices).map(lambda ms: datetime.timedelta(milliseconds=ms))


NOW_MS = int(time.time() * 1000)


def _batches(draw: st.DrawFn) -> bytes:
    records = [
        Record(
            i,
            # Mostly timestamps the broker takes, then ones it refuses (too far ahead).
            draw(st.sampled_from([NOW_MS, NOW_MS, NOW_MS, 0, -1, NOW_MS + 86_400_000, 2**62])),
            draw(st.one_of(st.none(), st.binary(max_size=8))),
            draw(st.one_of(st.none(), st.binary(max_size=40))),
            draw(st.lists(st.tuples(st.text(max_size=4), st.binary(max_size=4)), max_size=1)),
        )
        for i in range(draw(st.integers(1, 4)))
    ]
    codec = draw(st.sampled_from(list(Codec)))
    return build_batch(records, codec=codec, base_offset=draw(st.sampled_from([0, 5, -1])))


@st.composite
def record_sets(draw: st.DrawFn) -> Records | None:
    """A Produce's records: valid batches, or batches broken inside and sealed again."""
    kind = draw(
        st.sampled_from(["valid", "valid", "valid", "resealed", "bad-crc", "two", "garbage"])
    )
    if kind == "garbage":
        return Records(draw(st.binary(max_size=120)))
    data = bytearray(_batches(draw))
    if kind == "two":
        data += _batches(draw)
    elif kind in ("resealed", "bad-crc"):
        for _ in range(draw(st.integers(1, 4))):
            at = draw(st.integers(0, len(data) - 1))
            data[at] = draw(st.integers(0, 255))
        if kind == "resealed" and len(data) > ATTRIBUTES_OFFSET:
            struct.pack_into(">I", data, CRC_OFFSET, crc32c.crc32c(data[ATTRIBUTES_OFFSET:]))
    return Records(bytes(data))


def _subscription(version: int) -> st.SearchStrategy[bytes]:
    """A consumer's subscription, as JoinGroup carries it (the coordinator reads it)."""
    schema = load_entity_schema("consumer_protocol_subscription", version, EntityType.data)

    def encode(value: Any) -> bytes:
        buffer = io.BytesIO()
        entity_writer(schema)(buffer, value)
        return struct.pack(">h", version) + buffer.getvalue()

    return entity(schema, {"topics": _names(True)}).map(encode)


@cache
def _overrides(api: ApiKey) -> dict[str, Any]:
    topic = _names(protected_allowed=api not in MUTATING_APIS)
    overrides: dict[str, Any] = {
        # topics
        **dict.fromkeys(
            [
                "MetadataRequestTopic.name",
                "FetchTopic.topic",
                "ForgottenTopic.topic",
                "ListOffsetsTopic.name",
                "OffsetForLeaderTopic.topic",
                "OffsetCommitRequestTopic.name",
                "OffsetDeleteRequestTopic.name",
                "OffsetFetchRequestTopic.name",
                "OffsetFetchRequestTopics.name",
                "TopicProduceData.name",
                "CreatableTopic.name",
                "DeleteRecordsTopic.name",
                "DeleteTopicState.name",
                "DeleteTopicsRequest.topic_names",
                "CreatePartitionsTopic.name",
            ],
            topic,
        ),
        "resource_name": st.one_of(topic, st.sampled_from(["", "0", "1"])),
        "resource_type": st.sampled_from([2, 2, 2, 4, 8, 0, -1, 99]),
        "config_operation": st.sampled_from([0, 1, 2, 3, 4, -1]),
        "CreatableTopicConfig.name": st.one_of(st.sampled_from(CONFIG_NAMES), st.text(max_size=8)),
        "AlterableConfig.name": st.one_of(st.sampled_from(CONFIG_NAMES), st.text(max_size=8)),
        "configuration_keys": st.sampled_from(CONFIG_NAMES),
        "value": st.one_of(
            st.sampled_from(["-1", "0", "1", "1000", "delete", "compact", "gzip", "x"]),
            st.none(),
        ),
        # client quotas: refused values, or quotas too large to throttle anyone (a stored
        # small quota on a default entity would throttle the fuzzer's own checks)
        "OpData.key": st.sampled_from(
            ["producer_byte_rate", "consumer_byte_rate", "request_percentage", "x"]
        ),
        "OpData.value": st.sampled_from(
            [0.0, -1.0, -0.5, float("nan"), 1e12, 1e12 + 0.5, 1e20, float("inf")]
        ),
        # partitions, offsets, counts
        **dict.fromkeys(
            ["partition", "partition_index", "index", "partitions", "partition_indexes"],
            _ints(0, 0, 0, 1, 1, 2, -1, 2**31 - 1),
        ),
        **dict.fromkeys(
            ["fetch_offset", "offset", "committed_offset", "timestamp", "log_start_offset"],
            _ints(0, 1, 5, -1, -2, -3, 2**63 - 1, -(2**63), bits=64),
        ),
        "num_partitions": st.sampled_from([-1, 1, 2, 3, 0, -2, 10_001, 2**31 - 1]),
        "count": st.sampled_from([1, 2, 3, 4, 0, -1, 10_002, 2**31 - 1]),
        "replication_factor": st.sampled_from([-1, 1, 2, 0, -2]),
        "broker_ids": st.sampled_from([0, 0, 1, -1]),
        "acks": st.sampled_from([1, 1, -1, 0, 2, -2]),
        "records": record_sets(),
        "max_bytes": _ints(1 << 20, 0, -1, 2**31 - 1),
        "partition_max_bytes": _ints(1 << 20, 0, -1, 2**31 - 1),
        "session_id": _ints(0, 0, 1, -1),
        "session_epoch": _ints(-1, 0, 1, 2**31 - 1),
        "replica_id": st.sampled_from([-1, -1, 0, 1]),
        "isolation_level": st.sampled_from([0, 1, 2, -1]),
        # groups
        **dict.fromkeys(
            ["group_id", "groups", "groups_names", "key", "coordinator_keys"],
            st.one_of(st.sampled_from(GROUPS), st.text(max_size=8)),
        ),
        "member_id": st.one_of(st.just(""), st.text(max_size=8)),
        "protocol_type": st.sampled_from(["consumer", "connect", "", "x"]),
        "JoinGroupRequestProtocol.name": st.sampled_from(["range", "roundrobin", ""]),
        "JoinGroupRequestProtocol.metadata": st.one_of(
            st.binary(max_size=40), *(_subscription(v) for v in range(4))
        ),
        # transactions: a few ids, so requests meet the state earlier ones left
        "transactional_id": st.sampled_from(["txn-a", "txn-b", ""]),
        # timeouts: short, so that parked requests answer (or close) soon
        **dict.fromkeys(["max_wait", "timeout"], _millis(0, 10, 100, -1)),
        "session_timeout": _millis(6000, 10, 0, -1, 2**31 - 1),
        "rebalance_timeout": _millis(100, 0, -1, 2**31 - 1),
    }
    return overrides


_STRINGS = {"string": st.one_of(st.text(max_size=10), st.just(INVALID_UTF8_MARK.decode()))}


@cache
def valid_requests(api: ApiKey, version: int) -> st.SearchStrategy[Any]:
    return entity(request_type(api, version), _overrides(api), 3, _STRINGS)


# --- frames and their damage --------------------------------------------------------


def _header(api: int, version: int, correlation_id: int, client_id: str | None) -> bytes:
    # Header v1 for non-flexible requests, v2 (an empty tag section more) for flexible.
    flexible = request_type(api, version).__flexible__
    if client_id is None:
        name = b"\xff\xff"
    else:
        encoded = client_id.encode()
        name = struct.pack(">h", len(encoded)) + encoded
    return struct.pack(">hhi", api, version, correlation_id) + name + (b"\x00" if flexible else b"")


def _encode(request: Any) -> bytes:
    buffer = io.BytesIO()
    entity_writer(type(request))(buffer, request)
    return buffer.getvalue()


def _sized(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


@st.composite
def fuzz_frames(draw: st.DrawFn) -> FuzzFrame:
    api, version = draw(st.sampled_from(SERVED_VERSIONS))
    request = draw(valid_requests(api, version))
    client_id = draw(st.one_of(st.just("fuzz"), st.none(), st.just(INVALID_UTF8_MARK.decode())))
    payload = bytearray(_header(api, version, draw(st.integers(0, 2**31 - 1)), client_id))
    mutation = draw(st.sampled_from(MUTATIONS))
    variants = list(length_variants(request)) if mutation == "lying length" else []
    if variants:
        # One array, string or bytes length (found as lying_lengths.py finds them)
        # says four billion, int32 max or int16 max.
        path, kind, one, two = draw(st.sampled_from(variants))
        payload += lie(one, two, kind)
        mutation = f"lying length of {path}"
    else:
        payload += _encode(request)
        mutation = mutation.replace("lying length", "valid")
    if INVALID_UTF8_MARK in payload:
        payload = bytearray(payload.replace(INVALID_UTF8_MARK, INVALID_UTF8))
        mutation += " +invalid utf-8"
    wire = _mutate(draw, mutation.split(" +")[0], payload)  # a lying length is done
    return FuzzFrame(ApiKey(api), version, mutation, wire)


def _mutate(draw: st.DrawFn, mutation: str, payload: bytearray) -> bytes:
    size = len(payload)
    if mutation == "bit flips":
        for _ in range(draw(st.integers(1, 8))):
            at = draw(st.integers(0, size - 1))
            payload[at] ^= 1 << draw(st.integers(0, 7))
    elif mutation == "truncated":
        payload = payload[: draw(st.integers(0, size - 1))]
    elif mutation == "overwrite":
        for _ in range(draw(st.integers(1, 3))):
            value = draw(st.sampled_from(INTERESTING))
            at = draw(st.integers(8, max(size - 1, 8)))  # past api key, version, id
            payload[at : at + len(value)] = value
    elif mutation == "insert":
        at = draw(st.integers(0, size))
        payload[at:at] = draw(st.one_of(st.sampled_from(INTERESTING), st.binary(max_size=8)))
    elif mutation == "garbage body":
        payload = payload[:8] + draw(st.binary(max_size=200))
    elif mutation == "unknown api":
        struct.pack_into(">h", payload, 0, draw(st.sampled_from([-1, 4, 17, 60, 1000, 32767])))
    elif mutation == "unknown version":
        (api,) = struct.unpack_from(">h", payload, 0)
        served = SERVED[ApiKey(api)]
        version = draw(st.sampled_from([served.max_version + 1, -1, 32767, served.min_version - 1]))
        struct.pack_into(">h", payload, 2, version)
    elif mutation == "size lies":
        claimed = draw(st.sampled_from([-1, 0, 3, size + 1, size - 1, 2**31 - 1, 100 << 20]))
        return struct.pack(">i", claimed) + bytes(payload)
    return _sized(bytes(payload))
