"""Record batches built byte by byte, for tests of bad input: every field may lie.

Independent of Brook's own encoder (protocol/record_batch.py), so a test of the
validator does not agree with itself: records are written field by field from Kafka's
DefaultRecord layout, the batch header from DefaultRecordBatch's, and the CRC sealed
last, so a batch that a test makes lie still passes the CRC check and reaches the walk.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Sequence

import crc32c
import zstandard

from brook.protocol.compression import compress

_HEADER = struct.Struct(">qiibIhiqqqhii")
_ATTRIBUTES_AT = 21  # the CRC covers attributes..end
_CRC_AT = 17


def varint(value: int) -> bytes:
    """A zig-zag varint (or varlong) as Kafka's ByteUtils writes it."""
    raw = (value << 1) ^ (value >> 63)
    out = bytearray()
    while True:
        byte = raw & 0x7F
        raw >>= 7
        if raw:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def record(
    *,
    timestamp_delta: int = 0,
    offset_delta: int = 0,
    key: bytes | None = b"k",
    value: bytes | None = b"v",
    headers: Sequence[tuple[bytes, bytes | None]] = (),
    key_length: int | None = None,
    value_length: int | None = None,
    header_count: int | None = None,
    length: int | None = None,
    trailing: bytes = b"",
) -> bytes:
    """One record; each `*_length`/`header_count`/`length` given overrides the true one."""
    body = bytearray(b"\x00")  # attributes
    body += varint(timestamp_delta) + varint(offset_delta)
    for data, claimed in ((key, key_length), (value, value_length)):
        true_length = -1 if data is None else len(data)
        body += varint(true_length if claimed is None else claimed) + (data or b"")
    body += varint(len(headers) if header_count is None else header_count)
    for name, header_value in headers:
        body += varint(len(name)) + name
        body += varint(-1 if header_value is None else len(header_value)) + (header_value or b"")
    body += trailing
    return varint(len(body) if length is None else length) + bytes(body)


def records(count: int, *, timestamp_deltas: Iterable[int] | None = None, **fields) -> bytes:
    """`count` well-formed records numbered 0, 1, 2, ..."""
    deltas = list(timestamp_deltas) if timestamp_deltas is not None else [0] * count
    return b"".join(
        record(offset_delta=i, timestamp_delta=deltas[i], **fields) for i in range(count)
    )


def batch(
    body: bytes,
    record_count: int,
    *,
    base_timestamp: int,
    max_timestamp: int,
    codec: int = 0,
    log_append_time: bool = False,
    compressed_body: bytes | None = None,
) -> bytes:
    """A sealed v2 batch around `body` (compressed with `codec` unless given as is)."""
    payload = compressed_body if compressed_body is not None else compress(codec, body)
    attributes = codec | (0x08 if log_append_time else 0)
    header = _HEADER.pack(
        0,  # base offset
        _HEADER.size - 12 + len(payload),
        -1,  # partition leader epoch
        2,  # magic
        0,  # crc, sealed below
        attributes,
        record_count - 1,  # last offset delta, consistent with the count
        base_timestamp,
        max_timestamp,
        -1,  # producer id
        -1,  # producer epoch
        -1,  # base sequence
        record_count,
    )
    sealed = bytearray(header + payload)
    struct.pack_into(">I", sealed, _CRC_AT, crc32c.crc32c(bytes(sealed[_ATTRIBUTES_AT:])))
    return bytes(sealed)


def zstd_bomb(value_bytes: int, *, timestamp: int) -> bytes:
    """A batch of one record whose value is `value_bytes` zeros, zstd-compressed as a
    stream so that neither the test nor the compressor ever holds the value."""
    prefix = bytearray(b"\x00" + varint(0) + varint(0) + varint(-1) + varint(value_bytes))
    suffix = varint(0)  # no headers
    length = len(prefix) + value_bytes + len(suffix)
    compressor = zstandard.ZstdCompressor(level=3).compressobj()
    parts = [compressor.compress(varint(length) + bytes(prefix))]
    chunk = bytes(1 << 20)
    left = value_bytes
    while left:
        step = min(left, len(chunk))
        parts.append(compressor.compress(chunk[:step]))
        left -= step
    parts.append(compressor.compress(suffix))
    parts.append(compressor.flush())
    return batch(
        b"",
        1,
        base_timestamp=timestamp,
        max_timestamp=timestamp,
        codec=4,
        compressed_body=b"".join(parts),
    )
