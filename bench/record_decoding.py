"""`python -m bench.record_decoding`: per-record decoding, hand-written varints against kio's.

Both decoders turn the same uncompressed batches (100 records each, a 10-byte key, a
100-byte value and one header per record) into the same Record objects; the reference
is brook.protocol.record_batch.decode_records (pure-Python varints), the candidate
brook.storage.record_decoder.decode_records (kio's native varint readers), which the
storage reader uses. Each decoder runs `--repeat` times in turn and its best time
counts; the ratio is what to compare between machines.

A second table times the varint readers alone on 3M varints of mixed sizes.
"""

from __future__ import annotations

import argparse
import random
import time
from collections.abc import Callable

from kio._kio_native import read_signed_varlong

from brook.protocol.record_batch import (
    BatchHeader,
    Record,
    build_batch,
    decode_records,
    read_varint,
    split_batches,
    write_varint,
)
from brook.storage.record_decoder import decode_records as decode_records_kio

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


def read_all_hand_written(data: bytes, count: int) -> int:
    position = total = 0
    for _ in range(count):
        value, position = read_varint(data, position)
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
    parser = argparse.ArgumentParser(prog="python -m bench.record_decoding", description=__doc__)
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--value-size", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)

    buffer, headers = build_segment(args.records, args.value_size)
    sample = headers[: min(len(headers), 20)]
    for header in sample:  # the same records, or the comparison means nothing
        assert decode_records(buffer, header) == decode_records_kio(buffer, header)
    print(
        f"{args.records:,} records of {args.value_size} B in {len(headers):,} batches"
        f" ({len(buffer) / 1e6:.1f} MB), best of {args.repeat}"
    )
    hand, count = best_of(args.repeat, lambda: decode_all(decode_records, buffer, headers))
    kio, count_kio = best_of(args.repeat, lambda: decode_all(decode_records_kio, buffer, headers))
    assert count == count_kio == args.records
    for name, seconds in (("hand-written varints", hand), ("kio native varints", kio)):
        print(f"  {name:22} {seconds:7.3f} s  {args.records / seconds / 1e6:5.2f} M records/s")
    print(f"  kio / hand-written: {hand / kio:.2f}x as fast")

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
