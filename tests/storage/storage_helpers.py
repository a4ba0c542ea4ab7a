"""Helpers shared by the storage tests (a uniquely named module, not `conftest`)."""

from __future__ import annotations

import struct
from collections.abc import Callable

from kafka.record import MemoryRecordsBuilder

from brook.protocol.record_batch import Record, build_batch
from brook.storage import AppendInfo, Log

BASE_TS = 1_700_000_000_000

BatchFactory = Callable[..., bytearray]


def make_batch(
    count: int = 1,
    timestamp: int = BASE_TS,
    *,
    timestamps: list[int] | None = None,
    value_size: int = 20,
    key: bytes | None = b"key",
    codec: int = 0,
    tag: int = 0,
) -> bytearray:
    """One v2 batch of `count` records (offsets 0..count-1, assigned on append)."""
    stamps = timestamps if timestamps is not None else [timestamp] * count
    records = [
        Record(
            offset=i,
            timestamp=stamps[i],
            key=key,
            value=(b"%d-%d-" % (tag, i)).ljust(value_size, b"x"),
            headers=[("h", b"%d" % i)],
        )
        for i in range(len(stamps))
    ]
    return bytearray(build_batch(records, codec=codec))


def append(log: Log, *batches: bytearray, epoch: int = 0, now_ms: int = BASE_TS) -> AppendInfo:
    """Append batches as the leader (concatenated as one produce) and advance the HW."""
    info = log.append_as_leader(b"".join(batches), epoch, now_ms)
    log.high_watermark = log.log_end_offset
    return info


def build_kafka_python_segment(
    first_offset: int, batches: int, per_batch: int
) -> tuple[bytes, list]:
    """A `.log` file's bytes as kafka-python builds batches (half of them gzip), with the
    (offset, timestamp, key, value) of every record."""
    data = b""
    expected = []
    offset = first_offset
    for b in range(batches):
        builder = MemoryRecordsBuilder(magic=2, compression_type=b % 2, batch_size=1 << 20)
        for r in range(per_batch):
            # Timestamps step back inside each batch to exercise the time index.
            ts = BASE_TS + b * 100 + (per_batch - r) * 3
            key = b"k%d" % (offset + r)
            value = b"value-%d" % (offset + r) * 5
            builder.append(ts, key, value, headers=[("n", b"%d" % r)])
            expected.append((offset + r, ts, key, value))
        builder.close()
        batch = bytearray(builder.buffer())
        # kafka-python builds producer batches (base offset 0); a broker assigns the
        # base offset, which the CRC does not cover.
        struct.pack_into(">q", batch, 0, offset)
        data += bytes(batch)
        offset += per_batch
    return data, expected
