"""Which API keys and versions Brook serves: the single table ApiVersions is built from.

Ranges follow Apache Kafka 4.x (KIP-896 floors). Produce is advertised from v0, as
Kafka 4.1 does, because older librdkafka releases refuse a broker whose Produce range
starts above v0; requests below the served floor still get UNSUPPORTED_VERSION.
Message bodies of every served version are kio's types, loaded once at import.
"""

from __future__ import annotations

import enum
from collections.abc import Iterator
from functools import cache
from typing import Any, NamedTuple

from kio.index import load_request_schema, load_response_schema
from kio.static.protocol import RequestPayload, ResponsePayload


class ApiKey(enum.IntEnum):
    PRODUCE = 0
    FETCH = 1
    LIST_OFFSETS = 2
    METADATA = 3
    CONTROLLED_SHUTDOWN = 7
    OFFSET_COMMIT = 8
    OFFSET_FETCH = 9
    FIND_COORDINATOR = 10
    JOIN_GROUP = 11
    HEARTBEAT = 12
    LEAVE_GROUP = 13
    SYNC_GROUP = 14
    DESCRIBE_GROUPS = 15
    LIST_GROUPS = 16
    SASL_HANDSHAKE = 17
    API_VERSIONS = 18
    CREATE_TOPICS = 19
    DELETE_TOPICS = 20
    DELETE_RECORDS = 21
    INIT_PRODUCER_ID = 22
    OFFSET_FOR_LEADER_EPOCH = 23
    ADD_PARTITIONS_TO_TXN = 24
    ADD_OFFSETS_TO_TXN = 25
    END_TXN = 26
    WRITE_TXN_MARKERS = 27
    TXN_OFFSET_COMMIT = 28
    DESCRIBE_ACLS = 29
    CREATE_ACLS = 30
    DELETE_ACLS = 31
    DESCRIBE_CONFIGS = 32
    ALTER_CONFIGS = 33
    ALTER_REPLICA_LOG_DIRS = 34
    DESCRIBE_LOG_DIRS = 35
    SASL_AUTHENTICATE = 36
    CREATE_PARTITIONS = 37
    DELETE_GROUPS = 42
    ELECT_LEADERS = 43
    INCREMENTAL_ALTER_CONFIGS = 44
    ALTER_PARTITION_REASSIGNMENTS = 45
    LIST_PARTITION_REASSIGNMENTS = 46
    OFFSET_DELETE = 47
    DESCRIBE_CLIENT_QUOTAS = 48
    ALTER_CLIENT_QUOTAS = 49
    DESCRIBE_USER_SCRAM_CREDENTIALS = 50
    ALTER_USER_SCRAM_CREDENTIALS = 51
    DESCRIBE_CLUSTER = 60
    DESCRIBE_PRODUCERS = 61
    DESCRIBE_TRANSACTIONS = 65
    LIST_TRANSACTIONS = 66
    CONSUMER_GROUP_HEARTBEAT = 68
    CONSUMER_GROUP_DESCRIBE = 69
    DESCRIBE_TOPIC_PARTITIONS = 75
    SHARE_GROUP_HEARTBEAT = 76
    SHARE_GROUP_DESCRIBE = 77
    SHARE_FETCH = 78
    SHARE_ACKNOWLEDGE = 79
    INITIALIZE_SHARE_GROUP_STATE = 83
    READ_SHARE_GROUP_STATE = 84
    WRITE_SHARE_GROUP_STATE = 85
    DELETE_SHARE_GROUP_STATE = 86
    READ_SHARE_GROUP_STATE_SUMMARY = 87
    DESCRIBE_SHARE_GROUP_OFFSETS = 90
    ALTER_SHARE_GROUP_OFFSETS = 91
    DELETE_SHARE_GROUP_OFFSETS = 92


class VersionRange(NamedTuple):
    min_version: int
    max_version: int
    advertised_min: int | None = None  # lower than min_version where Kafka advertises so

    def serves(self, version: int) -> bool:
        return self.min_version <= version <= self.max_version

    @property
    def advertised(self) -> tuple[int, int]:
        low = self.min_version if self.advertised_min is None else self.advertised_min
        return low, self.max_version


SERVED: dict[ApiKey, VersionRange] = {
    ApiKey.PRODUCE: VersionRange(3, 12, advertised_min=0),
    ApiKey.FETCH: VersionRange(4, 16),
    ApiKey.LIST_OFFSETS: VersionRange(1, 8),
    ApiKey.METADATA: VersionRange(0, 12),
    ApiKey.CONTROLLED_SHUTDOWN: VersionRange(1, 3),
    ApiKey.OFFSET_COMMIT: VersionRange(2, 9),
    ApiKey.OFFSET_FETCH: VersionRange(1, 9),
    ApiKey.FIND_COORDINATOR: VersionRange(0, 5),
    ApiKey.JOIN_GROUP: VersionRange(0, 9),
    ApiKey.HEARTBEAT: VersionRange(0, 4),
    ApiKey.LEAVE_GROUP: VersionRange(0, 5),
    ApiKey.SYNC_GROUP: VersionRange(0, 5),
    ApiKey.DESCRIBE_GROUPS: VersionRange(0, 6),
    ApiKey.LIST_GROUPS: VersionRange(0, 5),
    ApiKey.SASL_HANDSHAKE: VersionRange(0, 1),
    ApiKey.API_VERSIONS: VersionRange(0, 4),
    ApiKey.CREATE_TOPICS: VersionRange(2, 7),
    ApiKey.DELETE_TOPICS: VersionRange(1, 6),
    ApiKey.DELETE_RECORDS: VersionRange(0, 2),
    ApiKey.INIT_PRODUCER_ID: VersionRange(0, 5),
    ApiKey.OFFSET_FOR_LEADER_EPOCH: VersionRange(2, 4),
    ApiKey.ADD_PARTITIONS_TO_TXN: VersionRange(0, 5),
    ApiKey.ADD_OFFSETS_TO_TXN: VersionRange(0, 4),
    ApiKey.END_TXN: VersionRange(0, 5),
    ApiKey.WRITE_TXN_MARKERS: VersionRange(1, 1),
    ApiKey.TXN_OFFSET_COMMIT: VersionRange(0, 5),
    ApiKey.DESCRIBE_ACLS: VersionRange(1, 3),
    ApiKey.CREATE_ACLS: VersionRange(1, 3),
    ApiKey.DELETE_ACLS: VersionRange(1, 3),
    ApiKey.DESCRIBE_CONFIGS: VersionRange(1, 4),
    ApiKey.ALTER_CONFIGS: VersionRange(0, 2),
    ApiKey.ALTER_REPLICA_LOG_DIRS: VersionRange(1, 2),
    ApiKey.DESCRIBE_LOG_DIRS: VersionRange(1, 4),
    ApiKey.SASL_AUTHENTICATE: VersionRange(0, 2),
    ApiKey.CREATE_PARTITIONS: VersionRange(0, 3),
    ApiKey.DELETE_GROUPS: VersionRange(0, 2),
    ApiKey.ELECT_LEADERS: VersionRange(0, 2),
    ApiKey.INCREMENTAL_ALTER_CONFIGS: VersionRange(0, 1),
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: VersionRange(0, 0),
    ApiKey.LIST_PARTITION_REASSIGNMENTS: VersionRange(0, 0),
    ApiKey.OFFSET_DELETE: VersionRange(0, 0),
    ApiKey.DESCRIBE_CLIENT_QUOTAS: VersionRange(0, 1),
    ApiKey.ALTER_CLIENT_QUOTAS: VersionRange(0, 1),
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: VersionRange(0, 0),
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: VersionRange(0, 0),
    ApiKey.DESCRIBE_CLUSTER: VersionRange(0, 2),
    ApiKey.DESCRIBE_PRODUCERS: VersionRange(0, 0),
    ApiKey.DESCRIBE_TRANSACTIONS: VersionRange(0, 0),
    ApiKey.LIST_TRANSACTIONS: VersionRange(0, 1),
    ApiKey.CONSUMER_GROUP_HEARTBEAT: VersionRange(0, 1),
    ApiKey.CONSUMER_GROUP_DESCRIBE: VersionRange(0, 1),
    ApiKey.DESCRIBE_TOPIC_PARTITIONS: VersionRange(0, 0),
    ApiKey.SHARE_GROUP_HEARTBEAT: VersionRange(1, 1),
    ApiKey.SHARE_GROUP_DESCRIBE: VersionRange(1, 1),
    ApiKey.SHARE_FETCH: VersionRange(1, 2),
    ApiKey.SHARE_ACKNOWLEDGE: VersionRange(1, 2),
    ApiKey.INITIALIZE_SHARE_GROUP_STATE: VersionRange(0, 0),
    ApiKey.READ_SHARE_GROUP_STATE: VersionRange(0, 0),
    ApiKey.WRITE_SHARE_GROUP_STATE: VersionRange(0, 1),
    ApiKey.DELETE_SHARE_GROUP_STATE: VersionRange(0, 0),
    ApiKey.READ_SHARE_GROUP_STATE_SUMMARY: VersionRange(0, 1),
    ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS: VersionRange(0, 1),
    ApiKey.ALTER_SHARE_GROUP_OFFSETS: VersionRange(0, 0),
    ApiKey.DELETE_SHARE_GROUP_OFFSETS: VersionRange(0, 0),
}


@cache
def request_type(api_key: int, version: int) -> type[RequestPayload]:
    if api_key == ApiKey.CONTROLLED_SHUTDOWN:
        return _controlled_shutdown().REQUESTS[version]  # type: ignore[no-any-return]
    return load_request_schema(api_key, version)


@cache
def response_type(api_key: int, version: int) -> type[ResponsePayload]:
    if api_key == ApiKey.CONTROLLED_SHUTDOWN:
        return _controlled_shutdown().RESPONSES[version]  # type: ignore[no-any-return]
    return load_response_schema(api_key, version)


def _controlled_shutdown() -> Any:
    """The types kio lacks (Kafka 4 dropped the API), declared in kio's form."""
    from . import controlled_shutdown_schema

    return controlled_shutdown_schema


def served_versions() -> Iterator[tuple[ApiKey, int]]:
    """Every (API, version) Brook serves."""
    for api_key, served in SERVED.items():
        for version in range(served.min_version, served.max_version + 1):
            yield api_key, version
