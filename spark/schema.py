"""The rows of the kafka-segments data source, as Arrow schemas (Spark's is derived from them).

`records` mode: one row per record, with its batch's header beside it. `batches` mode: one
row per batch, records not decoded. In both, a batch that fails its CRC or whose records do
not decode is one row with `error` set, and bytes that are not a batch at all (a torn tail,
a bad magic byte) are one row with only topic, partition, segment, position and `error`:
a damaged file is reported in the data, it never fails the job.

Names follow Kafka: `timestamp_type` is CreateTime or LogAppendTime (Kafka's TimestampType
names), `compression` is Kafka's codec name (none, gzip, snappy, lz4, zstd), and
`control_type` is ABORT or COMMIT for transaction markers (Kafka's ControlRecordType).
Kafka's NO_TIMESTAMP (-1) is a null timestamp.
"""

from __future__ import annotations

import pyarrow as pa  # type: ignore[import-untyped]  # pyarrow ships no type information

TIMESTAMP = pa.timestamp("us", tz="UTC")  # Spark's TimestampType
HEADER = pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())])

_WHERE = [
    pa.field("topic", pa.string()),
    pa.field("partition", pa.int32()),
]
_BATCH = [
    pa.field("batch_base_offset", pa.int64()),
    pa.field("batch_last_offset", pa.int64()),
    pa.field("producer_id", pa.int64()),
    pa.field("producer_epoch", pa.int16()),
    pa.field("base_sequence", pa.int32()),
    pa.field("is_transactional", pa.bool_()),
    pa.field("is_control", pa.bool_()),
    # committed, aborted, open (no marker yet), none (not transactional data); null
    # where the batch's header cannot be trusted (spark/transactions.py)
    pa.field("transaction_outcome", pa.string()),
]
_FILE = [
    pa.field("compression", pa.string()),
    pa.field("batch_crc_valid", pa.bool_()),
    pa.field("segment", pa.int64()),  # the segment's base offset (its file name)
    pa.field("position", pa.int64()),  # of the batch in the segment's .log file
    pa.field("error", pa.string()),
]

RECORDS = pa.schema(
    [
        *_WHERE,
        pa.field("offset", pa.int64()),
        pa.field("timestamp", TIMESTAMP),
        pa.field("timestamp_type", pa.string()),
        pa.field("key", pa.binary()),
        pa.field("value", pa.binary()),
        pa.field("headers", pa.list_(HEADER)),
        *_BATCH,
        pa.field("control_type", pa.string()),
        *_FILE,
    ]
)

BATCHES = pa.schema(
    [
        *_WHERE,
        *_BATCH,
        pa.field("record_count", pa.int32()),
        pa.field("base_timestamp", TIMESTAMP),
        pa.field("max_timestamp", TIMESTAMP),
        pa.field("timestamp_type", pa.string()),
        pa.field("partition_leader_epoch", pa.int32()),
        pa.field("size", pa.int32()),  # bytes of the batch, its log overhead included
        *_FILE,
    ]
)

MODES = {"records": RECORDS, "batches": BATCHES}
