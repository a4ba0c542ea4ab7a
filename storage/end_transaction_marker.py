"""The COMMIT or ABORT marker a control batch carries (Kafka's EndTransactionMarker).

A transaction coordinator ends a producer's transaction in a partition by appending a
transactional control batch of one record: its key is (version int16, type int16),
ABORT = 0 or COMMIT = 1; its value (version int16, coordinator epoch int32). The
producer state reads it to complete the producer's transaction; an ABORT of a
transaction that wrote data also goes into the segment's `.txnindex`.
"""

from __future__ import annotations

from dataclasses import dataclass

from brook.protocol.coordinator_records import (
    ControlRecordType,
    EndTxnMarker,
    decode_control_key,
    decode_value,
)
from brook.protocol.errors import CorruptRecordError
from brook.protocol.record_batch import BatchHeader, decode_records


@dataclass(frozen=True, slots=True)
class EndTransactionMarker:
    control_type: ControlRecordType
    coordinator_epoch: int

    @property
    def is_abort(self) -> bool:
        return self.control_type is ControlRecordType.ABORT


def read_end_txn_marker(
    buffer: bytes | bytearray | memoryview, header: BatchHeader
) -> EndTransactionMarker | None:
    """The marker of a control batch whose whole bytes `buffer` holds (at
    `header.position`). None when the batch holds no marker: an empty control batch
    (compaction removed its transaction), or another control type (leader change)."""
    records = decode_records(buffer, header)
    if not records:
        return None
    record = records[0]
    key = decode_control_key(record.key or b"")
    if key.type not in (ControlRecordType.ABORT, ControlRecordType.COMMIT):
        return None
    value = decode_value(key, record.value)
    if not isinstance(value, EndTxnMarker):
        raise CorruptRecordError(
            f"the transaction marker at offset {header.base_offset} has no value"
        )
    return EndTransactionMarker(ControlRecordType(key.type), value.coordinator_epoch)
