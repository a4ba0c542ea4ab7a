"""The record-batch codecs Kafka knows: none, gzip, snappy, lz4 and zstd.

Snappy comes in two framings: librdkafka writes raw snappy blocks, while the Java
client writes xerial's framed stream (a magic header followed by length-prefixed raw
blocks). Both must be read; Brook writes the xerial framing, as the Java client does,
because every client can read it.
"""

from __future__ import annotations

import enum
import gzip
import struct

import cramjam
from kio.schema.errors import ErrorCode

from .errors import CorruptRecordError, KafkaError


class UnsupportedCompressionTypeError(KafkaError):
    error_code = ErrorCode.unsupported_compression_type


class Codec(enum.IntEnum):
    """The compression id stored in the low three bits of a batch's attributes."""

    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4

    @classmethod
    def from_name(cls, name: str) -> Codec:
        return {"uncompressed": cls.NONE, "none": cls.NONE}.get(name) or cls[name.upper()]


XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = struct.Struct(">8sii")


def _snappy_decompress(data: bytes | memoryview) -> bytes:
    data = bytes(data)
    if not data.startswith(XERIAL_MAGIC):
        return bytes(cramjam.snappy.decompress_raw(data))
    position = _XERIAL_HEADER.size
    blocks = []
    while position < len(data):
        (length,) = struct.unpack_from(">i", data, position)
        position += 4
        if length < 0 or position + length > len(data):
            raise CorruptRecordError("truncated xerial snappy block")
        blocks.append(bytes(cramjam.snappy.decompress_raw(data[position : position + length])))
        position += length
    return b"".join(blocks)


def _snappy_compress(data: bytes) -> bytes:
    # One xerial block per 32 KiB of input, the block size the Java client uses.
    parts = [_XERIAL_HEADER.pack(XERIAL_MAGIC, 1, 1)]
    for start in range(0, len(data), 32 * 1024):
        block = bytes(cramjam.snappy.compress_raw(data[start : start + 32 * 1024]))
        parts.append(struct.pack(">i", len(block)))
        parts.append(block)
    return b"".join(parts)


def decompress(codec: int, data: bytes | memoryview) -> bytes:
    """Inflate a batch's records section; damaged input is a CORRUPT_MESSAGE."""
    try:
        if codec == Codec.GZIP:
            return gzip.decompress(bytes(data))
        if codec == Codec.SNAPPY:
            return _snappy_decompress(data)
        if codec == Codec.LZ4:
            return bytes(cramjam.lz4.decompress(bytes(data)))
        if codec == Codec.ZSTD:
            return bytes(cramjam.zstd.decompress(bytes(data)))
    except CorruptRecordError:
        raise
    except Exception as exc:  # every codec library raises its own error types
        raise CorruptRecordError(f"cannot decompress {Codec(codec).name} records: {exc}") from exc
    if codec == Codec.NONE:
        return bytes(data)
    raise UnsupportedCompressionTypeError(f"unknown compression codec id {codec}")


def compress(codec: int, data: bytes) -> bytes:
    if codec == Codec.NONE:
        return data
    if codec == Codec.GZIP:
        return gzip.compress(data, compresslevel=6, mtime=0)
    if codec == Codec.SNAPPY:
        return _snappy_compress(data)
    if codec == Codec.LZ4:
        return bytes(cramjam.lz4.compress(data))
    if codec == Codec.ZSTD:
        return bytes(cramjam.zstd.compress(data, 3))
    raise UnsupportedCompressionTypeError(f"unknown compression codec id {codec}")
