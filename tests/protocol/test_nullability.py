"""The non-nullable check on decoded requests: nulls where the schema allows them pass,
others are refused with the field's path, as Kafka's parser words it."""

from __future__ import annotations

import datetime

import pytest
from kio.schema.fetch.v11 import request as fetch11
from kio.schema.metadata.v0.request import MetadataRequest as MetadataV0
from kio.schema.metadata.v1.request import MetadataRequest as MetadataV1

from brook.protocol.errors import InvalidRequestError
from brook.protocol.nullability import check_non_nullable


def _fetch(topics: object, partitions: object = ()) -> fetch11.FetchRequest:
    return fetch11.FetchRequest(
        replica_id=-1,
        max_wait=datetime.timedelta(0),
        min_bytes=1,
        max_bytes=1,
        isolation_level=0,
        session_id=0,
        session_epoch=-1,
        topics=topics,  # type: ignore[arg-type]
        forgotten_topics_data=(
            fetch11.ForgottenTopic(topic="t", partitions=partitions),  # type: ignore[arg-type]
        ),
        rack_id="",
    )


def test_nullable_array_may_be_null() -> None:
    check_non_nullable(MetadataV1(topics=None))  # "all topics" from v1


def test_array_that_became_nullable_in_a_later_version_may_not_be_null_before() -> None:
    with pytest.raises(InvalidRequestError, match="non-nullable field topics was serialized"):
        check_non_nullable(MetadataV0(topics=None))  # type: ignore[arg-type]


def test_nested_null_is_named_by_its_path() -> None:
    with pytest.raises(InvalidRequestError, match=r"field forgotten_topics_data\.partitions was"):
        check_non_nullable(_fetch(topics=(), partitions=None))


def test_valid_request_passes() -> None:
    check_non_nullable(_fetch(topics=(), partitions=(0, 1)))
