"""`python -m bench.record_decoding`: Brook's record decoder, and the varint readers it
is built on.

brook.protocol.record_batch.decode_records (the one decoder: the broker's validator,
the storage reader, the cleaner, the Spark jobs) turns uncompressed batches (100
records each, a 10-byte key, a 100-byte value and one header per record) into Record
objects; its best of `--repeat` runs is printed as records per second.

A second table is why it reads varints with kio's native readers: on 3M varints of mixed
sizes, kio.serial.readers.read_signed_varlong against the plain Python loop that Brook's
decoder used before (kept here as the baseline).
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable

from kio.serial.readers import read_signed_varlong

from bench.cli import bench_parser
from brook.protocol.record_batch import (
    BatchHeader,
    Record,
    build_batch,
    decode_records,
    split_batches,
    write_varint,
)

RECORDS_PER_BATCH = 100
BASE_TIMESTAMP = 1_700_000_000_000


def build_segment(record_count: int, value_size: int) -> tuple[bytes, list[BatchHeader]]:
    batches = []
    for first in range(0, record_count, RECORDS_PER_BATCH):
        records = [
            Record(
                offset,
                BASE_TIMESTAMP + 7 * (offset - first),
                b"key-%06d" % (offset % 1_000_000),
                b"v" * value_size,
                [("trace", b"abc")],
            )
            for offset in range(first, min(first + RECORDS_PER_BATCH, record_count))
        ]
        batches.append(build_batch(records, base_offset=first))
    buffer = b"".join(batches)
    return buffer, split_batches(buffer)


Decoder = Callable[[bytes, BatchHeader], list[Record]]


def best_of(repeat: int, run: Callable[[], int]) -> tuple[float, int]:
    best = float("inf")
    result = 0
    for _ in range(repeat):
        started = time.perf_counter()
        result = run()
        best = min(best, time.perf_counter() - started)
    return best, result


def decode_all(decoder: Decoder, buffer: bytes, headers: list[BatchHeader]) -> int:
    return sum(len(decoder(buffer, header)) for header in headers)


def read_varint_in_python(data: bytes, position: int) -> tuple[int, int]:
    """The baseline: a zig-zag varint read byte by byte; (value, next position)."""
    shift = raw = 0
    while True:
        byte = data[position]
        position += 1
        raw |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return (raw >> 1) ^ -(raw & 1), position
        shift += 7


def read_all_hand_written(data: bytes, count: int) -> int:
    position = total = 0
    for _ in range(count):
        value, position = read_varint_in_python(data, position)
        total += value
    return total


def read_all_kio(data: bytes, count: int) -> int:
    position = total = 0
    for _ in range(count):
        value, size = read_signed_varlong(data, position)
        position += size
        total += value
    return total


def main(argv: list[str] | None = None) -> None:
    parser = bench_parser("python -m bench.record_decoding", __doc__)
    parser.add_argument("--records", type=int, default=1_000_000, help="records in the segment")
    parser.add_argument("--value-size", type=int, default=100, help="bytes of each record's value")
    parser.add_argument("--repeat", type=int, default=3, help="decodings of each kind (the best)")
    args = parser.parse_args(argv)

    buffer, headers = build_segment(args.records, args.value_size)
    print(
        f"{args.records:,} records of {args.value_size} B in {len(headers):,} batches"
        f" ({len(buffer) / 1e6:.1f} MB), best of {args.repeat}"
    )
    seconds, count = best_of(args.repeat, lambda: decode_all(decode_records, buffer, headers))
    assert count == args.records
    print(f"  decode_records {seconds:7.3f} s  {args.records / seconds / 1e6:5.2f} M records/s")

    rng = random.Random(1)
    choices = [0, 5, 60, 100, 130, 700, 5_000, -1, 1_000_000, BASE_TIMESTAMP]
    values = [rng.choice(choices) for _ in range(3_000_000)]
    out = bytearray()
    for value in values:
        write_varint(value, out)
    data = bytes(out)
    hand, total = best_of(args.repeat, lambda: read_all_hand_written(data, len(values)))
    kio, total_kio = best_of(args.repeat, lambda: read_all_kio(data, len(values)))
    assert total == total_kio == sum(values)
    print(f"{len(values):,} varints alone, best of {args.repeat}")
    for name, seconds in (("hand-written read_varint", hand), ("kio read_signed_varlong", kio)):
        print(f"  {name:24} {seconds:7.3f} s  {seconds / len(values) * 1e9:5.0f} ns per varint")
    print(f"  kio / hand-written: {hand / kio:.2f}x as fast")


if __name__ == "__main__":
    main()
