"""`python -m bench.record_walk`: the produce path's record walk, nanoseconds a record.

Times brook.protocol.record_walk.walk (straight-line code, runs of same-shaped records
checked at once, careful_walk for the rest) against careful_walk alone, record after
record (the walk as it was before the fast paths), on batches as producers send them:
9000 records of 100 B or 976 of 1 KiB (about 1 MB, librdkafka's default batch), random
values, timestamps spread over about 10 ms; and the cases the fast paths handle
differently (headers, timestamps spread over seconds, a zstd batch after inflating,
values of varied sizes, a batch of 10). Both walks must give the same answer. Each runs
`--repeat` times in turn and its best time counts: run it on a quiet machine.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable

import cramjam

from bench.cli import bench_parser
from brook.protocol.compression import Codec
from brook.protocol.record_batch import HEADER_SIZE, Record, build_batch, split_batches
from brook.protocol.record_walk import WalkResult, careful_walk_all, walk

BASE_TIMESTAMP = 1_700_000_000_000

Walker = Callable[[bytes | bytearray | memoryview, int, int, int, bool], WalkResult]


def records(
    count: int,
    value_size: int,
    *,
    key: bool = False,
    headers: list[tuple[str, bytes | None]] | None = None,
    varied: bool = False,
    tick: float = 0.001,
) -> list[Record]:
    rng = random.Random(1)
    out = []
    timestamp = BASE_TIMESTAMP
    for offset in range(count):
        timestamp += rng.random() < tick  # 1 ms every 1/tick records
        size = rng.randrange(value_size // 2, value_size * 3 // 2) if varied else value_size
        out.append(
            Record(
                offset,
                timestamp,
                b"key-%08d" % offset if key else None,
                rng.randbytes(size),
                list(headers or []),
            )
        )
    return out


def cases() -> list[tuple[str, bytes | bytearray | memoryview, int, int, int]]:
    """(name, data, start, end, record count) for each case."""
    specs: list[tuple[str, list[Record]]] = [
        ("100 B, no key", records(9000, 100)),
        ("100 B, 12 B key", records(9000, 100, key=True)),
        ("1 KiB, no key", records(976, 1024)),
        ("1 KiB, 12 B key", records(976, 1024, key=True)),
        (
            "100 B, 2 headers",
            records(9000, 100, key=True, headers=[("trace", b"abc"), ("h", None)]),
        ),
        ("100 B, timestamps over 1 s", records(9000, 100, tick=0.05)),
        ("50-150 B values", records(9000, 100, varied=True)),
        ("100 B, a batch of 10", records(10, 100)),
    ]
    out: list[tuple[str, bytes | bytearray | memoryview, int, int, int]] = []
    for name, batch_records in specs:
        buffer = bytearray(build_batch(batch_records))
        header = split_batches(buffer)[0]
        out.append((name, buffer, HEADER_SIZE, header.size, header.record_count))
    zstd = bytearray(build_batch(records(9000, 100), codec=Codec.ZSTD))
    header = split_batches(zstd)[0]
    inflated = cramjam.zstd.decompress(bytes(zstd[HEADER_SIZE : header.size])).read()
    view = memoryview(bytearray(inflated))  # as the broker's decompression scratch buffer
    out.append(("100 B, zstd (after inflating)", view, 0, len(view), header.record_count))
    return out


def best_of(
    repeat: int,
    walker: Walker,
    data: bytes | bytearray | memoryview,
    start: int,
    end: int,
    count: int,
) -> float:
    best = float("inf")
    for _ in range(repeat):
        started = time.perf_counter()
        walker(data, start, end, count, False)  # a topic that is not compacted
        best = min(best, time.perf_counter() - started)
    return best


def main(argv: list[str] | None = None) -> None:
    parser = bench_parser("python -m bench.record_walk", __doc__)
    parser.add_argument("--repeat", type=int, default=25, help="walks of each kind (the best)")
    args = parser.parse_args(argv)
    print(f"ns a record, best of {args.repeat}")
    print(f"  {'records':32} {'careful':>8} {'walk':>8} {'ratio':>7}")
    for name, data, start, end, count in cases():
        expected = careful_walk_all(data, start, end, count, True)
        assert expected[0] == 0 and walk(data, start, end, count, True) == expected, name
        times = [
            best_of(args.repeat, walker, data, start, end, count) / count * 1e9
            for walker in (careful_walk_all, walk)
        ]
        print(f"  {name:32} {times[0]:8.0f} {times[1]:8.0f} {times[0] / times[1]:6.1f}x")


if __name__ == "__main__":
    main()
