"""One segment file as Arrow record batches: the work of one Spark task, without Spark.

Batches are walked and decoded by brook.storage.reader (the parser the broker and
`brook dump-log` use). What goes wrong in a file becomes a row with `error` set, never an
exception: a batch that fails its CRC is not decoded (its records cannot be trusted), a
batch whose records do not decode keeps its header fields, and bytes that are not a batch
at all end the walk of that segment, as they end Kafka's own reading of a log.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa

from brook.protocol.compression import Codec
from brook.protocol.errors import CorruptRecordError, InvalidRecordError
from brook.protocol.record_batch import BatchHeader, compute_crc
from brook.storage.end_transaction_marker import CONTROL_TYPE_NAMES, control_type
from brook.storage.reader import Batch, Damage, SegmentReader

from . import schema

# Rows per Arrow batch handed to Spark (Spark's own default for Arrow batches is 10,000);
# a record batch is never split across two.
ROWS_PER_ARROW_BATCH = 10_000
NO_TIMESTAMP = -1  # Kafka's RecordBatch.NO_TIMESTAMP
CODEC_NAMES = {codec.value: codec.name.lower() for codec in Codec}


def timestamp_type(header: BatchHeader) -> str:
    return "LogAppendTime" if header.is_log_append_time else "CreateTime"


def micros(timestamp_ms: int) -> int | None:
    return None if timestamp_ms == NO_TIMESTAMP else timestamp_ms * 1000


def control_type_name(key: bytes | None) -> str:
    """ABORT or COMMIT; another control record (KRaft's) by its type id."""
    kind = control_type(key)
    return CONTROL_TYPE_NAMES.get(kind, str(kind))


class _Columns:
    """Column lists for one Arrow batch of a schema."""

    def __init__(self, arrow_schema: pa.Schema, topic: str, partition: int, segment: int):
        self.schema = arrow_schema
        self.topic = topic
        self.partition = partition
        self.segment = segment
        self.clear()

    def clear(self) -> None:
        self.rows = 0
        self.columns: dict[str, list[Any]] = {name: [] for name in self.schema.names}
        self.header_offsets = [0]
        self.header_keys: list[str] = []
        self.header_values: list[bytes | None] = []

    def add(self, **values: Any) -> None:
        """One row: the values given, null in every other column."""
        values["topic"] = self.topic
        values["partition"] = self.partition
        values["segment"] = self.segment
        for name, column in self.columns.items():
            column.append(values.get(name))
        if "headers" in self.columns:
            self.header_offsets.append(len(self.header_keys))
        self.rows += 1

    def to_arrow(self) -> pa.RecordBatch:
        arrays = []
        for field in self.schema:
            if field.name == "headers":
                arrays.append(self._headers(field.type))
            else:
                arrays.append(pa.array(self.columns[field.name], type=field.type))
        batch = pa.RecordBatch.from_arrays(arrays, schema=self.schema)
        self.clear()
        return batch

    def _headers(self, list_type: pa.ListType) -> pa.Array:
        # Built flat (all keys, all values, one offset per row) rather than from per-row
        # Python lists of dicts: a row's headers are a slice of the flat arrays. Rows with
        # no record (a damaged batch) have no headers rather than null ones.
        entries = pa.StructArray.from_arrays(
            [pa.array(self.header_keys, pa.string()), pa.array(self.header_values, pa.binary())],
            fields=list(list_type.value_type),
        )
        offsets = pa.array(self.header_offsets, pa.int32())
        return pa.ListArray.from_arrays(offsets, entries, type=list_type)


def _batch_fields(batch: Batch, crc_valid: bool) -> dict[str, Any]:
    header = batch.header
    return {
        "batch_base_offset": header.base_offset,
        "batch_last_offset": header.last_offset,
        "producer_id": header.producer_id,
        "producer_epoch": header.producer_epoch,
        "base_sequence": header.base_sequence,
        "is_transactional": header.is_transactional,
        "is_control": header.is_control,
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


def _damage_row(columns: _Columns, damage: Damage) -> None:
    columns.add(
        position=damage.position,
        error=f"{damage.reason} ({damage.invalid_bytes} bytes not read)",
    )


def read_segment(
    log_path: Path | str, topic: str, partition: int, mode: str = "records"
) -> Iterator[pa.RecordBatch]:
    """Every row of one segment in the schema of `mode` (records or batches)."""
    add_batch = _add_records if mode == "records" else _add_batch
    with SegmentReader(log_path) as reader:
        if reader.base_offset is None:
            raise ValueError(f"{log_path} is not a segment: not named by a base offset")
        columns = _Columns(schema.MODES[mode], topic, partition, reader.base_offset)
        for item in reader.batches():
            if isinstance(item, Damage):
                _damage_row(columns, item)
                break
            add_batch(columns, item)
            if columns.rows >= ROWS_PER_ARROW_BATCH:
                yield columns.to_arrow()
        if columns.rows:
            yield columns.to_arrow()


def _add_batch(columns: _Columns, batch: Batch) -> None:
    header = batch.header
    crc_valid = batch.crc_is_valid()
    columns.add(
        **_batch_fields(batch, crc_valid),
        record_count=header.record_count,
        base_timestamp=micros(header.base_timestamp),
        max_timestamp=micros(header.max_timestamp),
        partition_leader_epoch=header.partition_leader_epoch,
        size=header.size,
        error=None if crc_valid else _crc_error(batch),
    )


def _add_records(columns: _Columns, batch: Batch) -> None:
    if not batch.crc_is_valid():
        columns.add(**_batch_fields(batch, False), error=_crc_error(batch))
        return
    fields = _batch_fields(batch, True)
    try:
        records = batch.records()
    except (InvalidRecordError, CorruptRecordError) as exc:
        columns.add(**fields, error=f"the batch at position {batch.position}: {exc}")
        return
    header = batch.header
    log_append_time = micros(header.max_timestamp) if header.is_log_append_time else None
    # (None also when a LogAppendTime batch has NO_TIMESTAMP: then each record's own.)
    header_keys = columns.header_keys
    header_values = columns.header_values
    for record in records:
        kind = error = None
        if header.is_control:
            try:
                kind = control_type_name(record.key)
            except CorruptRecordError as exc:
                error = str(exc)
        for name, value in record.headers:
            header_keys.append(name)
            header_values.append(value)
        columns.add(
            **fields,
            offset=record.offset,
            # In a LogAppendTime batch every record has the broker's time, the batch's
            # max timestamp (Kafka's DefaultRecordBatch).
            timestamp=micros(record.timestamp) if log_append_time is None else log_append_time,
            key=record.key,
            value=record.value,
            control_type=kind,
            error=error,
        )
