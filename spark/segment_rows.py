"""One segment file as Arrow record batches: the work of one Spark task, without Spark.

Batches are walked and decoded by brook.storage.reader (the parser the broker and
`brook dump-log` use). What goes wrong in a file becomes a row with `error` set, never an
exception: a batch that fails its CRC is not decoded (its records cannot be trusted), a
batch whose records do not decode keeps its header fields, and bytes that are not a batch
at all end the walk of that segment, as they end Kafka's own reading of a log.

In records mode, runs of sound batches (CRC valid, not control records) are decoded
together into Arrow columns by record_columns, with no Python work per record but the
walk over records of varied sizes; a batch's header fields are one value per batch spread
over its rows by one Arrow `take`. What that decoder refuses, and the batches it does not
take, are decoded record by record (decode_records) into Python lists, gathered column by
column a batch at a time, as batches mode's rows are. Timestamps stay Kafka's
milliseconds until the Arrow batch is built, where they become Spark's microseconds in
one vectorized step.
"""

from __future__ import annotations

import contextlib
import functools
import gc
import itertools
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from operator import attrgetter
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa  # type: ignore[import-untyped]  # pyarrow ships no type information
import pyarrow.compute as pc  # type: ignore[import-untyped]  # pyarrow ships no type information

from brook.protocol.compression import Codec
from brook.protocol.errors import CorruptRecordError, InvalidRecordError
from brook.protocol.record_batch import BatchHeader, compute_crc, inflated_records
from brook.storage.end_transaction_marker import CONTROL_TYPE_NAMES, control_type
from brook.storage.reader import Batch, Damage, SegmentReader

from . import schema
from .record_columns import RecordColumns, Undecodable, decode_columns
from .transactions import ABORTED, NO_TRANSACTIONS, OPEN, PartitionTransactions

# Rows per Arrow batch handed to Spark (Spark's own default for Arrow batches is 10,000);
# a record batch is never split across two.
ROWS_PER_ARROW_BATCH = 10_000
# Bytes of records decoded together at most (a run of large records ends before 10,000).
RUN_BYTES = 64 * 1024 * 1024
NO_TIMESTAMP = -1  # Kafka's RecordBatch.NO_TIMESTAMP
CODEC_NAMES = {codec.value: codec.name.lower() for codec in Codec}

_offsets = attrgetter("offset")
_timestamps = attrgetter("timestamp")
_keys = attrgetter("key")
_values = attrgetter("value")
_headers = attrgetter("headers")


@dataclass(frozen=True, slots=True)
class BatchBounds:
    """Which batches of a segment can hold a row a query wants (from pushed-down filters).

    A batch whose last offset is below `first_offset` or whose max timestamp (Kafka
    milliseconds) is below `min_timestamp` is skipped without decoding; the walk ends at
    the first batch whose base offset is above `last_offset`, as offsets only grow
    through a log. Skipping is an optimisation: the rows are still filtered exactly.
    """

    first_offset: int | None = None
    last_offset: int | None = None
    min_timestamp: int | None = None

    @property
    def unbounded(self) -> bool:
        return (
            self.first_offset is None and self.last_offset is None and (self.min_timestamp is None)
        )


UNBOUNDED = BatchBounds()


def timestamp_type(header: BatchHeader) -> str:
    return "LogAppendTime" if header.is_log_append_time else "CreateTime"


def control_type_name(key: bytes | None) -> str:
    """ABORT or COMMIT; another control record (KRaft's) by its type id."""
    kind = control_type(key)
    return CONTROL_TYPE_NAMES.get(kind, str(kind))


# Columns that vary from record to record; every other column holds one value per batch.
_RECORD_COLUMNS = {"offset", "timestamp", "key", "value", "headers", "control_type", "error"}


class _Rows:
    """The columns of one Arrow batch of a schema, filled a record batch at a time.

    A column of batch fields keeps one value per record batch and is spread over the
    batch's rows when the Arrow batch is built (one `take` in Arrow): repeating fifteen
    header fields in Python lists for every record would cost more than decoding it.
    """

    def __init__(self, arrow_schema: pa.Schema, topic: str, partition: int, segment: int):
        self.schema = arrow_schema
        self.where = {"topic": topic, "partition": partition, "segment": segment}
        self.record_columns = [name for name in arrow_schema.names if name in _RECORD_COLUMNS]
        self.batch_columns = [name for name in arrow_schema.names if name not in _RECORD_COLUMNS]
        self.clear()

    def clear(self) -> None:
        self.rows = 0
        self.batches = 0
        self.batch_of_row: list[int] = []
        # Timestamp columns hold Kafka's milliseconds (or None) until to_arrow().
        self.columns: dict[str, list[Any]] = {name: [] for name in self.schema.names}

    def add(self, count: int, fields: dict[str, Any], varying: dict[str, list[Any]]) -> None:
        """`count` rows of one record batch: each `varying` column from its list of
        `count` values, `fields` (and topic, partition, segment) the same in each row,
        null in every other column."""
        columns = self.columns
        where = self.where
        for name in self.batch_columns:
            columns[name].append(fields.get(name, where.get(name)))
        for name in self.record_columns:
            values = varying.get(name)
            if values is not None:
                columns[name].extend(values)
            elif count == 1:
                columns[name].append(fields.get(name))
            else:
                columns[name].extend(itertools.repeat(fields.get(name), count))
        self.batch_of_row.extend(itertools.repeat(self.batches, count))
        self.batches += 1
        self.rows += count

    def to_arrow(self) -> pa.RecordBatch:
        spread = None
        if self.batches != self.rows:
            spread = pa.array(self.batch_of_row, pa.int32())
        arrays = []
        for field in self.schema:
            values = self.columns[field.name]
            if field.name == "headers":
                array = _header_array(values, field.type)
            elif field.type == schema.TIMESTAMP:
                array = _timestamp_array(values)
            else:
                array = pa.array(values, type=field.type)
            if spread is not None and len(array) != self.rows:
                array = array.take(spread)
            arrays.append(array)
        batch = pa.RecordBatch.from_arrays(arrays, schema=self.schema)
        self.clear()
        return batch


def _timestamp_array(millis: list[int | None] | np.ndarray) -> pa.Array:
    """Kafka milliseconds as Spark's timestamps: NO_TIMESTAMP (-1) becomes null."""
    values = pa.array(millis, pa.int64())
    micros = pc.if_else(
        pc.equal(values, NO_TIMESTAMP), pa.scalar(None, pa.int64()), pc.multiply(values, 1000)
    )
    return micros.cast(schema.TIMESTAMP)


def _header_array(
    rows: list[list[tuple[str, bytes | None]] | None], list_type: pa.ListType
) -> pa.Array:
    # Arrow converts the records' lists of (key, value) tuples itself, faster than
    # building the flat key and value arrays in Python. Rows with no record (a damaged
    # batch) have no headers rather than null ones.
    if None in rows:
        rows = [row or [] for row in rows]
    return pa.array(rows, type=list_type)


def _batch_fields(
    batch: Batch, crc_valid: bool, transactions: PartitionTransactions
) -> dict[str, Any]:
    header = batch.header
    return {
        "batch_base_offset": header.base_offset,
        "batch_last_offset": header.last_offset,
        "producer_id": header.producer_id,
        "producer_epoch": header.producer_epoch,
        "base_sequence": header.base_sequence,
        "is_transactional": header.is_transactional,
        "is_control": header.is_control,
        # A header failing its CRC may name the wrong producer or flags.
        "transaction_outcome": transactions.outcome(header) if crc_valid else None,
        "timestamp_type": timestamp_type(header),
        "compression": CODEC_NAMES.get(header.codec, f"codec {header.codec}"),
        "batch_crc_valid": crc_valid,
        "position": batch.position,
    }


def _crc_error(batch: Batch) -> str:
    return (
        f"the batch at position {batch.position} (offset {batch.header.base_offset}) fails"
        f" its CRC: stored {batch.header.crc:#010x}, computed"
        f" {compute_crc(batch.data, batch.header):#010x}"
    )


def _add_damage(rows: _Rows, damage: Damage) -> None:
    error = f"{damage.reason} ({damage.invalid_bytes} bytes not read)"
    rows.add(1, {"position": damage.position, "error": error}, {})


def read_segment(
    log_path: Path | str,
    topic: str,
    partition: int,
    mode: str = "records",
    start_position: int = 0,
    end_position: int | None = None,
    bounds: BatchBounds = UNBOUNDED,
    transactions: PartitionTransactions = NO_TRANSACTIONS,
    read_committed: bool = False,
) -> Iterator[pa.RecordBatch]:
    """Every row of one segment in the schema of `mode` (records or batches): of the
    batches starting in [start_position, end_position) (batch boundaries, as a split's
    are) that `bounds` leaves in. `transactions` gives each batch its outcome; with
    `read_committed`, the batches of aborted and open transactions are left out
    (the caller's bounds end the read below the last stable offset)."""
    hidden = functools.partial(_hidden, transactions) if read_committed else None
    with SegmentReader(log_path) as reader:
        if reader.base_offset is None:
            raise ValueError(f"{log_path} is not a segment: not named by a base offset")
        rows = _Rows(schema.MODES[mode], topic, partition, reader.base_offset)
        items = _wanted(reader.batches(start_position, end_position), bounds, hidden)
        if mode == "records":
            yield from _record_rows(rows, items, transactions)
            return
        for item in items:
            with _collector_paused():
                if isinstance(item, Damage):
                    _add_damage(rows, item)
                else:
                    _add_batch(rows, item, transactions)
                arrow = rows.to_arrow() if rows.rows >= ROWS_PER_ARROW_BATCH else None
            if arrow is not None:
                yield arrow
        if rows.rows:
            yield rows.to_arrow()


def _record_rows(
    rows: _Rows, items: Iterator[Batch | Damage], transactions: PartitionTransactions
) -> Iterator[pa.RecordBatch]:
    """Records mode: runs of sound batches decoded together (record_columns), a batch
    that fails its CRC, a control batch, damage, or a run the columnar decoder refuses
    decoded a record at a time. Rows keep the log's order: whichever of the two holds
    rows is emptied before the other takes any."""
    run = _RecordRun(rows)
    for item in items:
        if isinstance(item, Damage):
            yield from run.flush(transactions)
            _add_damage(rows, item)
        elif run.add(item):
            if rows.rows:
                yield rows.to_arrow()
            if run.full:
                yield from run.flush(transactions)
            continue
        else:
            yield from run.flush(transactions)
            with _collector_paused():
                _add_records(rows, item, transactions)
        if rows.rows >= ROWS_PER_ARROW_BATCH:
            yield rows.to_arrow()
    yield from run.flush(transactions)
    if rows.rows:
        yield rows.to_arrow()


class _RecordRun:
    """Sound batches (CRC valid, not control, inflated) queued for one columnar decode."""

    def __init__(self, rows: _Rows):
        self.rows = rows  # where a run the columnar decoder refuses is decoded instead
        self.clear()

    def clear(self) -> None:
        self.batches: list[Batch] = []
        self.headers: list[BatchHeader] = []
        self.sections: list[bytes | memoryview] = []
        self.records = 0
        self.bytes = 0

    @property
    def full(self) -> bool:
        return self.records >= ROWS_PER_ARROW_BATCH or self.bytes >= RUN_BYTES

    def add(self, batch: Batch) -> bool:
        """Queue the batch, or False if it is not one for the columnar decoder."""
        header = batch.header
        if header.is_control or not batch.crc_is_valid():
            return False
        try:
            section = inflated_records(batch.data, header)
        except CorruptRecordError:
            return False
        self.batches.append(batch)
        self.headers.append(header)
        self.sections.append(section)
        self.records += header.record_count
        self.bytes += len(section)
        return True

    def flush(self, transactions: PartitionTransactions) -> Iterator[pa.RecordBatch]:
        if not self.batches:
            return
        with _collector_paused():
            try:
                arrow = self._to_arrow(transactions)
            except Undecodable:
                arrow = None
                for batch in self.batches:
                    _add_records(self.rows, batch, transactions)
            self.clear()
        if arrow is not None:
            yield arrow
        elif self.rows.rows:
            yield self.rows.to_arrow()

    def _to_arrow(self, transactions: PartitionTransactions) -> pa.RecordBatch:
        columns = decode_columns(self.headers, self.sections)
        count = len(columns)
        spread = pa.array(columns.batch_of_record, pa.int32())
        fields = [_batch_fields(batch, True, transactions) for batch in self.batches]
        arrays = []
        for field in self.rows.schema:
            name = field.name
            if name == "offset":
                array = pa.array(columns.offset, pa.int64())
            elif name == "timestamp":
                array = _timestamp_array(self._timestamps(columns))
            elif name in ("key", "value", "headers"):
                array = getattr(columns, name)
            elif name in ("control_type", "error"):
                array = pa.nulls(count, field.type)
            elif name in self.rows.where:
                array = pa.repeat(pa.scalar(self.rows.where[name], field.type), count)
            else:
                per_batch = [batch_fields[name] for batch_fields in fields]
                array = pa.array(per_batch, field.type).take(spread)
            arrays.append(array)
        return pa.RecordBatch.from_arrays(arrays, schema=self.rows.schema)

    def _timestamps(self, columns: RecordColumns) -> np.ndarray:
        """In a LogAppendTime batch every record has the batch's max timestamp (Kafka's
        DefaultRecordBatch), unless that is NO_TIMESTAMP: then each its own."""
        appended = [
            header.is_log_append_time and header.max_timestamp != NO_TIMESTAMP
            for header in self.headers
        ]
        if not any(appended):
            return columns.timestamp
        max_timestamps = np.array([header.max_timestamp for header in self.headers], np.int64)
        use_max = np.array(appended)[columns.batch_of_record]
        return np.where(use_max, max_timestamps[columns.batch_of_record], columns.timestamp)


@contextlib.contextmanager
def _collector_paused() -> Iterator[None]:
    """Python's cyclic garbage collector off while an Arrow batch is built: building one
    allocates some 30,000 lists, tuples and records that all live until the batch is
    done, and the collections their allocation sets off (each scanning every one of
    them, finding no cycle) cost a quarter of the time. It is back on before the batch
    is handed over."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def _hidden(transactions: PartitionTransactions, batch: Batch) -> bool:
    """A batch a read_committed consumer is not given: transactional data aborted or
    not yet ended (a batch failing its CRC is kept: its row reports the damage)."""
    header = batch.header
    return (
        header.is_transactional
        and not header.is_control
        and transactions.outcome(header) in (ABORTED, OPEN)
        and batch.crc_is_valid()
    )


def _wanted(
    items: Iterator[Batch | Damage],
    bounds: BatchBounds,
    hidden: Callable[[Batch], bool] | None = None,
) -> Iterator[Batch | Damage]:
    """The batches whose rows are wanted, then the damage that ends the walk, if any."""
    for item in items:
        if isinstance(item, Damage):
            yield item
            return
        if not bounds.unbounded and not _within(item, bounds):
            if _past(item, bounds):
                return
            continue
        if hidden is not None and hidden(item):
            continue
        yield item


def _within(batch: Batch, bounds: BatchBounds) -> bool:
    header = batch.header
    if bounds.first_offset is not None and header.last_offset < bounds.first_offset:
        return False
    if bounds.last_offset is not None and header.base_offset > bounds.last_offset:
        return False
    return bounds.min_timestamp is None or header.max_timestamp >= bounds.min_timestamp


def _past(batch: Batch, bounds: BatchBounds) -> bool:
    """A batch starting after the last offset wanted ends the walk, unless its header
    is damaged (the CRC says so): a flipped bit must not hide the batches after it."""
    return (
        bounds.last_offset is not None
        and batch.header.base_offset > bounds.last_offset
        and batch.crc_is_valid()
    )


def _add_batch(rows: _Rows, batch: Batch, transactions: PartitionTransactions) -> None:
    header = batch.header
    crc_valid = batch.crc_is_valid()
    fields = _batch_fields(batch, crc_valid, transactions)
    fields["record_count"] = header.record_count
    fields["base_timestamp"] = header.base_timestamp
    fields["max_timestamp"] = header.max_timestamp
    fields["partition_leader_epoch"] = header.partition_leader_epoch
    fields["size"] = header.size
    if not crc_valid:
        fields["error"] = _crc_error(batch)
    rows.add(1, fields, {})


def _add_records(rows: _Rows, batch: Batch, transactions: PartitionTransactions) -> None:
    if not batch.crc_is_valid():
        rows.add(1, {**_batch_fields(batch, False, transactions), "error": _crc_error(batch)}, {})
        return
    fields = _batch_fields(batch, True, transactions)
    try:
        records = batch.records()
    except (InvalidRecordError, CorruptRecordError) as exc:
        fields["error"] = f"the batch at position {batch.position}: {exc}"
        rows.add(1, fields, {})
        return
    header = batch.header
    varying: dict[str, list[Any]] = {
        "offset": list(map(_offsets, records)),
        "key": list(map(_keys, records)),
        "value": list(map(_values, records)),
        "headers": list(map(_headers, records)),
    }
    # In a LogAppendTime batch every record has the broker's time, the batch's max
    # timestamp (Kafka's DefaultRecordBatch); when that is NO_TIMESTAMP, each its own.
    if not header.is_log_append_time or header.max_timestamp == NO_TIMESTAMP:
        varying["timestamp"] = list(map(_timestamps, records))
    else:
        fields["timestamp"] = header.max_timestamp
    if header.is_control:
        kinds: list[str | None] = []
        errors: list[str | None] = []
        for record in records:
            try:
                kinds.append(control_type_name(record.key))
                errors.append(None)
            except CorruptRecordError as exc:
                kinds.append(None)
                errors.append(str(exc))
        varying["control_type"] = kinds
        varying["error"] = errors
    rows.add(len(records), fields, varying)
