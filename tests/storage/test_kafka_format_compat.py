"""Byte compatibility with Kafka's on-disk format, checked with kafka-python's codec.

kafka-python implements Kafka's record batch v2 independently of Brook: what Brook
writes must decode there record by record, and segment files built by it must open,
recover and read back in Brook.
"""

from __future__ import annotations

import struct
from pathlib import Path

from kafka.record import MemoryRecords
from storage_helpers import BASE_TS, BatchFactory, append, build_kafka_python_segment

from brook.protocol.compression import Codec
from brook.protocol.record_batch import iter_records, split_batches
from brook.storage import Log, LogConfig

CONFIG = LogConfig(segment_bytes=4096, index_interval_bytes=300)


def kafka_python_batches(path: Path) -> list:
    data = path.read_bytes()
    records = MemoryRecords(data)
    batches = []
    while records.has_next():
        batch = records.next_batch()
        assert batch.validate_crc()
        batches.append(batch)
    return batches


def test_brook_segments_decode_with_kafka_python(
    partition_dir: Path, make_batch: BatchFactory
) -> None:
    log = Log.open(partition_dir, CONFIG)
    expected = {}
    for i in range(0, 60, 2):
        # Plain and gzip-compressed batches in turn.
        for j in (i, i + 1):
            batch = make_batch(
                3, BASE_TS + j, codec=(Codec.NONE, Codec.GZIP)[j % 2], tag=j, value_size=40
            )
            info = append(log, batch, epoch=7)
            for n in range(3):
                value = (b"%d-%d-" % (j, n)).ljust(40, b"x")
                expected[info.first_offset + n] = (BASE_TS + j, value)
    log.close()
    segments = sorted(partition_dir.glob("*.log"))
    assert len(segments) > 1
    seen = {}
    for path in segments:
        base_offset = int(path.name[:20])
        batches = kafka_python_batches(path)
        assert batches[0].base_offset == base_offset
        for batch in batches:
            assert batch.magic == 2 and batch.leader_epoch == 7
            for record in batch:
                assert record.key == b"key"
                assert record.headers == [("h", b"%d" % (record.offset - batch.base_offset))]
                seen[record.offset] = (record.timestamp, record.value)
        # DumpLogSegments' check: each index entry names the last offset of the batch
        # that starts at its position.
        index = path.with_suffix(".index").read_bytes()
        assert index
        starts = {}
        position = 0
        for batch in batches:
            starts[position] = batch.next_offset - 1
            position += batch.size_in_bytes
        for relative, file_position in struct.iter_unpack(">ii", index):
            assert starts[file_position] == base_offset + relative
        # The time index holds increasing timestamps of records in this file.
        time_index = list(struct.iter_unpack(">qi", path.with_suffix(".timeindex").read_bytes()))
        assert time_index == sorted(time_index)
        for timestamp, relative in time_index:
            assert expected[base_offset + relative][0] == timestamp
    assert seen == expected


def test_segment_written_by_kafka_python_opens_and_reads(tmp_path: Path) -> None:
    partition_dir = tmp_path / "legacy-5"
    partition_dir.mkdir()
    first, second = build_kafka_python_segment(0, 25, 4), build_kafka_python_segment(100, 10, 3)
    (partition_dir / "00000000000000000000.log").write_bytes(first[0])
    (partition_dir / "00000000000000000100.log").write_bytes(second[0])
    expected = first[1] + second[1]

    log = Log.open(partition_dir, CONFIG, clean_shutdown=False)
    assert (log.log_start_offset, log.log_end_offset) == (0, 130)
    assert (partition_dir / "00000000000000000000.index").exists()
    log.high_watermark = log.log_end_offset

    got = []
    offset = 0
    while offset < log.log_end_offset:
        records = list(iter_records(log.read(offset, 500).records))
        got += [(r.offset, r.timestamp, r.key, r.value) for r in records if r.offset >= offset]
        offset = records[-1].offset + 1
    assert got == expected

    for target in (BASE_TS, BASE_TS + 5, BASE_TS + 1050, BASE_TS + 1209):
        found = log.fetch_offset_by_timestamp(target)
        want = next((o, ts) for o, ts, _, _ in expected if ts >= target)
        assert (found.offset, found.timestamp) == want
    best = log.max_timestamp_and_offset()
    top = max(ts for _, ts, _, _ in expected)
    assert (best.timestamp, best.offset) == (top, next(o for o, ts, _, _ in expected if ts == top))

    # Appending after Kafka's data keeps the offsets going.
    info = append(log, bytearray(build_kafka_python_segment(0, 1, 2)[0]))
    assert info.first_offset == 130
    # A read stays within one segment; the next read picks up the next one.
    assert [h.base_offset for h in split_batches(log.read(96, 10**6).records)] == [96]
    assert split_batches(log.read(100, 10**6).records)[0].base_offset == 100
    log.close()
