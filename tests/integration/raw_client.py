"""A Kafka protocol client over a plain socket, for requests no client library lets a
test shape by hand (fetch session epochs, forgotten topics, exact versions).

It is Brook's own BlockingClient (broker/client.py, framing from protocol/client_wire.py):
kio's message types, the same as the broker's, over a real socket to a real broker.
"""

from __future__ import annotations

import sys
import uuid
from typing import Any

from brook.broker.client import BlockingClient
from brook.protocol.api_table import SERVED, ApiKey


class RawClient(BlockingClient):
    def __init__(self, port: int, client_id: str = "raw-test-client") -> None:
        super().__init__("127.0.0.1", port, client_id, timeout=15)


def topic_id(client: RawClient, topic: str) -> uuid.UUID:
    """The topic's id, as Metadata v12 names it."""
    from kio.schema.metadata.v12 import request as metadata12

    metadata = client.request(
        metadata12.MetadataRequest(
            topics=(metadata12.MetadataRequestTopic(topic_id=None, name=topic),),
            allow_auto_topic_creation=False,
            include_topic_authorized_operations=False,
        )
    )
    return metadata.topics[0].topic_id


def make(entity_type: type, **fields: Any) -> Any:
    """An entity of one version from a superset of fields (those it lacks are dropped)."""
    known = entity_type.__dataclass_fields__
    return entity_type(**{name: value for name, value in fields.items() if name in known})


def nested(request_type: type, name: str) -> type:
    """A nested entity type of the same API version as `request_type`."""
    return getattr(sys.modules[request_type.__module__], name)


def versions(api: ApiKey) -> list[int]:
    """Every version of an API that Brook serves."""
    served = SERVED[api]
    return list(range(served.min_version, served.max_version + 1))


def produce_request(
    topic: str, partition: int, records: bytes, version: int = 9, acks: int = -1
) -> Any:
    """A Produce request of one version carrying `records` to one partition."""
    import datetime

    from kio.index import load_request_schema

    request_type = load_request_schema(ApiKey.PRODUCE, version)
    partition_data = make(
        nested(request_type, "PartitionProduceData"), index=partition, records=records
    )
    return make(
        request_type,
        transactional_id=None,
        acks=acks,
        timeout=datetime.timedelta(seconds=5),
        topic_data=(
            make(
                nested(request_type, "TopicProduceData"),
                name=topic,
                partition_data=(partition_data,),
            ),
        ),
    )


def fetch_request(
    topic: str,
    *,
    partition: int = 0,
    offset: int = 0,
    max_wait_ms: int = 500,
    min_bytes: int = 1,
    max_bytes: int = 1_000_000,
    replica_id: int = -1,
) -> Any:
    """A sessionless Fetch v11 of one partition (the shape aiokafka sends); a
    `replica_id` >= 0 makes it a follower's fetch."""
    import datetime

    from kio.schema.fetch.v11 import request as fetch11

    return fetch11.FetchRequest(
        replica_id=replica_id,
        max_wait=datetime.timedelta(milliseconds=max_wait_ms),
        min_bytes=min_bytes,
        max_bytes=max_bytes,
        isolation_level=0,
        session_id=0,
        session_epoch=-1,
        topics=(
            fetch11.FetchTopic(
                topic=topic,
                partitions=(
                    fetch11.FetchPartition(
                        partition=partition,
                        current_leader_epoch=-1,
                        fetch_offset=offset,
                        log_start_offset=-1,
                        partition_max_bytes=max_bytes,
                    ),
                ),
            ),
        ),
        forgotten_topics_data=(),
        rack_id="",
    )
