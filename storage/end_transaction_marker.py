"""The COMMIT or ABORT marker a control batch carries (Kafka's EndTransactionMarker).

A transaction coordinator ends a producer's transaction in a partition by appending a
transactional control batch of one record whose key is (version int16, type int16),
ABORT = 0 or COMMIT = 1, and whose value is (version int16, coordinator epoch int32).
The producer state reads it to complete the producer's transaction; an ABORT of a
transaction that wrote data also goes into the segment's `.txnindex`; `brook dump-log`
prints it.

Parsed with struct rather than kio's EndTxnMarker schema: kio's reader brings asyncio
along, which the storage reader (Spark executors, tools) must not load.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from brook.protocol.errors import CorruptRecordError
from brook.protocol.record_batch import BatchHeader, decode_records

ABORT = 0
COMMIT = 1
CONTROL_TYPE_NAMES = {ABORT: "ABORT", COMMIT: "COMMIT"}
_KEY = struct.Struct(">hh")  # version, type
_VALUE = struct.Struct(">hi")  # version, coordinator epoch


@dataclass(frozen=True, slots=True)
class EndTransactionMarker:
    control_type: int  # ABORT or COMMIT
    coordinator_epoch: int

    @property
    def is_abort(self) -> bool:
        return self.control_type == ABORT

    @property
    def name(self) -> str:
        return CONTROL_TYPE_NAMES[self.control_type]


def control_type(key: bytes | None) -> int:
    """A control record's type (Kafka's ControlRecordType.parse): a newer key version
    still starts with the type."""
    if key is None or len(key) < _KEY.size:
        raise CorruptRecordError(f"control record key of {len(key or b'')} bytes is too short")
    version, kind = _KEY.unpack_from(key)
    if version < 0:
        raise CorruptRecordError(f"control record key has version {version}")
    return int(kind)


def parse_end_txn_marker(key: bytes | None, value: bytes | None) -> EndTransactionMarker | None:
    """The marker of a control record; None for another control type (leader change)."""
    kind = control_type(key)
    if kind not in CONTROL_TYPE_NAMES:
        return None
    if value is None or len(value) < _VALUE.size:
        raise CorruptRecordError(
            f"end transaction marker value of {len(value or b'')} bytes is too short"
        )
    version, coordinator_epoch = _VALUE.unpack_from(value)
    if version < 0:
        raise CorruptRecordError(f"Invalid version found for end transaction marker: {version}")
    return EndTransactionMarker(kind, coordinator_epoch)


def read_end_txn_marker(
    buffer: bytes | bytearray | memoryview, header: BatchHeader
) -> EndTransactionMarker | None:
    """The marker of a control batch whose whole bytes `buffer` holds (at
    `header.position`). None when the batch holds no marker: an empty control batch
    (compaction removed its transaction), or another control type."""
    records = decode_records(buffer, header)
    if not records:
        return None
    return parse_end_txn_marker(records[0].key, records[0].value)
