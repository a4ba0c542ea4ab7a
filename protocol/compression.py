"""The record-batch codecs Kafka knows: none, gzip, snappy, lz4 and zstd.

Snappy comes in two framings: librdkafka writes raw snappy blocks, while the Java
client writes xerial's framed stream (a magic header followed by length-prefixed raw
blocks). Both must be read; Brook writes the xerial framing, as the Java client does,
because every client can read it.
"""

from __future__ import annotations

import enum
import functools
import gzip
import mmap
import struct
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from brook.protocol.errors import UnsupportedCompressionTypeError

from .errors import CorruptRecordError, RecordTooLargeError

if TYPE_CHECKING:
    from types import ModuleType


@functools.cache
def _cramjam() -> ModuleType:
    """cramjam (snappy, lz4, zstd, gzip), imported on the first compressed batch: a broker
    whose clients never compress does not load it (about 2 MiB and 20 ms of its start)."""
    import cramjam

    return cramjam


class Codec(enum.IntEnum):
    """The compression id stored in the low three bits of a batch's attributes."""

    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4

    @classmethod
    def from_name(cls, name: str) -> Codec:
        """The codec of a compression.type value ("uncompressed" is Kafka's name for none)."""
        if name in ("uncompressed", "none"):
            return cls.NONE
        return cls[name.upper()]


XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = struct.Struct(">8sii")


def _snappy_decompress(data: bytes | memoryview) -> bytes:
    data = bytes(data)
    if not data.startswith(XERIAL_MAGIC):
        return bytes(_cramjam().snappy.decompress_raw(data))
    position = _XERIAL_HEADER.size
    blocks = []
    while position < len(data):
        (length,) = struct.unpack_from(">i", data, position)
        position += 4
        if length < 0 or position + length > len(data):
            raise CorruptRecordError("truncated xerial snappy block")
        blocks.append(bytes(_cramjam().snappy.decompress_raw(data[position : position + length])))
        position += length
    return b"".join(blocks)


def _snappy_compress(data: bytes) -> bytes:
    # One xerial block per 32 KiB of input, the block size the Java client uses.
    parts = [_XERIAL_HEADER.pack(XERIAL_MAGIC, 1, 1)]
    for start in range(0, len(data), 32 * 1024):
        block = bytes(_cramjam().snappy.compress_raw(data[start : start + 32 * 1024]))
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
            return bytes(_cramjam().lz4.decompress(bytes(data)))
        if codec == Codec.ZSTD:
            return bytes(_cramjam().zstd.decompress(bytes(data)))
    except CorruptRecordError:
        raise
    except Exception as exc:  # every codec library raises its own error types
        raise CorruptRecordError(f"cannot decompress {Codec(codec).name} records: {exc}") from exc
    if codec == Codec.NONE:
        return bytes(data)
    raise UnsupportedCompressionTypeError(f"unknown compression codec id {codec}")


# Kafka's default levels (compression.gzip.level -1 is zlib's default, 6).
DEFAULT_LEVELS = {Codec.GZIP: 6, Codec.LZ4: 9, Codec.ZSTD: 3}
GZIP_DEFAULT_LEVEL = -1


def compress(codec: int, data: bytes, level: int | None = None) -> bytes:
    """`level`: the codec's compression level (compression.gzip/lz4/zstd.level); None
    or gzip's -1 is Kafka's default. Snappy has no levels."""
    if codec == Codec.NONE:
        return data
    if level is None or (codec == Codec.GZIP and level == GZIP_DEFAULT_LEVEL):
        level = DEFAULT_LEVELS.get(Codec(codec))
    if codec == Codec.GZIP:
        return gzip.compress(data, compresslevel=level or 6, mtime=0)
    if codec == Codec.SNAPPY:
        return _snappy_compress(data)
    if codec == Codec.LZ4:
        return bytes(_cramjam().lz4.compress(data, level))
    if codec == Codec.ZSTD:
        return bytes(_cramjam().zstd.compress(data, level))
    raise UnsupportedCompressionTypeError(f"unknown compression codec id {codec}")


# --- bounded decompression (the produce path) -----------------------------------------

# What cramjam's *_into functions say when the output buffer is full: the stream holds
# more than the buffer, which decompress_bounded turns into "too large".
_OUTPUT_FULL = "failed to write whole buffer"
# A per-thread output buffer that touched more than this is unmapped after use, so one
# large batch does not stay resident; smaller use keeps its pages for the next batch.
_RETAINED_SCRATCH_BYTES = 8 * 1024 * 1024


class _Scratch(threading.local):
    """One output buffer per thread (each BrokerThread of a test runs its own loop).

    An anonymous mapping costs address space only until bytes are written into it, so it
    can be as large as the bound while a small batch touches a few pages.
    """

    buffer: mmap.mmap | None = None


_scratch = _Scratch()


@contextmanager
def decompressed(codec: int, data: bytes | memoryview, limit: int) -> Iterator[memoryview]:
    """Inflate a batch's records section, refusing more than `limit` bytes of output.

    The bytes are written into a reused per-thread buffer and are valid only inside the
    `with` block. A stream that inflates past `limit` is stopped when the buffer is
    full, so a tiny batch that would expand into gigabytes costs at most `limit` bytes
    of memory, and only for the moment it is checked.
    """
    buffer = _scratch.buffer
    if buffer is None or len(buffer) != limit + 1:
        if buffer is not None:
            buffer.close()
        buffer = _scratch.buffer = mmap.mmap(-1, limit + 1)
    size = limit + 1  # what to assume touched if inflating fails part way
    view = memoryview(buffer)
    try:
        size = _decompress_into(codec, data, view, limit)
        if size > limit:
            raise _too_large(codec, limit)
        with view[:size] as records:
            yield records
    finally:
        view.release()
        if size > _RETAINED_SCRATCH_BYTES:
            # Give the pages back: unmapping is the one way that works on every platform.
            buffer.close()
            _scratch.buffer = None


def _too_large(codec: int, limit: int) -> RecordTooLargeError:
    # Kafka sets no bound on what a batch inflates to (it streams the records through a
    # small buffer), so it has no error for this exactly. MESSAGE_TOO_LARGE is its answer
    # for a batch larger than the broker accepts, which is what this is; clients take it
    # as final rather than retrying, and the Java producer splits such a batch in two and
    # sends the halves, which is what a legitimate over-bound batch needs.
    return RecordTooLargeError(
        f"The {Codec(codec).name.lower()} records of the batch inflate to more than"
        f" {limit} bytes, the most a batch may hold uncompressed"
    )


def _decompress_into(codec: int, data: bytes | memoryview, out: memoryview, limit: int) -> int:
    try:
        if codec == Codec.GZIP:
            return int(_cramjam().gzip.decompress_into(data, out))
        if codec == Codec.SNAPPY:
            return _snappy_decompress_into(data, out, limit)
        if codec == Codec.LZ4:
            return int(_cramjam().lz4.decompress_into(data, out))
        if codec == Codec.ZSTD:
            return int(_cramjam().zstd.decompress_into(data, out))
    except (CorruptRecordError, RecordTooLargeError):
        raise
    except Exception as exc:  # every codec library raises its own error types
        if _OUTPUT_FULL in str(exc):
            raise _too_large(codec, limit) from None
        raise CorruptRecordError(f"cannot decompress {Codec(codec).name} records: {exc}") from exc
    raise UnsupportedCompressionTypeError(f"unknown compression codec id {codec}")


def _snappy_decompress_into(data: bytes | memoryview, out: memoryview, limit: int) -> int:
    # Raw snappy states its inflated length up front, so an oversized block is refused
    # before any of it is inflated; xerial framing is a sequence of such blocks.
    data = bytes(data)
    if not data.startswith(XERIAL_MAGIC):
        blocks = [data]
    else:
        blocks = []
        position = _XERIAL_HEADER.size
        while position < len(data):
            (length,) = struct.unpack_from(">i", data, position)
            position += 4
            if length < 0 or position + length > len(data):
                raise CorruptRecordError("truncated xerial snappy block")
            blocks.append(data[position : position + length])
            position += length
    written = 0
    for block in blocks:
        size = _cramjam().snappy.decompress_raw_len(block)
        if written + size > limit:
            raise _too_large(Codec.SNAPPY, limit)
        written += _cramjam().snappy.decompress_raw_into(block, out[written : written + size])
    return written
