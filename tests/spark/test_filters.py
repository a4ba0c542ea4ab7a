"""The kafka-segments source's pushed-down filters without Spark: which it takes, the
bounds it reads within, and SQL's three-valued logic on Arrow batches with nulls."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pyarrow as pa
from pyspark.sql.datasource import (
    EqualNullSafe,
    EqualTo,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    IsNotNull,
    IsNull,
    LessThan,
    LessThanOrEqual,
    Not,
    StringContains,
    StringStartsWith,
)

from brook.spark import schema
from brook.spark.filters import PushedFilters
from brook.spark.segment_rows import BatchBounds

MOMENT = datetime(2024, 5, 1, 12, 0, 0, 250_500, tzinfo=UTC)  # 250.5 ms past the second
MOMENT_MS = int(datetime(2024, 5, 1, 12, 0, 0, tzinfo=UTC).timestamp() * 1000) + 250


def push(mode: str, *filters):
    pushed = PushedFilters(mode)
    returned = list(pushed.push(list(filters)))
    return pushed, returned


def test_filters_taken_and_given_back():
    taken = [
        EqualTo(("topic",), "orders"),
        Not(In(("partition",), (1, 2))),
        StringStartsWith(("topic",), "ord"),
        GreaterThanOrEqual(("offset",), 10),
        Not(EqualTo(("batch_last_offset",), 3)),
        IsNotNull(("timestamp",)),
        LessThan(("timestamp",), MOMENT),
    ]
    given_back = [
        EqualTo(("key",), b"k"),  # another column
        GreaterThan(("position",), 5),
        EqualTo(("offset",), "10"),  # a value of the wrong type
        EqualTo(("offset",), True),
        In(("offset",), (1, None)),  # a null among IN's values
        EqualTo(("timestamp",), MOMENT.replace(tzinfo=None)),  # a naive timestamp
        EqualTo(("max_timestamp",), MOMENT),  # batches mode's column, not records'
        StringContains(("offset",), "1"),
        EqualTo(("headers", "key"), "h"),  # a nested field
        EqualNullSafe(("topic",), None),
    ]
    pushed, returned = push("records", *taken, *given_back)
    assert returned == given_back and all(a is b for a, b in zip(returned, given_back, strict=True))
    assert len(pushed.split_filters) == 3 and len(pushed.row_filters) == 4
    # Batches mode has no offset or timestamp column of its own name.
    _, returned = push("batches", EqualTo(("offset",), 1), GreaterThan(("max_timestamp",), MOMENT))
    assert returned == [EqualTo(("offset",), 1)]


def test_bounds_are_the_tightest_the_filters_imply():
    pushed, _ = push(
        "records",
        GreaterThan(("offset",), 10),
        GreaterThanOrEqual(("batch_base_offset",), 5),
        LessThanOrEqual(("batch_last_offset",), 90),
        In(("offset",), (40, 20, 95)),
        Not(LessThan(("offset",), 50)),  # a negation bounds nothing
        GreaterThan(("timestamp",), MOMENT),
    )
    # t * 1000 > 250.5 ms in microseconds holds from the next whole millisecond.
    assert pushed.bounds == BatchBounds(
        first_offset=20, last_offset=90, min_timestamp=MOMENT_MS + 1
    )
    pushed, _ = push(
        "records", GreaterThanOrEqual(("timestamp",), MOMENT - timedelta(microseconds=500))
    )
    assert pushed.bounds == BatchBounds(min_timestamp=MOMENT_MS)
    pushed, _ = push("records", LessThan(("offset",), 7), EqualTo(("topic",), "a"))
    assert pushed.bounds == BatchBounds(last_offset=6)
    assert push("records", IsNull(("offset",)))[0].bounds == BatchBounds()


def test_split_filters_decide_per_partition():
    pushed, _ = push(
        "records",
        In(("topic",), ("orders", "payments")),
        Not(EqualTo(("partition",), 1)),
        LessThan(("partition",), 3),
    )
    assert [p for p in range(5) if pushed.selects("orders", p)] == [0, 2]
    assert not pushed.selects("audit", 0)
    assert not push("records", IsNull(("topic",)))[0].selects("orders", 0)


def batch() -> pa.RecordBatch:
    """Offsets with nulls, as damaged rows have them."""
    columns = {
        "offset": pa.array([1, 2, None, 4, 5], pa.int64()),
        "timestamp": pa.array(
            [MOMENT_MS * 1000, None, 0, (MOMENT_MS + 1) * 1000, None], pa.int64()
        ).cast(schema.TIMESTAMP),
    }
    return pa.RecordBatch.from_pydict(columns)


def kept(*filters) -> list[int | None]:
    pushed, returned = push("records", *filters)
    assert returned == []
    return pushed.apply(batch()).column("offset").to_pylist()


def test_rows_kept_follow_sql_null_semantics():
    assert kept(GreaterThan(("offset",), 1)) == [2, 4, 5]
    assert kept(Not(GreaterThan(("offset",), 1))) == [1]  # NOT null is null: dropped
    assert kept(In(("offset",), (1, 4))) == [1, 4]
    assert kept(Not(In(("offset",), (1, 4)))) == [2, 5]
    assert kept(EqualNullSafe(("offset",), 2)) == [2]
    assert kept(Not(EqualNullSafe(("offset",), 2))) == [1, None, 4, 5]  # <=> is never null
    assert kept(IsNull(("offset",))) == [None]
    assert kept(Not(IsNotNull(("offset",)))) == [None]
    assert kept(GreaterThanOrEqual(("timestamp",), MOMENT)) == [4]  # 250 ms < 250.5 ms
    assert kept(LessThanOrEqual(("timestamp",), MOMENT)) == [1, None]
    assert kept(LessThanOrEqual(("timestamp",), MOMENT), GreaterThan(("offset",), 0)) == [1]
    assert kept(Not(EqualTo(("timestamp",), MOMENT.replace(microsecond=250_000)))) == [None, 4]
