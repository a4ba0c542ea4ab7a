"""The filters Spark pushes down to the kafka-segments source (DataSourceReader.pushFilters,
Spark 4.1+), what the source makes of them, and which it gives back.

Taken, and applied exactly (Spark does not apply them again):

- on `topic` and `partition`: comparisons, IN, string matches (topic) and their negations.
  Every row of a split has the split's topic and partition, so planning evaluates them
  once per partition and plans no split for a partition they exclude.
- on the offset columns (`offset`, `batch_base_offset`, `batch_last_offset`) and on the
  timestamp column of the mode (`timestamp` in records mode, `max_timestamp` in batches
  mode): comparisons, IN, IS [NOT] NULL and their negations. A task applies them to each
  Arrow batch it yields, with SQL's null semantics (a null never passes a comparison, so
  a damaged batch's row, whose offset is null, is not kept by `offset > 5`). The bounds
  they imply (BatchBounds) narrow what is read: the segments and byte ranges planned,
  the batches decoded.

Anything else (another column, a value of an unexpected type, a null literal) goes back
to Spark, which applies it to the rows read: correctness first, speed where it is sure.
"""

from __future__ import annotations

import datetime
import operator
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa  # type: ignore[import-untyped]  # pyarrow ships no type information
import pyarrow.compute as pc  # type: ignore[import-untyped]  # pyarrow ships no type information
from pyspark.sql.datasource import (
    EqualNullSafe,
    EqualTo,
    Filter,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    IsNotNull,
    IsNull,
    LessThan,
    LessThanOrEqual,
    Not,
    StringContains,
    StringEndsWith,
    StringStartsWith,
)

from . import schema
from .segment_rows import UNBOUNDED, BatchBounds

OFFSET_COLUMNS = ("offset", "batch_base_offset", "batch_last_offset")  # (no offset in batches)
TIMESTAMP_COLUMN = {"records": "timestamp", "batches": "max_timestamp"}
_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)
_MICROSECOND = datetime.timedelta(microseconds=1)

_COMPARISONS: dict[type[Filter], Callable[[Any, Any], Any]] = {
    EqualTo: pc.equal,
    GreaterThan: pc.greater,
    GreaterThanOrEqual: pc.greater_equal,
    LessThan: pc.less,
    LessThanOrEqual: pc.less_equal,
}
_PYTHON_COMPARISONS: dict[type[Filter], Callable[[Any, Any], Any]] = {
    EqualTo: operator.eq,
    GreaterThan: operator.gt,
    GreaterThanOrEqual: operator.ge,
    LessThan: operator.lt,
    LessThanOrEqual: operator.le,
}
_STRING_MATCHES: dict[type[Filter], Callable[[str, str], bool]] = {
    StringStartsWith: str.startswith,
    StringEndsWith: str.endswith,
    StringContains: str.__contains__,
}
_VALUE_FILTERS: tuple[type[Filter], ...] = (*_COMPARISONS, EqualNullSafe, In)


def _column(spark_filter: Filter) -> str | None:
    """The top-level column a filter is on (None for a nested field)."""
    attribute: tuple[str, ...] = getattr(spark_filter, "attribute", ())
    return attribute[0] if len(attribute) == 1 else None


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_timestamp(value: Any) -> bool:
    # Spark's TimestampType arrives as an aware datetime; a naive one would be ambiguous.
    return isinstance(value, datetime.datetime) and value.utcoffset() is not None


def _values(spark_filter: Filter) -> list[Any]:
    value = spark_filter.value  # type: ignore[attr-defined]
    return list(value) if isinstance(spark_filter, In) else [value]


def micros(value: datetime.datetime) -> int:
    """Microseconds since the epoch, exactly (Spark's precision)."""
    return (value - _EPOCH) // _MICROSECOND


@dataclass
class PushedFilters:
    """The filters a reader took: on the split's topic and partition, on row columns, and
    the bounds of the batches that can hold a row they keep."""

    mode: str = "records"
    split_filters: list[Filter] = field(default_factory=list)
    row_filters: list[Filter] = field(default_factory=list)
    bounds: BatchBounds = UNBOUNDED

    def push(self, filters: Iterable[Filter]) -> Iterable[Filter]:
        """Take what this source applies exactly; yield the rest back to Spark."""
        for spark_filter in filters:
            if self._is_split_filter(spark_filter):
                self.split_filters.append(spark_filter)
            elif self._is_row_filter(spark_filter):
                self.row_filters.append(spark_filter)
            else:
                yield spark_filter
        self.bounds = self._bounds()

    # --- which filters -------------------------------------------------------------------

    def _is_split_filter(self, spark_filter: Filter) -> bool:
        if isinstance(spark_filter, Not):
            return self._is_split_filter(spark_filter.child)
        column = _column(spark_filter)
        if column == "topic" and isinstance(spark_filter, tuple(_STRING_MATCHES)):
            return isinstance(spark_filter.value, str)  # type: ignore[attr-defined]
        if column not in ("topic", "partition"):
            return False
        if isinstance(spark_filter, IsNull | IsNotNull):
            return True
        if not isinstance(spark_filter, _VALUE_FILTERS):
            return False
        values = _values(spark_filter)
        if column == "topic":
            return all(isinstance(value, str) for value in values)
        return all(_is_int(value) for value in values)

    def _is_row_filter(self, spark_filter: Filter) -> bool:
        if isinstance(spark_filter, Not):
            return self._is_row_filter(spark_filter.child)
        column = _column(spark_filter)
        if column in OFFSET_COLUMNS and column in schema.MODES[self.mode].names:
            accepted_value = _is_int
        elif column == TIMESTAMP_COLUMN[self.mode]:
            accepted_value = _is_timestamp
        else:
            return False
        if isinstance(spark_filter, IsNull | IsNotNull):
            return True
        if not isinstance(spark_filter, _VALUE_FILTERS):
            return False
        values = _values(spark_filter)
        return bool(values) and all(accepted_value(value) for value in values)

    # --- planning ------------------------------------------------------------------------

    def selects(self, topic: str, partition: int) -> bool:
        """Whether the split filters keep the rows of this partition (never null there)."""
        where = {"topic": topic, "partition": partition}
        return all(_holds(f, where[_column_of(f)]) for f in self.split_filters)

    def _bounds(self) -> BatchBounds:
        first_offset = last_offset = min_micros = None
        for spark_filter in self.row_filters:
            if not isinstance(spark_filter, _VALUE_FILTERS):
                continue  # a negation or a null check bounds nothing
            low, high = _range(spark_filter)
            if _column(spark_filter) in OFFSET_COLUMNS:
                # offset in [low, high] lies in a batch ending at or after low and starting
                # at or before high; so do the batch columns' own values.
                if low is not None:
                    first_offset = low if first_offset is None else max(first_offset, low)
                if high is not None:
                    last_offset = high if last_offset is None else min(last_offset, high)
            elif low is not None:
                low = micros(low)
                min_micros = low if min_micros is None else max(min_micros, low)
        # A record's timestamp is at most its batch's max timestamp (Kafka milliseconds):
        # t * 1000 >= low holds for t >= ceil(low / 1000).
        min_timestamp = None if min_micros is None else -(-min_micros // 1000)
        return BatchBounds(first_offset, last_offset, min_timestamp)

    # --- reading -------------------------------------------------------------------------

    def apply(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        """The rows of `batch` every row filter keeps (a null result drops the row)."""
        if not self.row_filters:
            return batch
        masks = [_mask(f, batch) for f in self.row_filters]
        mask = masks[0]
        for other in masks[1:]:
            mask = pc.and_kleene(mask, other)
        return batch.filter(mask, null_selection_behavior="drop")


def _column_of(spark_filter: Filter) -> str:
    while isinstance(spark_filter, Not):
        spark_filter = spark_filter.child
    column = _column(spark_filter)
    assert column is not None
    return column


def _holds(spark_filter: Filter, value: Any) -> bool:
    """A split filter on a value that is never null (a split's topic or partition)."""
    if isinstance(spark_filter, Not):
        return not _holds(spark_filter.child, value)
    if isinstance(spark_filter, IsNull):
        return False
    if isinstance(spark_filter, IsNotNull):
        return True
    if isinstance(spark_filter, In):
        return value in spark_filter.value
    if isinstance(spark_filter, EqualNullSafe):
        return bool(value == spark_filter.value)
    match = _STRING_MATCHES.get(type(spark_filter))
    if match is not None:
        return match(value, spark_filter.value)  # type: ignore[attr-defined]
    # Python orders str by code point, as Spark orders UTF-8 strings by their bytes.
    compare = _PYTHON_COMPARISONS[type(spark_filter)]
    return bool(compare(value, spark_filter.value))  # type: ignore[attr-defined]


def _range(spark_filter: Filter) -> tuple[Any, Any]:
    """(lowest, highest) value a comparison or IN lets through; None where open."""
    values = _values(spark_filter)
    if isinstance(spark_filter, GreaterThan):
        value = values[0]
        step = 1 if _is_int(value) else _MICROSECOND
        return value + step, None
    if isinstance(spark_filter, GreaterThanOrEqual):
        return values[0], None
    if isinstance(spark_filter, LessThan):
        value = values[0]
        step = 1 if _is_int(value) else _MICROSECOND
        return None, value - step
    if isinstance(spark_filter, LessThanOrEqual):
        return None, values[0]
    return min(values), max(values)  # EqualTo, EqualNullSafe, In


def _array(values: list[Any], arrow_type: pa.DataType) -> pa.Array:
    """Filter values in a column's Arrow type (timestamps through exact microseconds)."""
    if arrow_type == schema.TIMESTAMP:
        return pa.array([micros(value) for value in values], pa.int64()).cast(arrow_type)
    return pa.array(values, arrow_type)


def _mask(spark_filter: Filter, batch: pa.RecordBatch) -> pa.Array:
    """A row filter's value on each row: true, false or null (SQL's three values)."""
    if isinstance(spark_filter, Not):
        return pc.invert(_mask(spark_filter.child, batch))  # NOT null is null
    column = batch.column(_column_of(spark_filter))
    if isinstance(spark_filter, IsNull):
        return pc.is_null(column)
    if isinstance(spark_filter, IsNotNull):
        return pc.is_valid(column)
    if isinstance(spark_filter, In):
        found = pc.is_in(column, value_set=_array(list(spark_filter.value), column.type))
        # is_in says false for a null; SQL's IN says null (so NOT IN drops it too).
        return pc.if_else(pc.is_valid(column), found, pa.scalar(None, pa.bool_()))
    value = _array([spark_filter.value], column.type)[0]  # type: ignore[attr-defined]
    if isinstance(spark_filter, EqualNullSafe):
        return pc.fill_null(pc.equal(column, value), False)  # never null
    return _COMPARISONS[type(spark_filter)](column, value)
